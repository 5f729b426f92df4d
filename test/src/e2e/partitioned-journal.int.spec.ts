import { jetstream } from '@nats-io/jetstream';
import { createSubjects, type ConsumerRole, type Subjects } from '@toolgate/contracts';
import { eventually, NATS_URL } from '@toolgate/testing';
import {
  answerFaults,
  grantsOf,
  partitionPlacementFaults,
  submitEachTenantTwice,
  submitTwice,
  tenantEventsByPartition,
  tenantsPerPartition,
} from '../support/partitioned-tenants';
import { journalStatsCaughtUp, runCliCaptured } from '../support/cli-run';
import { readyz, servicesOf, until503 } from '../support/readiness';
import { startTestStack, TEST_GRANTS, type TestStack } from '../support/test-stack';

const PARTITIONS = 4;
const CALLS_PER_TENANT = 4;
const tenants = tenantsPerPartition(PARTITIONS, 2);

/**
 * The whole stack on one broker with `TOOLGATE_JOURNAL_PARTITIONS=4`: a stream per partition,
 * every service's consumers on each, every tenant's events in its own partition only, and the
 * guarantees of one stream kept (four events once per dispatch, a resubmission `replayed`, the
 * projection folding every partition).
 */
describe('a journal of 4 partitions on one broker', () => {
  let stack: TestStack;
  let subjects: Subjects;

  beforeAll(async () => {
    stack = await startTestStack('partj', {
      TOOLGATE_JOURNAL_PARTITIONS: String(PARTITIONS),
      TOOLGATE_TOKENS: JSON.stringify([...TEST_GRANTS, ...grantsOf(tenants)]),
    });
    subjects = createSubjects(stack.nats.prefix, { journalPartitions: PARTITIONS });
  }, 60_000);
  afterAll(() => stack?.stop());

  it('is one stream per partition, each with the same consumers, and no unpartitioned stream', async () => {
    const names: string[] = [];
    for await (const name of stack.nats.jsm.streams.names())
      if (name.startsWith(`${stack.nats.prefix}_journal`)) names.push(name);
    expect(names.sort()).toEqual(subjects.journal.partitions.map((p) => p.stream));
    const consumersOf = async (stream: string) => {
      const found: string[] = [];
      for await (const c of stack.nats.jsm.consumers.list(stream)) found.push(c.name);
      return found.sort();
    };
    const first = await consumersOf(subjects.journal.partitions[0]!.stream);
    expect(first).toEqual(
      expect.arrayContaining([
        `${stack.nats.prefix}_evaluator-requested`,
        `${stack.nats.prefix}_executor-decided`,
        `${stack.nats.prefix}_journal`,
      ]),
    );
    for (const p of subjects.journal.partitions) expect(await consumersOf(p.stream)).toEqual(first);
  });

  it("settles every tenant's calls once, in its partition only, and replays a resubmission", async () => {
    const results = await submitEachTenantTwice(stack, tenants, 'run-1', CALLS_PER_TENANT);
    expect(answerFaults(results.flat())).toEqual({
      errors: 0,
      notAccepted: 0,
      notReplayed: 0,
      notOk: 0,
    });
    expect(
      await partitionPlacementFaults(stack.nats.jsm, subjects, tenants, CALLS_PER_TENANT),
    ).toEqual([]);
    for (const [i, { tenant, token }] of tenants.entries()) {
      // The projection folded it, from its partition's consumer.
      const dispatchId = results[i]![0]!.first.body.dispatchId as string;
      const view = await eventually(
        async () => {
          const d = await stack.http('GET', `/v1/dispatches/${dispatchId}`, token);
          return d.body?.dispatch?.status === 'settled' ? d.body : undefined;
        },
        { what: `${tenant}'s dispatch in the projection` },
      );
      expect(view.events.map((e: { event: { type: string } }) => e.event.type)).toEqual([
        'requested',
        'decided',
        'started',
        'settled',
      ]);
    }
  }, 120_000);

  it("toolgate journal: stats, tail and rebuild read every partition's stream, or the tenant's", async () => {
    const cli = (argv: string[], env: Record<string, string> = {}) =>
      runCliCaptured(argv, { NATS_URL, TOOLGATE_PREFIX: stack.nats.prefix, ...env });
    const streams = subjects.journal.partitions.map((p) => p.stream);
    const calls = tenants.length * CALLS_PER_TENANT;
    // The count is read off the streams: no TOOLGATE_JOURNAL_PARTITIONS needed.
    const stats = await journalStatsCaughtUp({ NATS_URL, TOOLGATE_PREFIX: stack.nats.prefix });
    expect(stats.partitions).toBe(PARTITIONS);
    expect(stats.stream).toBeUndefined();
    expect(stats.streams.map((s: { name: string }) => s.name)).toEqual(streams);
    expect(stats.eventsByType).toMatchObject({
      requested: calls,
      decided: calls,
      started: calls,
      settled: calls,
    });
    const journalConsumers = stats.consumers.filter(
      (c: { name: string }) => c.name === `${stack.nats.prefix}_journal`,
    );
    expect(journalConsumers.map((c: { stream: string }) => c.stream).sort()).toEqual(streams);
    const [one] = tenants;
    const own = await cli(['journal', 'stats', '--json', '--tenant', one!.tenant]);
    expect(JSON.parse(own.stdout)).toMatchObject({
      streams: [{ name: streams[one!.partition] }],
      tenant: one!.tenant,
      eventsByType: { requested: CALLS_PER_TENANT, settled: CALLS_PER_TENANT },
    });

    // Every partition followed from a while back, up to every event of the calls; then a tenant's.
    const all = await cli([
      'journal',
      'tail',
      '--since',
      '10m',
      '--count',
      String(4 * calls),
      '--json',
    ]);
    expect(all).toMatchObject({ code: 0 });
    const lines = all.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(4 * calls);
    expect(new Set(lines.map((l) => l.stream))).toEqual(new Set(streams));
    for (const l of lines) {
      expect(l.trusted).toBe(true);
      expect(l.stream).toBe(subjects.journal.partitionOf(l.event.tenant).stream);
    }
    const mine = await cli([
      'journal',
      'tail',
      '--since',
      '10m',
      '--tenant',
      one!.tenant,
      '--count',
      '4',
    ]);
    expect(mine.code).toBe(0);
    expect(mine.stderr).toContain(`following ${subjects.journal.matching(one!.tenant, '*')} `);
    // Each line names its partition with its sequence: sequences are per stream.
    for (const line of mine.stdout.trim().split('\n'))
      expect(line).toMatch(new RegExp(`^${one!.partition}:\\d+ \\S+Z ${one!.tenant}/run-1 `));

    // The rebuild folds every partition's stream and finds the projection it replaces equal.
    const before = await stack.http('GET', '/v1/runs/run-1', one!.token);
    const rebuilt = await cli(['journal', 'rebuild', '--json']);
    expect(rebuilt).toMatchObject({ code: 0, stderr: '' });
    const report = JSON.parse(rebuilt.stdout);
    expect(report).toMatchObject({ switched: true, differences: [], events: 4 * calls });
    const lastSeqs = await Promise.all(
      streams.map(async (s) => (await stack.nats.jsm.streams.info(s)).state.last_seq),
    );
    expect(report.partitions).toEqual(
      streams.map((stream, i) => ({ stream, lastSeq: lastSeqs[i] })),
    );
    expect((await stack.http('GET', '/v1/runs/run-1', one!.token)).body).toEqual(before.body);

    // Told another count than the streams record: refused, as a service is.
    const wrong = await cli(['journal', 'stats'], { TOOLGATE_JOURNAL_PARTITIONS: '2' });
    expect(wrong.code).not.toBe(0);
    expect(wrong.stderr).toContain(
      `has ${PARTITIONS} partitions, but TOOLGATE_JOURNAL_PARTITIONS says 2`,
    );
  }, 120_000);

  it("refuses a genuine call copied into another partition's stream: not decided, not run, not folded, dead-lettered", async () => {
    const { tenant, token, partition } = tenants[0]!;
    const { again } = await submitTwice(stack, token, 'run-copied', 'c0');
    expect(again.body.settled?.outcome).toBe('ok');
    const dispatchId = again.body.dispatchId as string;
    const other = (partition + 1) % PARTITIONS;
    const own = subjects.journal.partitions[partition]!.stream;
    const deadLettered = async (role: ConsumerRole) => {
      const info = await stack.nats.jsm.streams.info(subjects.deadLetter.stream, {
        subjects_filter: subjects.deadLetter.forRole(role),
      });
      return info.state.subjects?.[subjects.deadLetter.forRole(role)] ?? 0;
    };
    const before = {
      evaluator: await deadLettered('evaluator'),
      executor: await deadLettered('executor'),
      journal: await deadLettered('journal'),
    };
    // The call's genuine `requested` and `decided`, byte for byte with their signatures, stored
    // again under the same tenant, run and dispatch in another partition: if a signature did not
    // cover the partition, that partition's evaluator and executor would take them as their own.
    const js = jetstream(stack.nats.nc);
    for (const type of ['requested', 'decided'] as const) {
      const subject = subjects.journal.event(tenant, 'run-copied', dispatchId, type);
      const stored = await stack.nats.jsm.streams.getMessage(own, { last_by_subj: subject });
      const copied = subject.replace(`.journal.${partition}.`, `.journal.${other}.`);
      expect(copied).not.toBe(subject);
      await js.publish(copied, stored!.data, { headers: stored!.header });
    }
    await eventually(
      async () => {
        const now = {
          evaluator: await deadLettered('evaluator'),
          executor: await deadLettered('executor'),
          journal: await deadLettered('journal'),
        };
        return now.evaluator > before.evaluator &&
          now.executor > before.executor &&
          now.journal >= before.journal + 2
          ? true
          : undefined;
      },
      { what: 'the copies dead-lettered by the evaluator, the executor and the projection' },
    );
    // Nothing was decided, claimed or settled in the other partition: it holds the two copies only.
    const byPartition = await tenantEventsByPartition(stack.nats.jsm, subjects, tenant);
    expect(byPartition.get(other)).toEqual(new Map([[dispatchId, { requested: 1, decided: 1 }]]));
    // And the projection still has the call's four events, once each.
    const view = await stack.http('GET', `/v1/dispatches/${dispatchId}`, token);
    expect(view.body.events.map((e: { event: { type: string } }) => e.event.type)).toEqual([
      'requested',
      'decided',
      'started',
      'settled',
    ]);
  });

  it('turns every /readyz to 503 when one partition is missing', async () => {
    const services = servicesOf(stack);
    for (const s of services) expect((await readyz(s.url)).status).toBe(200);
    await stack.nats.jsm.streams.delete(subjects.journal.partitions[2]!.stream);
    for (const checks of await until503(services))
      expect(checks).toMatchObject({ nats: true, 'journal-streams': false });
  }, 60_000);
});
