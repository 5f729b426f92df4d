import { createHash } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Objm } from '@nats-io/obj';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { decodeJournalEvent, type WorktreeOperation } from '@toolgate/contracts';
import { setupTelemetry, type Telemetry } from '@toolgate/telemetry';
import { testKeys, useTestNats, type TestNats } from '@toolgate/testing';
import { headers as natsHeaders } from '@nats-io/transport-node';
import { bytes, makeRepo, removeDir, tempDir } from '../test/git-fixture';
import { startWorktreeService, type RunningWorktreeService } from './worktree.service';

let tn: TestNats;
let base: string;
let repo: string;
let service: RunningWorktreeService;
let telemetry: Telemetry;
const spans = new InMemorySpanExporter();

beforeAll(async () => {
  telemetry = setupTelemetry({ serviceName: 'worktree-test', exporter: spans, simple: true });
  tn = await useTestNats('worktree');
  base = await tempDir('svc');
  repo = path.join(base, 'repo');
  await mkdir(repo);
  await makeRepo(repo);
  service = await startWorktreeService({
    nc: tn.nc,
    subjects: tn.subjects,
    keys: testKeys('worktree'),
    root: path.join(base, 'worktrees'),
    repo,
    allowedRepos: [repo],
    streams: { storage: 'memory', duplicateWindowMs: 30_000 },
    onInternalError: () => undefined,
  });
});

afterAll(async () => {
  await service?.stop();
  await tn?.cleanup();
  await telemetry?.shutdown();
  if (base) await removeDir(base);
});

/** A request as its sender signs it: an acquire the executor's, collect and dispose an operator's. */
async function request(op: WorktreeOperation, body: unknown): Promise<Record<string, unknown>> {
  const payload = new TextEncoder().encode(JSON.stringify(body));
  const h = natsHeaders();
  testKeys(op === 'acquire' ? 'tool-executor' : 'ops').signRequest(
    tn.subjects.worktree(op),
    'worktree',
    payload,
    h,
  );
  const reply = await tn.nc.request(tn.subjects.worktree(op), payload, {
    timeout: 20_000,
    headers: h,
  });
  return JSON.parse(new TextDecoder().decode(reply.data)) as Record<string, unknown>;
}

async function lastJournaled(worktreeId: string, type: string) {
  const msg = await tn.jsm.direct.getMessage(tn.subjects.journal.stream, {
    last_by_subj: tn.subjects.journal.event('acme', 'run-9', worktreeId, type),
  });
  return msg ? decodeJournalEvent(msg.data) : null;
}

describe('worktree service over NATS', () => {
  it('creates the journal stream with the stream options it was given', async () => {
    const { config } = await tn.jsm.streams.info(tn.subjects.journal.stream);
    expect(config).toMatchObject({ duplicate_window: 30_000 * 1_000_000, num_replicas: 1 });
  });

  it('acquires, collects into the object store and disposes, journaling to the stream', async () => {
    const acquire = { tenant: 'acme', runId: 'run-9', agentKey: 'coder:fix-test' };
    const first = await request('acquire', acquire);
    expect(first).toMatchObject({ ok: true, created: true, worktree: { state: 'active', repo } });
    const worktree = first.worktree as { worktreeId: string; path: string };
    // The executor pins ctx.cwd at the top-level path.
    expect(first.path).toBe(worktree.path);
    expect(await request('acquire', acquire)).toMatchObject({
      ok: true,
      created: false,
      path: worktree.path,
    });

    await writeFile(path.join(worktree.path, 'README.md'), '# changed\n');
    await writeFile(path.join(worktree.path, 'blob.bin'), bytes(7, 2048));
    const collected = await request('collect', { worktreeId: worktree.worktreeId });
    expect(collected.ok).toBe(true);
    const artifact = collected.artifact as {
      ref: string;
      sha256: string;
      bytes: number;
      files: unknown[];
    };
    expect(artifact.files).toEqual([
      { path: 'README.md', status: 'modified', binary: false },
      { path: 'blob.bin', status: 'untracked', binary: true },
    ]);
    const store = await new Objm(tn.nc).open(tn.subjects.artifactsBucket);
    const blob = await store.getBlob(artifact.ref);
    expect(blob).not.toBeNull();
    expect(blob!.byteLength).toBe(artifact.bytes);
    expect(createHash('sha256').update(blob!).digest('hex')).toBe(artifact.sha256);

    const disposed = await request('dispose', { worktreeId: worktree.worktreeId, outcome: 'ok' });
    expect(disposed).toMatchObject({ ok: true, worktree: { state: 'disposed' } });

    expect(await lastJournaled(worktree.worktreeId, 'worktree-acquired')).toMatchObject({
      type: 'worktree-acquired',
      agentKey: 'coder:fix-test',
      path: worktree.path,
    });
    expect(await lastJournaled(worktree.worktreeId, 'worktree-collected')).toMatchObject({
      artifact: { ref: artifact.ref, sha256: artifact.sha256 },
    });
    expect(await lastJournaled(worktree.worktreeId, 'worktree-disposed')).toMatchObject({
      type: 'worktree-disposed',
    });

    // Each request ran in a consumer span carrying the worktree id and its outcome.
    await telemetry.forceFlush();
    const acquireSpans = spans
      .getFinishedSpans()
      .filter((s) => s.name === `process ${tn.subjects.worktree('acquire')}`);
    expect(acquireSpans.length).toBeGreaterThanOrEqual(2);
    expect(acquireSpans[0]!.attributes).toMatchObject({
      'toolgate.dispatch_id': worktree.worktreeId,
      'toolgate.tenant': 'acme',
      'toolgate.outcome': 'ok',
    });
  });

  it('answers bad requests with typed errors', async () => {
    expect(await request('acquire', { tenant: 'acme' })).toMatchObject({
      ok: false,
      error: { code: 'invalid-request' },
    });
    expect(
      await request('acquire', {
        tenant: 'acme',
        runId: 'run-9',
        agentKey: 'a',
        ref: 'no-such-ref',
      }),
    ).toMatchObject({ ok: false, error: { code: 'config' } });
    await telemetry.forceFlush();
    expect(
      spans.getFinishedSpans().some((s) => s.attributes['toolgate.error_code'] === 'config'),
    ).toBe(true);
    expect(
      await request('acquire', { tenant: 'acme', runId: 'run-9', agentKey: 'a', repo: base }),
    ).toMatchObject({ ok: false, error: { code: 'forbidden' } });
    expect(await request('collect', { worktreeId: 'wt_nope_g0' })).toMatchObject({
      ok: false,
      error: { code: 'not-found' },
    });
    expect(await request('dispose', { worktreeId: 'wt_nope_g0', outcome: 'maybe' })).toMatchObject({
      ok: false,
      error: { code: 'invalid-request' },
    });
    const garbled = new TextEncoder().encode('{not json');
    const signed = natsHeaders();
    testKeys('ops').signRequest(tn.subjects.worktree('collect'), 'worktree', garbled, signed);
    const raw = await tn.nc.request(tn.subjects.worktree('collect'), garbled, {
      timeout: 5000,
      headers: signed,
    });
    expect(JSON.parse(new TextDecoder().decode(raw.data))).toMatchObject({
      ok: false,
      error: { code: 'invalid-request' },
    });
    // Unsigned, or an acquire signed by an operator (only the executor acquires): unauthorized.
    const unsigned = await tn.nc.request(
      tn.subjects.worktree('acquire'),
      new TextEncoder().encode(JSON.stringify({ tenant: 'acme', runId: 'r', agentKey: 'a:' })),
      { timeout: 5000 },
    );
    expect(JSON.parse(new TextDecoder().decode(unsigned.data))).toMatchObject({
      ok: false,
      error: { code: 'unauthorized', details: { reason: 'unsigned' } },
    });
    const acquire = new TextEncoder().encode('{}');
    const byOps = natsHeaders();
    testKeys('ops').signRequest(tn.subjects.worktree('acquire'), 'worktree', acquire, byOps);
    const refused = await tn.nc.request(tn.subjects.worktree('acquire'), acquire, {
      timeout: 5000,
      headers: byOps,
    });
    expect(JSON.parse(new TextDecoder().decode(refused.data))).toMatchObject({
      ok: false,
      error: { code: 'unauthorized', details: { reason: 'wrong-producer' } },
    });
  });
});
