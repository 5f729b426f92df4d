import { createSubjects, type Subjects } from '@toolgate/contracts';
import { jetstreamManager } from '@nats-io/jetstream';
import { ensureJournalStreams } from '@toolgate/bus';
import {
  startNatsCluster,
  uniqueName,
  type ClusterNode,
  type NatsCluster,
} from '@toolgate/testing';
import {
  answerFaults,
  grantsOf,
  notOnceEach,
  partitionPlacementFaults,
  submitEachTenantTwice,
  submitTwice,
  tenantEventsByPartition,
  tenantsPerPartition,
  type PartitionTenant,
} from '../support/partitioned-tenants';
import { startTestStack, TEST_GRANTS, type TestStack } from '../support/test-stack';
import { journalStatsCaughtUp, runCliCaptured } from '../support/cli-run';

const PARTITIONS = 4;
const CALLS_PER_TENANT = 5;
/** Calls each tenant makes after the leader is killed. */
const CALLS_AFTER_KILL = 15;
const tenants = tenantsPerPartition(PARTITIONS, 2);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Answer = Awaited<ReturnType<typeof submitTwice>>;

/**
 * A journal of 4 partitions, R3, on a 3-node JetStream cluster: each partition is a stream with a
 * leader of its own, spread over the nodes; a tenant's events live in its partition only; a
 * partition's leader killed under load costs the tenants of the partitions led elsewhere nothing,
 * and loses no call of anyone.
 */
describe('a journal of 4 partitions on a three-node cluster with R3 streams', () => {
  let cluster: NatsCluster;
  let stack: TestStack;
  let subjects: Subjects;

  beforeAll(async () => {
    cluster = await startNatsCluster({ label: 'parts' });
    const prefix = uniqueName('partc');
    subjects = createSubjects(prefix, { journalPartitions: PARTITIONS });
    // The four R3 streams made first, as a deployment's journal made them at its first start, with
    // a patient JetStream API: on a loaded 2-core machine a new cluster's meta leader can take
    // longer than the services' 5 s to place four streams and their consumers at once.
    const setup = await jetstreamManager(await cluster.connect('partc-setup'), { timeout: 30_000 });
    await ensureJournalStreams(setup, subjects, { replicas: 3, manage: true });
    stack = await startTestStack(
      'partc',
      {
        TOOLGATE_STREAM_REPLICAS: '3',
        // The streams' prefix (the stack's own streams go with the cluster).
        TOOLGATE_PREFIX: prefix,
        TOOLGATE_JOURNAL_PARTITIONS: String(PARTITIONS),
        TOOLGATE_TOKENS: JSON.stringify([...TEST_GRANTS, ...grantsOf(tenants)]),
      },
      { servers: cluster.servers },
    );
  }, 180_000);

  afterAll(async () => {
    await stack?.stop();
    await cluster?.cleanup();
  }, 60_000);

  /** Which node leads each partition's stream, by partition index. */
  async function leaders(): Promise<ClusterNode[]> {
    const found: ClusterNode[] = [];
    for (const p of subjects.journal.partitions)
      found.push((await cluster.streamPlacement(p.stream)).leader);
    return found;
  }

  /** How many partitions each node leads. */
  function ledBy(placed: readonly ClusterNode[]): Map<string, number> {
    const led = new Map(cluster.nodes.map((n) => [n.name, 0]));
    for (const node of placed) led.set(node.name, led.get(node.name)! + 1);
    return led;
  }

  it('spreads the partitions’ leaders over every node', async () => {
    // The meta leader places each new stream's group where fewest are; an election may still land
    // two on one node. A node leading none is given one: the stream of a node leading several
    // steps down until every node leads one (4 streams, 3 nodes).
    for (let attempt = 0; attempt < 20; attempt++) {
      const placed = await leaders();
      const led = ledBy(placed);
      if ([...led.values()].every((n) => n >= 1)) break;
      const crowded = placed.findIndex((node) => led.get(node.name)! > 1);
      await cluster.stepDown(subjects.journal.partitions[crowded]!.stream);
    }
    const led = ledBy(await leaders());
    expect([...led.values()].every((n) => n >= 1)).toBe(true);
    expect([...led.values()].reduce((a, b) => a + b, 0)).toBe(PARTITIONS);
  }, 120_000);

  it("settles many tenants' calls once each, in their partitions only, and replays a resubmission", async () => {
    const results = await submitEachTenantTwice(stack, tenants, 'run-1', CALLS_PER_TENANT);
    expect(answerFaults(results.flat())).toEqual({
      errors: 0,
      notAccepted: 0,
      notReplayed: 0,
      notOk: 0,
    });
    expect(
      await partitionPlacementFaults(await cluster.jsm(), subjects, tenants, CALLS_PER_TENANT),
    ).toEqual([]);
  }, 180_000);

  it("costs the other partitions' tenants nothing when one partition's leader is killed, and loses no call", async () => {
    const placed = await leaders();
    const victim = placed[0]!;
    // Tenants of the partitions the killed node does not lead; the rest are the victim's.
    const spared = (t: PartitionTenant) => placed[t.partition] !== victim;
    expect(tenants.filter(spared).length).toBeGreaterThan(0);
    // A spared partition is one the kill does not touch: its durable consumers (the evaluator's,
    // the executor's, the projection's) are moved onto its stream's leader too, or one led by the
    // killed node would wait out an election with the victim's tenants.
    const jsm = await cluster.jsm();
    for (const [i, partition] of subjects.journal.partitions.entries()) {
      if (placed[i] === victim) continue;
      const names: string[] = [];
      for await (const c of jsm.consumers.list(partition.stream)) names.push(c.name);
      for (const name of names) await cluster.placeConsumerOnStreamLeader(partition.stream, name);
    }
    let killed = false;
    const answers = new Map<PartitionTenant, Answer[]>(tenants.map((t) => [t, []]));
    const clients = tenants.map(async (t) => {
      const mine = answers.get(t)!;
      let afterKill = 0;
      for (let i = 0; !killed || afterKill < CALLS_AFTER_KILL; i++) {
        mine.push(await submitTwice(stack, t.token, 'run-kill', `c${i}`));
        if (killed) afterKill++;
      }
    });
    await sleep(1000);
    await victim.kill();
    killed = true;
    try {
      await Promise.all(clients);
    } finally {
      await victim.start();
    }
    // No error, for the tenants of the partitions led elsewhere and — as on one stream, the
    // publishes being retried through the election — for the killed leader's tenants too.
    const none = { errors: 0, notAccepted: 0, notReplayed: 0, notOk: 0 };
    const of = (which: PartitionTenant[]) => answerFaults(which.flatMap((t) => answers.get(t)!));
    expect({
      spared: of(tenants.filter(spared)),
      victims: of(tenants.filter((t) => !spared(t))),
    }).toEqual({ spared: none, victims: none });
    // No call lost, of any tenant: each one answered (`accepted` or `replayed`) is in its
    // partition with its four events once; one never answered (the victim's tenants may see a
    // retryable error) may be recorded too, once.
    for (const t of tenants) {
      const answered = new Set(
        answers
          .get(t)!
          .flatMap(({ first, again }) => [first, again])
          .filter((a) => a.status < 400)
          .map((a) => a.body.dispatchId as string),
      );
      const found = await tenantEventsByPartition(jsm, subjects, t.tenant);
      expect([...found.keys()]).toEqual([t.partition]);
      const recorded = found.get(t.partition)!;
      const lost = [...answered].filter((id) => !recorded.has(id));
      expect({ tenant: t.tenant, lost, twice: notOnceEach(recorded) }).toEqual({
        tenant: t.tenant,
        lost: [],
        twice: [],
      });
    }
  }, 300_000);

  it("counts and rebuilds every partition while a partition's leader is down; the rebuild equals the live projection", async () => {
    // Calls of every tenant, then everything folded: the rebuild is compared with a projection
    // that is complete.
    await submitEachTenantTwice(stack, tenants, 'run-rebuild', 2);
    const env = { NATS_URL: cluster.url, TOOLGATE_PREFIX: subjects.prefix };
    const stats = await journalStatsCaughtUp(env);
    expect(stats.partitions).toBe(PARTITIONS);
    const events = stats.streams.reduce((n: number, s: { messages: number }) => n + s.messages, 0);
    const one = tenants[0]!;
    const before = await stack.http('GET', '/v1/runs/run-rebuild', one.token);
    expect(before.status).toBe(200);
    // The node leading a partition killed as the rebuild starts: that stream's reads wait out an
    // election, from the two nodes left.
    const victim = (await leaders())[1]!;
    const rest = cluster.nodes.filter((n) => n !== victim).map((n) => n.url);
    await victim.kill();
    try {
      // The operator's look first: its counting consumers ride out the election and the dead
      // node (the broker places a third of them there), and it counts what was counted before.
      const statsNow = await runCliCaptured(['journal', 'stats', '--json'], {
        ...env,
        NATS_URL: rest.join(','),
      });
      expect(statsNow).toMatchObject({ code: 0, stderr: '' });
      expect(JSON.parse(statsNow.stdout).eventsByType).toEqual(stats.eventsByType);
      const rebuilt = await runCliCaptured(['journal', 'rebuild', '--json'], {
        ...env,
        NATS_URL: rest.join(','),
      });
      expect(rebuilt).toMatchObject({ code: 0, stderr: '' });
      const report = JSON.parse(rebuilt.stdout);
      expect(report).toMatchObject({ switched: true, differences: [], events, skipped: 0 });
      expect(report.partitions.map((p: { stream: string }) => p.stream)).toEqual(
        subjects.journal.partitions.map((p) => p.stream),
      );
    } finally {
      await victim.start();
    }
    expect((await stack.http('GET', '/v1/runs/run-rebuild', one.token)).body).toEqual(before.body);
  }, 300_000);
});
