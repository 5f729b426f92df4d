import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { partitionNatsConfig } from '@toolgate/cli';
import { createSubjects, generateKeySet, type JournalEvent } from '@toolgate/contracts';
import { eventually, useTestSchema, type TestSchema } from '@toolgate/testing';
import { jsonLines } from '../support/cli-run';
import { committedRepository } from '../support/git-repository';
import { removeWorkdir, stackEnv, TEST_GRANTS, TOKENS } from '../support/test-stack';
import {
  PRODUCES,
  publish,
  runCliAsOps,
  SERVICE_USERS,
  startServicesAsUsers,
  startShippedNats,
  violations,
  type ServicesAsUsers,
  type ShippedNats,
  UserConnections,
} from './shipped-nats';

const PARTITIONS = 4;
const subjects = createSubjects('toolgate', { journalPartitions: PARTITIONS });
/** Two tenants in two partitions (acme 3, globex 2 of 4). */
const TENANTS = [
  { tenant: 'acme', token: TOKENS.acmeAgent },
  { tenant: 'globex', token: TOKENS.globexAdmin },
] as const;

/**
 * deploy/nats/nats.conf widened by `toolgate nats-conf partition --partitions 4`, run for real on
 * nats-server 2.9 (single-node, as nats-config.int.spec.ts runs the shipped file): every service
 * as its own user on a 4-partition journal, a team following its tenant's partition, the operator's
 * CLI reading every partition. The pipeline runs with no permission violation, each tenant's events
 * land in its own partition's stream, and the users are still refused what they must not do.
 */
describe('deploy/nats/nats.conf widened for a partitioned journal, run for real (one node)', () => {
  let dir: string;
  let nats: ShippedNats;
  let schema: TestSchema;
  let workdir: string;
  let services: ServicesAsUsers | undefined;
  const keys = generateKeySet();
  const users = new UserConnections(() => nats);
  const teamEvents: JournalEvent[] = [];
  let logAfterPipeline = '';

  const as = users.as.bind(users);

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'toolgate-natsconf-parts-'));
    nats = await startShippedNats(dir, (config) => partitionNatsConfig(config, PARTITIONS));
    schema = await useTestSchema('natsconfparts');
    workdir = await committedRepository('toolgate-natsconf-parts-work-');
    services = await startServicesAsUsers(
      nats,
      {
        ...stackEnv({ prefix: 'toolgate', url: nats.server.url }, schema, workdir, TEST_GRANTS),
        TOOLGATE_JOURNAL_PARTITIONS: String(PARTITIONS),
      },
      keys,
    );
    const team = await as('team-acme', 'TOOLGATE_NATS_TEAM_ACME_PASSWORD', {
      inboxPrefix: '_INBOX_acme',
    });
    team.subscribe(subjects.journal.forTenant('acme'), {
      callback: (_e, m) => void teamEvents.push(m.json<JournalEvent>()),
    });
    await team.flush();
  }, 60_000);

  afterAll(async () => {
    await users.closeAll();
    await services?.stop();
    await nats?.server.cleanup();
    await schema?.cleanup();
    if (workdir) await removeWorkdir(workdir);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("runs the pipeline for tenants of two partitions with no permission violation, each tenant's events in its partition's stream", async () => {
    const dispatchIds: Record<string, string> = {};
    for (const { tenant, token } of TENANTS) {
      const res = await fetch(`${services!.gatewayUrl}/v1/dispatches`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          runId: 'run-parts',
          callId: 'call-1',
          agent: { agentType: 'coder' },
          tool: 'read_file',
          input: { path: 'hello.txt' },
          wait: 15_000,
        }),
      });
      const body = (await res.json()) as { dispatchId: string; settled?: { outcome: string } };
      expect([tenant, res.status, body.settled?.outcome]).toEqual([tenant, 200, 'ok']);
      dispatchIds[tenant] = body.dispatchId;
    }

    // The team sees its own dispatch's four events, followed on its partition's subjects.
    await eventually(() => (teamEvents.length >= 4 ? true : undefined), {
      timeoutMs: 10_000,
      what: "the team's four events",
    });
    expect(teamEvents.map((e) => [e.tenant, e.type])).toEqual([
      ['acme', 'requested'],
      ['acme', 'decided'],
      ['acme', 'started'],
      ['acme', 'settled'],
    ]);

    // The operator's CLI reads the count off the streams and every partition's stream.
    const stats = await runCliAsOps(nats, keys, ['journal', 'stats', '--json']);
    expect(stats.code).toBe(0);
    const report = JSON.parse(stats.stdout) as {
      partitions: number;
      streams: { name: string; messages: number }[];
    };
    expect(report.partitions).toBe(PARTITIONS);
    const messages = Object.fromEntries(report.streams.map((s) => [s.name, s.messages]));
    expect(messages).toEqual({
      toolgate_journal_0: 0,
      toolgate_journal_1: 0,
      [subjects.journal.partitionOf('globex').stream]: 4,
      [subjects.journal.partitionOf('acme').stream]: 4,
    });
    const tail = await runCliAsOps(nats, keys, [
      'journal',
      'tail',
      '--since',
      '10m',
      '--count',
      '8',
      '--json',
    ]);
    expect(tail.code).toBe(0);
    const tailed = jsonLines(tail.stdout) as { trusted: boolean }[];
    expect(tailed).toHaveLength(8);
    expect(tailed.every((e) => e.trusted)).toBe(true);

    logAfterPipeline = nats.log();
    expect(violations(logAfterPipeline)).toEqual([]);
  }, 60_000);

  it('still refuses every service the event types it does not produce, and a team another partition', async () => {
    // Only the types a user does not produce: a produced one would be stored, and the forgery read.
    const refused: Record<string, string[]> = {};
    const notProduced = (service: string) =>
      (['requested', 'decided', 'started', 'settled'] as const).filter(
        (t) => !PRODUCES[service]!.includes(t),
      );
    for (const [service, { user, passwordVariable }] of Object.entries(SERVICE_USERS)) {
      const nc = await as(user, passwordVariable);
      refused[service] = [];
      for (const type of notProduced(service)) {
        const subject = subjects.journal.event('acme', 'run-forged', 'forged', type);
        if ((await publish(nc, subject)) === 'refused') refused[service]!.push(type);
      }
    }
    expect(refused).toEqual(
      Object.fromEntries(Object.keys(SERVICE_USERS).map((s) => [s, notProduced(s)])),
    );
    // The team may follow its own partition's subjects only: another tenant's partition is refused.
    const team = await as('team-acme', 'TOOLGATE_NATS_TEAM_ACME_PASSWORD', {
      inboxPrefix: '_INBOX_acme',
    });
    const other = team.subscribe(subjects.journal.forTenant('globex'), { callback: () => {} });
    await team.flush().catch(() => undefined);
    await eventually(() => (other.isClosed() ? true : undefined), {
      timeoutMs: 5_000,
      what: "the broker's refusal of globex's partition to acme's team",
    });
    const after = violations(nats.log()).filter((v) => !violations(logAfterPipeline).includes(v));
    expect(after).toContain(`team-acme Subscription ${subjects.journal.forTenant('globex')}`);
  });
});
