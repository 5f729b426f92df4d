import {
  inputDigest,
  journalEvent,
  type DecidedEvent,
  type JournalEvent,
  type RequestedEvent,
  type Risk,
  type Taint,
  type Verdict,
} from '@toolgate/contracts';

/** What a recorded call is made of; every field but the ids has a plain default. */
export interface CallEventsSpec {
  tenant?: string;
  runId?: string;
  dispatchId: string;
  tool?: string;
  risk?: Risk;
  input?: unknown;
  /** The input after hooks, as `decided` records it (default: `input`). */
  postHookInput?: unknown;
  taint?: Taint;
  profile?: string;
  verdict?: Verdict;
  decidedBy?: DecidedEvent['decidedBy'];
  rule?: unknown;
  reason?: string;
  policyRevision?: number;
  at?: string;
}

/** What every event of a call shares, and the parts `requested` and `decided` both carry. */
function callParts(spec: CallEventsSpec) {
  const { dispatchId } = spec;
  const at = spec.at ?? '2026-11-30T00:00:00.000Z';
  const base = { tenant: spec.tenant ?? 'acme', runId: spec.runId ?? 'run-1', dispatchId, at };
  const tool = {
    name: spec.tool ?? 'shell',
    contractHash: 'a'.repeat(64),
    needsApproval: false,
    executor: 'inprocess' as const,
    ...(spec.risk ? { risk: spec.risk } : {}),
  };
  return { base, tool, agent: { agentType: 'coder' }, input: spec.input ?? {} };
}

/**
 * The call's `requested` alone, as {@link callEvents} makes it: for a spec that appends thousands
 * of calls and never reads their other events (building those is most of the cost).
 */
export function requestedEvent(spec: CallEventsSpec): RequestedEvent {
  const { base, tool, agent, input } = callParts(spec);
  return journalEvent<'requested'>({
    ...base,
    type: 'requested',
    id: `${spec.dispatchId}:requested`,
    causationId: null,
    callId: `call-${spec.dispatchId}`,
    tool,
    input,
    agent,
    isolation: 'none',
    ...(spec.profile ? { profile: spec.profile } : {}),
    ...(spec.taint ? { taint: spec.taint } : {}),
    submittedBy: 'tester',
  });
}

/**
 * The journal events of one call as the services write them — `requested`, `decided`, and for an
 * allow `started` and `settled` (a deny settles at once) — for tests and benchmarks that need a
 * recorded journal without running the services.
 */
export function callEvents(spec: CallEventsSpec): {
  requested: RequestedEvent;
  decided: DecidedEvent;
  all: JournalEvent[];
} {
  const { dispatchId } = spec;
  const { base, tool, agent, input } = callParts(spec);
  const requested = requestedEvent(spec);
  const post = spec.postHookInput ?? input;
  const verdict = spec.verdict ?? 'allow';
  const decided = journalEvent<'decided'>({
    ...base,
    type: 'decided',
    id: `${dispatchId}:decided`,
    causationId: requested.id,
    verdict,
    decidedBy: spec.decidedBy ?? 'default',
    ...(spec.rule !== undefined ? { rule: spec.rule } : {}),
    ...(spec.reason ? { reason: spec.reason } : {}),
    policyRevision: spec.policyRevision ?? 1,
    inputDigest: inputDigest(post),
    input: post,
    tool,
    agent,
    isolation: 'none',
    ...(spec.profile ? { profile: spec.profile } : {}),
  });
  const all: JournalEvent[] = [requested, decided];
  if (verdict === 'allow') {
    all.push(
      journalEvent<'started'>({
        ...base,
        type: 'started',
        id: `${dispatchId}:started:1`,
        causationId: decided.id,
        attempt: 1,
        toolName: tool.name,
        executor: 'inprocess',
      }),
    );
  }
  if (verdict !== 'ask') {
    all.push(
      journalEvent<'settled'>({
        ...base,
        type: 'settled',
        id: `${dispatchId}:settled`,
        causationId: decided.id,
        toolName: tool.name,
        outcome: verdict === 'allow' ? 'ok' : 'denied',
        ...(verdict === 'allow' ? { result: { ok: true } } : {}),
        durationMs: 1,
        attempt: verdict === 'allow' ? 1 : 0,
      }),
    );
  }
  return { requested, decided, all };
}
