import { ensureJournalStreams } from '@toolgate/bus';
import { startJournal } from '@toolgate/journal';
import { classifyStartupFailure } from '@toolgate/service-kit';
import { settled } from '../support/dispatch-probes';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';
import { dispatchRequests } from '../support/dispatch-requests';
import { readyz, servicesOf, until503 } from '../support/readiness';

/**
 * The journal stream deleted under a running stack. It is the source of truth, so nothing
 * recreates it empty: every service's `/readyz` turns 503 (traffic moves elsewhere, the operator
 * is told in the log), and a journal starting over a projection that folded it refuses to create
 * or fold a new one in its place — a stream made anew starts its sequences at 1 again, and the
 * projection would drop its events as ones it had applied.
 */
describe('a journal stream deleted under a running stack', () => {
  let stack: TestStack;

  beforeAll(async () => {
    stack = await startTestStack('nostream');
  }, 60_000);
  afterAll(() => stack?.stop());

  it('turns every /readyz to 503, and a journal start-up refuses to replace it', async () => {
    const request = dispatchRequests('run-nostream', 'nostream', 10_000);
    const first = await stack.http(
      'POST',
      '/v1/dispatches',
      TOKENS.acmeAgent,
      request('list_dir', { path: '.' }),
    );
    expect(first.status).toBe(200);
    await settled(stack, first.body.dispatchId);
    const services = servicesOf(stack);
    for (const s of services) expect((await readyz(s.url)).status).toBe(200);

    const stream = stack.nats.subjects.journal.stream;
    await stack.nats.jsm.streams.delete(stream);

    // The broker answers; what is missing is the stream (and the consumers that went with it).
    for (const checks of await until503(services))
      expect(checks).toMatchObject({ nats: true, 'journal-streams': false });
    // Nothing recreated it meanwhile.
    await expect(stack.nats.jsm.streams.info(stream)).rejects.toThrow(/stream not found/);
    const refused = await stack.http(
      'POST',
      '/v1/dispatches',
      TOKENS.acmeAgent,
      request('list_dir', { path: '.' }),
    );
    expect(refused.status).toBe(503);

    // A journal (re)started over the projection that folded the stream does not create it empty.
    const refusedStart = () =>
      startJournal({ config: stack.options.journal, logger: false }).then(
        async (journal) => {
          await journal.stop();
          throw new Error('the journal started');
        },
        (err: Error) => err,
      );
    const missing = await refusedStart();
    expect(missing.message).toMatch(
      /^folding the events the journal consumer passed: the journal stream \S+ is missing, but this projection has folded it up to sequence \d+: not creating or folding a new one in its place/,
    );
    // Retried, saying so, until the stream is restored (`startWithRetry`), not given up on.
    expect(classifyStartupFailure(missing)).toBe('transient');
    await expect(stack.nats.jsm.streams.info(stream)).rejects.toThrow(/stream not found/);

    // Nor does it fold one another service's start-up made anew in its place.
    await ensureJournalStreams(stack.nats.jsm, stack.nats.subjects);
    expect((await refusedStart()).message).toMatch(/ends at sequence 0 \(it was created anew\)/);
  }, 60_000);
});

/**
 * The buckets the services read their state from deleted under a running stack: the tool
 * registry, the policies, the MCP state ledger and the artifacts store. Each is what some service
 * decides by (an empty policy bucket would change what is allowed), so none is recreated empty:
 * the services that need one answer 503 until it is restored; the journal needs none of them.
 */
describe('the services’ buckets deleted under a running stack', () => {
  let stack: TestStack;

  beforeAll(async () => {
    stack = await startTestStack('nobucket');
  }, 60_000);
  afterAll(() => stack?.stop());

  it('turns /readyz to 503 where a bucket is needed, and recreates none of them', async () => {
    const { subjects, jsm } = stack.nats;
    const buckets = [
      `KV_${subjects.toolsBucket}`,
      `KV_${subjects.policyBucket}`,
      `KV_${subjects.mcpStateBucket}`,
      `OBJ_${subjects.artifactsBucket}`,
    ];
    const { all } = stack;
    for (const s of servicesOf(stack)) expect((await readyz(s.url)).status).toBe(200);
    for (const name of buckets) await jsm.streams.delete(name);

    for (const checks of await until503([all.gateway, all.evaluator, all.executor, all.worktree]))
      expect(checks).toMatchObject({ nats: true, 'journal-streams': false });
    expect((await readyz(all.journal.url)).status).toBe(200);
    for (const name of buckets)
      await expect(jsm.streams.info(name)).rejects.toThrow(/stream not found/);
  }, 60_000);
});
