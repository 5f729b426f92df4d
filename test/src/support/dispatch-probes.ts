import type { JetStreamManager } from '@nats-io/jetstream';
import { eventually } from '@toolgate/testing';
import { TOKENS, type TestStack } from './test-stack';

/** `GET /v1/dispatches/:id`: the dispatch's projection and its history. */
export interface DispatchWithEvents {
  dispatch: {
    status: string;
    outcome: 'ok' | 'error' | 'denied' | null;
    result: unknown;
    error: { code: string; message: string } | null;
    decision: 'allow' | 'deny' | null;
    resolvedBy: string | null;
    resolutionSource: string | null;
    resolutionReason: string | null;
  };
  events: { seq: number; event: { type: string; [k: string]: unknown } }[];
}

/** Waits for an acme dispatch to settle and returns its view with its history. */
export async function settled(
  stack: TestStack,
  dispatchId: string,
  timeoutMs = 20_000,
): Promise<DispatchWithEvents> {
  return eventually(
    async () => {
      const d = await stack.http('GET', `/v1/dispatches/${dispatchId}`, TOKENS.acmeAgent);
      const view = d.body as DispatchWithEvents | undefined;
      return view?.dispatch?.status === 'settled' &&
        view.events.some((e) => e.event.type === 'settled')
        ? view
        : undefined;
    },
    { timeoutMs, what: `dispatch ${dispatchId} settled` },
  );
}

/** How many journal messages of each type the stream holds for one dispatch of a tenant. */
export async function journalCounts(
  stack: TestStack,
  tenant: string,
  runId: string,
  dispatchId: string,
): Promise<Record<string, number>> {
  const info = await stack.nats.jsm.streams.info(stack.nats.subjects.journal.stream, {
    subjects_filter: stack.nats.subjects.journal.forKey(tenant, runId, dispatchId),
  });
  return Object.fromEntries(
    Object.entries(info.state.subjects ?? {}).map(([s, n]) => [s.split('.').pop()!, n]),
  );
}

/**
 * How many journal messages of each type the stream holds per dispatch of a tenant's run, read
 * through `jsm` (a cluster's own manager, say, whichever node the stack's is on).
 */
export async function runJournalCounts(
  stack: TestStack,
  jsm: JetStreamManager,
  tenant: string,
  runId: string,
): Promise<Map<string, Record<string, number>>> {
  const info = await jsm.streams.info(stack.nats.subjects.journal.stream, {
    subjects_filter: stack.nats.subjects.journal.forRun(tenant, runId),
  });
  const counts = new Map<string, Record<string, number>>();
  for (const [subject, n] of Object.entries(info.state.subjects ?? {})) {
    const [dispatchId, type] = subject.split('.').slice(-2) as [string, string];
    counts.set(dispatchId, { ...counts.get(dispatchId), [type]: n });
  }
  return counts;
}

/** `GET /v1/runs/:runId`: the run's status and its open approvals. */
export interface RunView {
  status: string;
  pending: {
    key: string;
    dispatchId: string;
    tool: string;
    inputPreview: unknown;
    rule: unknown;
    since: string;
    expires: string;
  }[];
}

/** Waits until an acme run's view satisfies `accept` and returns it. */
export async function runWhere(
  stack: TestStack,
  runId: string,
  accept: (run: RunView) => boolean,
  { what = `run ${runId}`, timeoutMs = 10_000 } = {},
): Promise<RunView> {
  return eventually(
    async () => {
      const r = await stack.http('GET', `/v1/runs/${runId}`, TOKENS.acmeAgent);
      const run = r.body as RunView | undefined;
      return run?.status !== undefined && accept(run) ? run : undefined;
    },
    { timeoutMs, what },
  );
}
