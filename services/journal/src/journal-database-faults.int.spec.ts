import { JournalPublisher } from '@toolgate/bus';
import { startWithRetry, type RunningService } from '@toolgate/service-kit';
import {
  DATABASE_URL,
  eventually,
  tcpProxy,
  useTestNats,
  useTestSchema,
  type TcpProxy,
  type TestNats,
  type TestSchema,
  testJournalKeys,
} from '@toolgate/testing';
import { dispatchFixture } from '../test/fixtures/journal-events.fixture';
import { testJournalConfig } from '../test/journal-test-db';
import { createDb } from './db/create-db';
import { startJournal } from './journal.service';

const readyz = async (service: RunningService) => {
  const res = await fetch(`${service.url}/readyz`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

describe('the journal and a PostgreSQL that is unreachable at start-up and later', () => {
  let nats: TestNats;
  let schema: TestSchema;
  let proxy: TcpProxy;
  let journal: RunningService | undefined;

  beforeAll(async () => {
    [nats, schema] = await Promise.all([useTestNats('jdbfault'), useTestSchema('jdbfault')]);
    const target = new URL(DATABASE_URL);
    proxy = await tcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
  });
  afterAll(async () => {
    await journal?.stop();
    await proxy?.cut();
    await Promise.all([nats?.cleanup(), schema?.cleanup()]);
  });

  it('starts once the database answers, then fails readiness while it is cut and folds again when it is back', async () => {
    const viaProxy = new URL(DATABASE_URL);
    viaProxy.port = String(proxy.port);
    const config = testJournalConfig(nats.prefix, {
      url: viaProxy.toString(),
      schema: schema.schema,
    });
    const lines: string[] = [];
    const starting = startWithRetry(() => startJournal({ config, logger: false }), {
      name: 'journal',
      log: (line) => lines.push(line),
      backoff: { initialMs: 50, maxMs: 200 },
    });
    await eventually(() => (lines.length >= 2 ? true : undefined), {
      what: 'two failed attempts',
    });
    await proxy.listen();
    journal = await starting;
    expect(lines[0]).toMatch(
      /^journal: start-up attempt 1 failed: opening and migrating PostgreSQL: .*ECONNREFUSED.*; next attempt in/,
    );
    expect(await readyz(journal)).toEqual({
      status: 200,
      body: { ready: true, checks: { nats: true, 'journal-streams': true, database: true } },
    });

    // Every pooled connection is torn down under the journal: an idle one erroring must not take
    // the process down, and the very next probe says the database is gone.
    await proxy.cut();
    expect(await readyz(journal)).toEqual({
      status: 503,
      body: expect.objectContaining({
        checks: { nats: true, 'journal-streams': true, database: false },
      }),
    });

    // An event journaled while the database is away is folded once it is back.
    const d = dispatchFixture({ dispatchId: 'while-cut' });
    await new JournalPublisher(nats.nc, nats.subjects, testJournalKeys()).append(d.requested(0));
    await proxy.listen();
    await eventually(async () => ((await readyz(journal!)).status === 200 ? true : undefined), {
      what: 'ready again',
    });
    const direct = await createDb({ url: schema.url, schema: schema.schema, migrate: false });
    try {
      const row = await eventually(
        () =>
          direct.db
            .selectFrom('dispatches')
            .select(['dispatch_id', 'status'])
            .where('dispatch_id', '=', 'while-cut')
            .executeTakeFirst(),
        { what: 'the event folded after the database came back', timeoutMs: 20_000 },
      );
      expect(row).toEqual({ dispatch_id: 'while-cut', status: 'requested' });
    } finally {
      await direct.db.destroy();
    }
  }, 40_000);
});
