import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import { ensureJournalStreams, requestJournalRebuild } from '@toolgate/bus';
import {
  toWireError,
  type JournalEvent,
  type JournalOpsFrame,
  type JournalRebuildReport,
  type JournalRebuildRequest,
} from '@toolgate/contracts';
import type { RunningService } from '@toolgate/service-kit';
import {
  NATS_URL,
  eventually,
  useTestNats,
  useTestSchema,
  type TestNats,
  type TestSchema,
  testJournalKeys,
  signedHeaders,
  publishSigned,
  testKeys,
} from '@toolgate/testing';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { dispatchFixture } from '../../test/fixtures/journal-events.fixture';
import { auditCount, testJournalConfig, untilAudited } from '../../test/journal-test-db';
import { loadJournalConfig } from '../config';
import { createDb } from '../db/create-db';
import type { Database } from '../db/database';
import { startJournal } from '../journal.service';
import { rebuildAndSwitch } from '../rebuild/projection-switch';
import { readJournal } from '../rebuild/read-journal';
import { rebuildProjection } from '../rebuild/rebuild-projection';

/** Every event of one dispatch that was allowed, ran and settled ok. */
function okDispatch(dispatchId: string, runId = 'run-1'): JournalEvent[] {
  const d = dispatchFixture({ dispatchId, runId });
  return [d.requested(0), d.decided(1, 'allow'), d.started(2), d.settled(3, 'ok', { result: 1 })];
}

async function dispatchStatus(db: Kysely<Database>, dispatchId: string): Promise<string> {
  const row = await db
    .selectFrom('dispatches')
    .select('status')
    .where('dispatch_id', '=', dispatchId)
    .executeTakeFirstOrThrow();
  return row.status;
}

/**
 * Sends a rebuild request as `toolgate journal rebuild` does (signed by `ops`) and collects its
 * answer: progress frames, then the report or the error.
 */
async function rebuild(t: TestNats, body: JournalRebuildRequest): Promise<JournalOpsFrame[]> {
  const frames: JournalOpsFrame[] = [];
  try {
    const report = await requestJournalRebuild(t.nc, t.subjects, testKeys('ops'), body, {
      onProgress: (progress) => frames.push({ progress }),
    });
    frames.push({ report });
  } catch (e) {
    frames.push({ error: toWireError(e) });
  }
  return frames;
}

function reportOf(frames: JournalOpsFrame[]): JournalRebuildReport {
  const last = frames.at(-1);
  if (!last || !('report' in last)) throw new Error(`no report: ${JSON.stringify(last)}`);
  return last.report;
}

describe('the journal over an existing stream: start-up fold and rebuild-and-switch', () => {
  let t: TestNats;
  let js: JetStreamClient;
  let schema: TestSchema;
  let journal: RunningService | undefined;
  let db: Kysely<Database>;
  const lines: string[] = [];
  const start = async (env: Record<string, string> = {}) => {
    const config = testJournalConfig(t.prefix, schema, env);
    return startJournal({ config, logger: false, log: (l) => lines.push(l) });
  };

  beforeAll(async () => {
    [t, schema] = await Promise.all([useTestNats('jops'), useTestSchema('jops')]);
    js = jetstream(t.nc);
    await ensureJournalStreams(t.jsm, t.subjects);
    for (let i = 0; i < 30; i++)
      await publishSigned(js, t.subjects, okDispatch(`before-${i}`, `run-${i % 3}`));
    const junk = t.subjects.journal.event('acme', 'run-1', 'junk', 'started');
    await js.publish(junk, 'not an event', { headers: signedHeaders(junk, 'not an event') });
    ({ db } = await createDb({ url: schema.url, schema: schema.schema, migrate: false }));
  });
  afterAll(async () => {
    await journal?.stop();
    await db?.destroy();
    await Promise.all([t?.cleanup(), schema?.cleanup()]);
  });

  it('folds what its consumer passed into a new or older database before serving, with progress in the log', async () => {
    // The first journal on this stream: its new consumer delivers everything, nothing to fold.
    const first = await useTestSchema('jops1');
    try {
      journal = await start({ DATABASE_URL: first.url, JOURNAL_SCHEMA: first.schema });
      await untilAudited(first, 120);
      expect(lines.some((l) => l.includes('folding'))).toBe(false);
      await journal.stop();
      journal = undefined;
    } finally {
      await first.cleanup();
    }

    // A new database over the same stream: the consumer will not deliver those events again.
    lines.length = 0;
    journal = await start();
    expect(await auditCount(db)).toBe(120);
    expect(lines).toEqual([
      'journal: the projection is empty but the journal consumer was delivered events up to sequence 121: folding them from the stream before serving',
      'journal: folded 120 events of sequences 1-121; 1 messages were not events',
    ]);
    const row = await db
      .selectFrom('dispatches')
      .select(['status', 'outcome'])
      .where('dispatch_id', '=', 'before-7')
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ status: 'settled', outcome: 'ok' });

    // Then the consumer: what is new is folded once.
    await publishSigned(js, t.subjects, okDispatch('after-start'));
    await eventually(async () => ((await auditCount(db)) === 124 ? true : undefined));

    // A database that has applied everything delivered is not folded again at the next start.
    await journal.stop();
    lines.length = 0;
    journal = await start();
    expect(lines).toEqual([]);
    expect(await auditCount(db)).toBe(124);
    await journal.stop();
    journal = undefined;

    // One restored from an older backup (or a fold cut short) gets the rest.
    const older = await useTestSchema('jops2');
    try {
      const { db: olderDb } = await createDb({ url: older.url, schema: older.schema });
      try {
        async function* firstSixty() {
          for await (const entry of readJournal(js, t.subjects, { keys: testJournalKeys() })) {
            if (entry.seq > 60) break;
            yield entry;
          }
        }
        await rebuildProjection(olderDb, firstSixty(), { reset: false });
        lines.length = 0;
        journal = await start({ DATABASE_URL: older.url, JOURNAL_SCHEMA: older.schema });
        expect(lines[0]).toBe(
          'journal: the projection has applied events up to sequence 60 but the journal consumer was delivered events up to 125: folding 61-125 from the stream before serving',
        );
        expect(await auditCount(olderDb)).toBe(124);
        await journal.stop();
        journal = undefined;
      } finally {
        await olderDb.destroy();
      }
    } finally {
      await older.cleanup();
    }
    journal = await start();
  }, 60_000);

  it('does the same for a fresh PGlite directory', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'toolgate-jops-pglite-'));
    const pgliteLines: string[] = [];
    const config = loadJournalConfig({
      NATS_URL,
      TOOLGATE_PREFIX: t.prefix,
      JOURNAL_PORT: '0',
      JOURNAL_PGLITE_PATH: dir,
    });
    // Its own consumer would compete with the running journal's: only the fold is under test.
    const fresh = await startJournal({ config, logger: false, log: (l) => pgliteLines.push(l) });
    try {
      // Everything the stream holds that is an event (the PostgreSQL projection has folded it all).
      expect(pgliteLines).toEqual([
        'journal: the projection is empty but the journal consumer was delivered events up to sequence 125: folding them from the stream before serving',
        `journal: folded ${await auditCount(db)} events of sequences 1-125; 1 messages were not events`,
      ]);
      await fresh.stop();
      // And a rebuild-and-switch on PGlite's one session (default schema: public).
      const { db: lite } = await createDb({ pglitePath: dir });
      try {
        const report = await rebuildAndSwitch(lite, {
          read: (fromSeq) => readJournal(js, t.subjects, { fromSeq, keys: testJournalKeys() }),
        });
        expect(report).toMatchObject({
          live: 'public',
          into: 'public_rebuild',
          switched: true,
          differences: [],
          skipped: 1,
        });
        expect(await auditCount(lite)).toBe(await auditCount(db));
      } finally {
        await lite.destroy();
      }
    } finally {
      await fresh.stop();
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('rebuilds into a schema of its own, finds it equal, and switches while events keep coming', async () => {
    const into = `${schema.schema}_rb`;
    // Events keep arriving during the rebuild: none may be lost across the switch.
    let publishing = true;
    let n = 0;
    const load = (async () => {
      while (publishing) await publishSigned(js, t.subjects, okDispatch(`during-${n++}`));
    })();
    const frames = await rebuild(t, { into });
    publishing = false;
    await load;
    expect(n).toBeGreaterThan(0);
    const report = reportOf(frames);
    expect(report).toMatchObject({
      live: schema.schema,
      into,
      switched: true,
      differences: [],
    });
    expect(report.events).toBeGreaterThanOrEqual(124);
    expect(frames.some((f) => 'progress' in f && f.progress.phase === 'compare')).toBe(true);
    // The replaced projection is kept in `into`; the live name serves the rebuilt one, which the
    // live consumer goes on folding into.
    expect(await auditCount(db, into)).toBeGreaterThanOrEqual(124);
    const streamEvents = (await t.jsm.streams.info(t.subjects.journal.stream)).state.messages - 1;
    expect(streamEvents).toBe(124 + n * 4);
    await eventually(async () => ((await auditCount(db)) === streamEvents ? true : undefined), {
      what: `all ${streamEvents} events in the live projection`,
    });
    expect(lines).toContainEqual(
      expect.stringMatching(/^journal: rebuilt \d+ events into .* and switched/),
    );

    // Rebuilt again over the same `into` (a journal projection: dropped and made anew): equal.
    expect(reportOf(await rebuild(t, { into }))).toMatchObject({ switched: true, differences: [] });
  }, 120_000);

  it('does not switch to a projection that differs, unless forced', async () => {
    await sql`update dispatches set status = 'tampered' where dispatch_id = 'before-3'`.execute(db);
    const refused = reportOf(await rebuild(t, { into: `${schema.schema}_rb` }));
    expect(refused).toMatchObject({
      switched: false,
      differences: [{ table: 'dispatches', onlyInLive: 1, onlyInRebuilt: 1 }],
      reason: 'the rebuilt projection differs from the live one',
    });
    expect(await dispatchStatus(db, 'before-3')).toBe('tampered');
    const forced = reportOf(await rebuild(t, { into: `${schema.schema}_rb`, force: true }));
    expect(forced).toMatchObject({ switched: true, differences: [{ table: 'dispatches' }] });
    expect(await dispatchStatus(db, 'before-3')).toBe('settled');
  }, 120_000);

  it('refuses a bad target, a schema that is not a projection, and a second rebuild at once', async () => {
    const errorOf = (frames: JournalOpsFrame[]) => {
      const last = frames.at(-1)!;
      if (!('error' in last)) throw new Error(`expected an error: ${JSON.stringify(last)}`);
      return last.error;
    };
    expect(errorOf(await rebuild(t, { into: 'no way' }))).toMatchObject({
      code: 'invalid-request',
    });
    expect(errorOf(await rebuild(t, { into: schema.schema }))).toMatchObject({
      code: 'invalid-request',
      message: `cannot rebuild into the live schema ${schema.schema}`,
    });
    const other = `${schema.schema}_other`;
    const admin = new pg.Client({ connectionString: schema.url });
    await admin.connect();
    try {
      await admin.query(`create schema "${other}"; create table "${other}".precious (x int)`);
      expect(errorOf(await rebuild(t, { into: other }))).toMatchObject({
        code: 'conflict',
        message: expect.stringContaining(`schema ${other} exists and is not a journal projection`),
      });
      // Still there: a schema that is not a projection is never dropped.
      await admin.query(`select * from "${other}".precious`);
      // Another replica rebuilding this projection holds its lock (keyed by its live schema).
      await admin.query(
        `select pg_advisory_lock(hashtextextended('toolgate-journal-rebuild ${schema.schema}', 0))`,
      );
      expect(errorOf(await rebuild(t, {}))).toMatchObject({
        code: 'conflict',
        message: 'a journal rebuild is already running',
      });
      // A rebuild of another projection (another schema of the database) does not hold it up.
      await admin.query(`select pg_advisory_unlock_all()`);
      await admin.query(
        `select pg_advisory_lock(hashtextextended('toolgate-journal-rebuild ${other}', 0))`,
      );
      expect(reportOf(await rebuild(t, { into: `${schema.schema}_rb2` }))).toMatchObject({
        switched: true,
      });
    } finally {
      await admin.query(`drop schema if exists "${schema.schema}_rb2" cascade`);
      await admin.query(`drop schema if exists "${other}" cascade`);
      await admin.end();
    }
  });
});
