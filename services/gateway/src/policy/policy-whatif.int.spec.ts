import { jetstream } from '@nats-io/jetstream';
import { ensureJournalStreams } from '@toolgate/bus';
import { ErrorCode, type PolicyWhatIfReport } from '@toolgate/contracts';
import { callEvents, useTestNats, type TestNats, signedHeaders, testKeys } from '@toolgate/testing';
import { PolicyWhatIf } from './policy-whatif';

describe('PolicyWhatIf on a real journal stream', () => {
  let t: TestNats;

  beforeAll(async () => {
    t = await useTestNats('whatifgw');
    await ensureJournalStreams(t.jsm, t.subjects);
    const js = jetstream(t.nc);
    for (let i = 0; i < 5; i++) {
      for (const e of callEvents({ dispatchId: `d${i}`, input: { command: `rm -rf ${i}` } }).all)
        await js.publish(
          t.subjects.journal.event(e.tenant, e.runId, e.dispatchId, e.type),
          JSON.stringify(e),
          {
            headers: signedHeaders(
              t.subjects.journal.event(e.tenant, e.runId, e.dispatchId, e.type),
              JSON.stringify(e),
            ),
          },
        );
    }
  });
  afterAll(() => t.cleanup());

  const candidate = { engine: { deny: [{ tool: 'shell', argv: 'rm **' }] } };

  it('runs one what-if at a time per gateway: a second one meanwhile is unavailable, and the next one runs', async () => {
    const whatIf = new PolicyWhatIf(t.nc, t.subjects, testKeys('gateway'));
    let second: Promise<unknown> | undefined;
    const first = await whatIf.run(
      'acme',
      { candidate },
      {
        // Called while the first is reading the journal: the second starts right then.
        onProgress: () => {
          second ??= whatIf.run('acme', { candidate }).catch((err: unknown) => err);
        },
      },
    );
    expect(first).toMatchObject({ calls: 5, changed: 5 });
    expect(await second).toMatchObject({ code: ErrorCode.Unavailable });
    const third: PolicyWhatIfReport = await whatIf.run('acme', { candidate, runId: 'run-1' });
    expect(third).toMatchObject({ calls: 5, changed: 5, window: { runId: 'run-1' } });
  });

  it('stops when its caller is gone', async () => {
    const whatIf = new PolicyWhatIf(t.nc, t.subjects, testKeys('gateway'));
    const gone = new AbortController();
    gone.abort();
    await expect(whatIf.run('acme', { candidate }, { signal: gone.signal })).rejects.toMatchObject({
      name: 'AbortError',
    });
    // And it let go of its slot.
    expect(await whatIf.run('acme', { candidate })).toMatchObject({ calls: 5 });
  });
});
