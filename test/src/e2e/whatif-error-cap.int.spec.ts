import type { PolicyWhatIfReport } from '@toolgate/contracts';
import { eventually } from '@toolgate/testing';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

/** What `GET /v1/runs/:runId` says of each of the run's dispatches, as far as this spec reads it. */
interface RunDispatches {
  dispatches: { dispatchId: string; status: string; verdict: string | null }[];
}

/**
 * Policy what-if against what applying the candidate really does, with the default error cap
 * (5 failures in a row refuse a run's next calls). The candidate denies `grep`, so runs with five
 * greps in a row trip the cap and the rest of their calls are refused: a replay of the chain alone
 * predicts them allowed. With the runs' streaks replayed in order, every verdict is predicted, or
 * the call is marked as one the cap may change.
 */
describe('policy what-if models the error cap', () => {
  let stack: TestStack;

  beforeAll(async () => {
    stack = await startTestStack('whatif-cap');
  });
  afterAll(async () => {
    await stack?.stop();
  });

  /** 201 calls in 7 runs: list_dir, with seven greps in a row at a place that differs per run. */
  const plan = (suffix: string) =>
    Array.from({ length: 7 }, (_, r) =>
      Array.from({ length: r === 6 ? 27 : 29 }, (_, i) => ({
        runId: `cap-run-${r}${suffix}`,
        callId: `c${i}`,
        tool: (i + r) % 10 >= 2 && (i + r) % 10 <= 8 ? 'grep' : 'list_dir',
      })),
    );

  /**
   * Dispatches each run's calls one after another (each settled before the next), then reads every
   * call's verdict from its run's projection once all of them show settled there.
   */
  async function play(suffix: string): Promise<Map<string, string>> {
    const verdicts = new Map<string, string>();
    await Promise.all(
      plan(suffix).map(async (calls) => {
        const keyOf = new Map<string, string>();
        for (const c of calls) {
          const res = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAdmin, {
            runId: c.runId,
            callId: c.callId,
            agent: { agentType: 'coder' },
            tool: c.tool,
            input: c.tool === 'grep' ? { pattern: 'x', path: '.' } : { path: '.' },
            wait: 30_000,
          });
          expect(res.body.state).toBe('settled');
          keyOf.set(res.body.dispatchId as string, `${c.runId.replace(suffix, '')}/${c.callId}`);
        }
        // One read of the run per poll, not one per call: the projection folds behind the stream.
        const runId = calls[0]!.runId;
        const dispatches = await eventually(
          async () => {
            const r = await stack.http('GET', `/v1/runs/${runId}`, TOKENS.acmeAdmin);
            const listed = (r.body as RunDispatches | undefined)?.dispatches;
            return listed?.length === calls.length && listed.every((d) => d.status === 'settled')
              ? listed
              : undefined;
          },
          { what: `every call of ${runId} settled in the projection`, timeoutMs: 20_000 },
        );
        for (const d of dispatches) {
          const key = keyOf.get(d.dispatchId);
          if (key) verdicts.set(key, String(d.verdict));
        }
        expect(dispatches.map((d) => keyOf.has(d.dispatchId))).toEqual(calls.map(() => true));
      }),
    );
    return verdicts;
  }

  it('predicts all 201 verdicts of a candidate that trips the cap, or marks the calls the cap may change', async () => {
    const candidate = { engine: { deny: [{ id: 'no-grep', tool: 'grep' }] } };
    const recorded = await play('');
    expect([...recorded.values()].every((v) => v === 'allow')).toBe(true);
    const since = new Date(Date.now() - 3_600_000).toISOString();
    const whatIf = await stack.http('POST', '/v1/policy/whatif', TOKENS.acmeAdmin, {
      candidate,
      since,
      limit: 10_000,
    });
    expect(whatIf.status).toBe(200);
    const report = whatIf.body as PolicyWhatIfReport;
    expect(report.calls).toBe(201);

    const put = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, { document: candidate });
    expect(put.status).toBe(200);
    const actual = await play('-applied');
    expect(actual.size).toBe(201);

    const key = (runId: string, callId: string) => `${runId}/${callId}`;
    const predicted = new Map<string, string>();
    for (const [k, v] of recorded) predicted.set(k, v);
    for (const c of report.changes) predicted.set(key(c.runId, c.callId), c.after.verdict);
    const marked = new Set(
      (report.errorCap?.calls ?? [])
        .filter((c) => c.mark !== 'refused')
        .map((c) => key(c.runId, c.callId)),
    );
    const mismatches = [...actual].filter(
      ([k, verdict]) => predicted.get(k) !== verdict && !marked.has(k),
    );
    expect(mismatches).toEqual([]);
    // The cap mattered: it refused calls the chain alone allows (what a chain-only replay missed).
    expect(report.errorCap).toMatchObject({ cap: 5 });
    expect(report.errorCap!.refused).toBeGreaterThan(0);
    const refusedByCap = report.changes.filter((c) => c.errorCap === 'refused');
    expect(refusedByCap.length).toBe(report.errorCap!.refused);
    for (const c of refusedByCap) expect(actual.get(key(c.runId, c.callId))).toBe('deny');
  }, 300_000);
});
