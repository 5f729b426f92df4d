import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import { JournalPublisher } from '@toolgate/bus';
import { inputDigest, type SettledEvent, type ToolRef } from '@toolgate/contracts';
import { Metrics } from '@toolgate/service-kit';
import {
  eventually,
  useTestNats,
  type TestNats,
  testJournalKeys,
  signedHeaders,
} from '@toolgate/testing';
import {
  decided,
  dispatch,
  journalCounts,
  closeRegistry,
  registerRemoteTool,
  requested,
  serveCountingTool,
  sleep,
  startReplica,
  TENANT,
  type Replica,
} from '../../test/executor-harness';

/** write_file as the gateway's registry describes the builtin. */
const WRITE_FILE: ToolRef = {
  name: 'write_file',
  contractHash: 'e'.repeat(64),
  needsApproval: false,
  executor: 'inprocess',
  risk: 'write',
};

describe('the executor retries transient failures, settles permanent ones, refuses forgeries', () => {
  let t: TestNats;
  let publisher: JournalPublisher;
  let replica: Replica;
  let workdir: string;

  beforeAll(async () => {
    t = await useTestNats('retry');
    publisher = new JournalPublisher(t.nc, t.subjects, testJournalKeys());
    workdir = await mkdtemp(path.join(tmpdir(), 'toolgate-retry-'));
    replica = await startReplica(t, {}, workdir);
  });
  afterAll(async () => {
    await closeRegistry(t);
    await replica.stop();
    await t.cleanup();
    await rm(workdir, { recursive: true, force: true });
  });

  const settled = (run: string, id: string, timeoutMs = 20_000) =>
    eventually(
      () => publisher.last(TENANT, run, id, 'settled').then((s) => (s ? s.event : undefined)),
      { timeoutMs, intervalMs: 50, what: `${id} settled` },
    );

  const metric = async (name: string, label: string) => {
    const text = await replica.app.get(Metrics).render();
    const line = text.split('\n').find((l) => l.startsWith(`${name}{${label}}`));
    return line ? Number(line.split(' ').pop()) : 0;
  };

  describe('retry by kind', () => {
    it('a call dispatched before any worker serves its tool runs once a worker starts', async () => {
      const greet = await registerRemoteTool(t, 'greet', 15_000);
      await dispatch(publisher, 'r-retry', 'greet1', greet, { name: 'ada' });
      // No worker yet: the executor keeps trying (no responders is transient: nothing ran).
      await sleep(1200);
      expect(await publisher.last(TENANT, 'r-retry', 'greet1', 'settled')).toBeNull();
      const worker = serveCountingTool(t, publisher, 'greet', (input) => ({
        ok: true,
        result: `hello ${(input as { name: string }).name}`,
      }));
      try {
        expect(await settled('r-retry', 'greet1')).toMatchObject({
          outcome: 'ok',
          result: 'hello ada',
          attempt: 1,
        });
        expect(worker.total()).toBe(1);
        expect(await journalCounts(t, 'r-retry', 'greet1')).toMatchObject({
          started: 1,
          settled: 1,
        });
      } finally {
        worker.stop();
      }
    });

    it('with no worker until the deadline, settles unavailable, marked transient and exhausted', async () => {
      const tool = await registerRemoteTool(t, 'nobody_serves', 1500);
      await dispatch(publisher, 'r-retry', 'greet2', tool, {});
      const event: SettledEvent = await settled('r-retry', 'greet2');
      expect(event).toMatchObject({
        outcome: 'error',
        attempt: 1,
        error: {
          code: 'unavailable',
          message: 'no worker is serving nobody_serves',
          details: { retryable: true, exhausted: true },
        },
      });
      expect(event.error?.details?.attempts).toBeGreaterThan(1);
      // Retried within the one delivery: one claim, no nak and redelivery.
      expect(await journalCounts(t, 'r-retry', 'greet2')).toMatchObject({ started: 1 });
    });

    it('a permanent failure settles at once, marked permanent', async () => {
      await dispatch(publisher, 'r-retry', 'perm1', { ...WRITE_FILE, name: 'no_such_builtin' }, {});
      expect(await settled('r-retry', 'perm1')).toMatchObject({
        outcome: 'error',
        attempt: 1,
        error: { code: 'unknown-tool', details: { retryable: false } },
      });
      expect(await journalCounts(t, 'r-retry', 'perm1')).toMatchObject({ started: 1 });
    });

    it('a tool’s own failure settles as the tool returned it, and is not retried', async () => {
      const worker = serveCountingTool(t, publisher, 'flaky', () => ({
        ok: false,
        error: { code: 'unavailable', message: 'my database is down' },
      }));
      try {
        const flaky = await registerRemoteTool(t, 'flaky', 10_000);
        await dispatch(publisher, 'r-retry', 'own1', flaky, {});
        expect(await settled('r-retry', 'own1')).toMatchObject({
          outcome: 'error',
          error: { code: 'unavailable', message: 'my database is down' },
        });
        // It ran: running it again would be a second execution without a crash.
        expect(worker.total()).toBe(1);
      } finally {
        worker.stop();
      }
    });
  });

  describe('forged decisions run nothing', () => {
    it('a decided with no requested before it and a zero contract hash: write_file does not run', async () => {
      const target = path.join(workdir, 'forged-1.txt');
      const input = { path: target, content: 'pwned' };
      const forged = decided(
        requested('r-forge', 'forge1', { ...WRITE_FILE, contractHash: '0'.repeat(64) }, input),
      );
      await publisher.append(forged);
      expect(await settled('r-forge', 'forge1')).toMatchObject({
        outcome: 'denied',
        error: { code: 'denied', details: { refused: 'no-request', retryable: false } },
      });
      expect(existsSync(target)).toBe(false);
      expect(await metric('toolgate_executor_refusals_total', 'reason="no-request"')).toBe(1);
    });

    it('a decided whose input is not the one its digest names: write_file does not run', async () => {
      const target = path.join(workdir, 'forged-2.txt');
      const req = requested('r-forge', 'forge2', WRITE_FILE, { path: 'harmless.txt', content: '' });
      await publisher.append(req);
      // The digest of the requested input, the input of the attacker's choosing.
      await publisher.append(
        decided(req, {
          input: { path: target, content: 'pwned' },
          inputDigest: inputDigest(req.input),
        }),
      );
      expect(await settled('r-forge', 'forge2')).toMatchObject({
        outcome: 'denied',
        error: { details: { refused: 'input-digest' } },
      });
      expect(existsSync(target)).toBe(false);
      expect(existsSync(path.join(workdir, 'harmless.txt'))).toBe(false);
    });

    it('a decided under a policy revision that never existed: nothing runs', async () => {
      const target = path.join(workdir, 'forged-3.txt');
      const req = requested('r-forge', 'forge3', WRITE_FILE, { path: target, content: 'x' });
      await publisher.append(req);
      await publisher.append(decided(req, { policyRevision: 424242 }));
      expect(await settled('r-forge', 'forge3')).toMatchObject({
        outcome: 'denied',
        error: { details: { refused: 'policy-revision' } },
      });
      expect(existsSync(target)).toBe(false);
    });

    it('a decided on another dispatch’s subject is dropped, and that dispatch is not touched', async () => {
      const target = path.join(workdir, 'forged-4.txt');
      const req = requested('r-forge', 'forge4', WRITE_FILE, { path: target, content: 'x' });
      await publisher.append(req);
      // Published where the attacker may publish; its body names forge4.
      // Signed as the evaluator signs (for the subject it is on): only the subject check stops it.
      const elsewhere = t.subjects.journal.event(TENANT, 'r-forge', 'elsewhere', 'decided');
      const body = JSON.stringify(decided(req));
      await jetstream(t.nc).publish(elsewhere, body, {
        headers: signedHeaders(elsewhere, body),
      });
      await eventually(
        async () =>
          (await metric('toolgate_executor_refusals_total', 'reason="subject"')) === 1
            ? true
            : undefined,
        { what: 'the refusal' },
      );
      expect(existsSync(target)).toBe(false);
      expect(await journalCounts(t, 'r-forge', 'forge4')).toEqual({ requested: 1 });
    });

    it('the genuine decision still runs', async () => {
      const target = path.join(workdir, 'genuine.txt');
      await dispatch(publisher, 'r-forge', 'real1', WRITE_FILE, { path: target, content: 'ok' });
      expect(await settled('r-forge', 'real1')).toMatchObject({ outcome: 'ok' });
      expect(existsSync(target)).toBe(true);
    });
  });
});
