import { jetstream } from '@nats-io/jetstream';
import { compareProjections, createDb, readJournal, rebuildProjection } from '@toolgate/journal';
import {
  DATABASE_URL,
  eventually,
  tcpProxy,
  testJournalKeys,
  useTestSchema,
  type TcpProxy,
} from '@toolgate/testing';
import { startTestProcessStack, type TestProcessStack } from '../support/test-process-stack';
import { TOKENS } from '../support/test-stack';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const RUN = 'run-db-cuts';

/**
 * PostgreSQL cut under load, three times, between the journal process (the only one with a pool)
 * and the database: every relayed connection destroyed — idle ones and ones in the middle of a
 * projection transaction or a readiness probe — then refused for a few hundred milliseconds, then
 * accepted again. The process must live through it (a checked-out `pg` client's 'error' event,
 * unheard, used to end it), and the projection must catch up to what the stream holds.
 */
describe('PostgreSQL cut under load (services as processes)', () => {
  let stack: TestProcessStack;
  let proxy: TcpProxy;

  beforeAll(async () => {
    const target = new URL(DATABASE_URL);
    proxy = await tcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    await proxy.listen();
    const viaProxy = new URL(DATABASE_URL);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    stack = await startTestProcessStack('dbcuts', {
      services: ['journal', 'permission-evaluator', 'tool-executor', 'gateway'],
      // The journal's pool is the one the test cuts.
      envFor: { journal: { DATABASE_URL: viaProxy.toString() } },
      env: { JOURNAL_BATCH_LINGER_MS: '5' },
      readyTimeoutMs: 150_000,
    });
  }, 200_000);

  afterAll(async () => {
    await stack?.stop();
    await proxy?.cut();
  });

  it('never ends the journal process; every accepted call settles and the projection equals a rebuild', async () => {
    const journal = stack.processes.service('journal');
    const pid = journal.pid;
    const accepted: string[] = [];
    const refused: number[] = [];
    let loading = true;
    let callNo = 0;
    const submit = (callId: string) =>
      stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
        runId: RUN,
        callId,
        agent: { agentType: 'coder' },
        tool: 'list_dir',
        input: { path: '.' },
      });
    const client = async () => {
      while (loading) {
        const callId = `c${++callNo}`;
        // A response lost with its connection (a keep-alive socket the gateway closed as the request
        // came in, on a starved machine) is asked for again, as any client would: the same call
        // is the same dispatch, accepted once.
        let res: Awaited<ReturnType<typeof submit>> | undefined;
        for (let tries = 0; !res; tries++) {
          res = await submit(callId).catch((err: unknown) => {
            if (tries >= 5) throw err;
            return undefined;
          });
        }
        if (res.status === 202 || res.status === 200) accepted.push(res.body.dispatchId as string);
        else refused.push(res.status);
      }
    };
    const clients = Array.from({ length: 6 }, client);
    await eventually(() => (accepted.length >= 20 ? true : undefined), {
      what: 'load under way',
      timeoutMs: 30_000,
    });
    for (let cut = 0; cut < 3; cut++) {
      await proxy.cut();
      await sleep(300);
      await proxy.listen();
      await sleep(1500);
    }
    loading = false;
    await Promise.all(clients);

    // The gateway does not use PostgreSQL: the cuts cost no submission.
    expect(refused).toEqual([]);
    expect(journal.running).toBe(true);
    expect(journal.pid).toBe(pid);
    expect(journal.output()).not.toMatch(/uncaught|Unhandled/i);

    // Every accepted call settles once in the stream…
    const info = await stack.nats.jsm.streams.info(stack.nats.subjects.journal.stream, {
      subjects_filter: `${stack.nats.subjects.prefix}.journal.acme.${RUN}.*.settled`,
    });
    const settledSubjects = info.state.subjects ?? {};
    await eventually(
      async () => {
        const now = await stack.nats.jsm.streams.info(stack.nats.subjects.journal.stream, {
          subjects_filter: `${stack.nats.subjects.prefix}.journal.acme.${RUN}.*.settled`,
        });
        Object.assign(settledSubjects, now.state.subjects ?? {});
        return Object.keys(settledSubjects).length >= accepted.length ? true : undefined;
      },
      { what: 'every accepted call settled in the stream', timeoutMs: 60_000 },
    );
    const settledIds = Object.keys(settledSubjects).map((s) => s.split('.').at(-2)!);
    expect(new Set(settledIds)).toEqual(new Set(accepted));
    expect(Object.values(settledSubjects).every((n) => n === 1)).toBe(true);

    // …and the projection, folded through the cuts, catches up and equals one rebuilt from it.
    const live = await createDb({
      url: stack.schema.url,
      schema: stack.schema.schema,
      migrate: false,
    });
    const fresh = await useTestSchema('dbcutsrebuild');
    const rebuilt = await createDb({ url: fresh.url, schema: fresh.schema });
    try {
      const lastSeq = (await stack.nats.jsm.streams.info(stack.nats.subjects.journal.stream)).state
        .last_seq;
      // Caught up: every accepted call's row settled. (The highest folded sequence is not enough:
      // the projection folds in lanes, and a lane whose transaction the cut broke retries its
      // batch after a backoff while the others fold on.) A fold lost for good never gets here.
      const rows = await eventually(
        async () => {
          const now = await live.db
            .selectFrom('dispatches')
            .select(['dispatch_id', 'status'])
            .where('run_id', '=', RUN)
            .execute();
          return now.length === accepted.length && now.every((r) => r.status === 'settled')
            ? now
            : undefined;
        },
        { timeoutMs: 60_000, what: 'the live projection caught up' },
      );
      expect(new Set(rows.map((r) => r.dispatch_id))).toEqual(new Set(accepted));
      const result = await rebuildProjection(
        rebuilt.db,
        readJournal(jetstream(stack.nats.nc), stack.nats.subjects, { keys: testJournalKeys() }),
      );
      expect(result.lastSeq).toBe(lastSeq);
      expect(await compareProjections(live.db, rebuilt.db)).toEqual([]);
    } finally {
      await live.db.destroy();
      await rebuilt.db.destroy();
      await fresh.cleanup();
    }
  }, 180_000);
});
