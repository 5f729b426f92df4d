import type { Subscription } from '@nats-io/transport-node';
import { eventually } from '@toolgate/testing';
import { TOKENS, type TestStack } from '../support/test-stack';

export const agent = { agentType: 'coder', label: 'approvals' };

/** A remote tool answered by a worker in the test, so every execution is counted. */
export interface CountingTool {
  name: string;
  /** The inputs it was executed with, in order. */
  calls: unknown[];
  /** How many times it ran with an input whose `n` is `n`. */
  runsOf(n: string): number;
  stop(): void;
}

/** Registers a remote tool `name` for acme and serves it from the test's own NATS connection. */
export async function countingTool(stack: TestStack, name: string): Promise<CountingTool> {
  const calls: unknown[] = [];
  const { subject, queue } = stack.nats.subjects.remoteTool('acme', name);
  const sub: Subscription = stack.nats.nc.subscribe(subject, {
    queue,
    callback: (_err, msg) => {
      const req = JSON.parse(new TextDecoder().decode(msg.data)) as { input: unknown };
      calls.push(req.input);
      msg.respond(JSON.stringify({ ok: true, result: { ran: req.input } }));
    },
  });
  const reg = await stack.http('POST', '/v1/tools', TOKENS.acmeAdmin, {
    tool: {
      name,
      description: 'Counts its executions.',
      parameters: { type: 'object', properties: { n: { type: 'string' } }, required: ['n'] },
      policy: { executor: 'remote', timeoutMs: 30_000 },
    },
  });
  if (reg.status !== 201)
    throw new Error(`registering ${name}: ${reg.status} ${JSON.stringify(reg.body)}`);
  return {
    name,
    calls,
    runsOf: (n) => calls.filter((c) => (c as { n?: string }).n === n).length,
    stop: () => sub.unsubscribe(),
  };
}

let seq = 0;
/** A value unique to this process, so calls never share an approval key by accident. */
export const unique = (label: string): string => `${label}-${process.pid}-${++seq}-${Date.now()}`;

export interface Parked {
  dispatchId: string;
  runId: string;
  callId: string;
  input: { n: string };
  body: Record<string, unknown>;
  approval: ApprovalView;
}

/** An approval as `GET /v1/approvals` lists it. */
export interface ApprovalView {
  tenant: string;
  runId: string;
  dispatchId: string;
  approvalKey: string;
  inputDigest: string;
  status: 'pending' | 'resolved';
  toolName: string;
  input: unknown;
  rule: unknown;
  submittedBy: string;
  onTimeout: 'allow' | 'deny';
  suspendedAt: string;
  expiresAt: string;
  decision: 'allow' | 'deny' | null;
  reason: string | null;
  resolvedBy: string | null;
  source: 'human' | 'timeout' | 'policy' | null;
  resolvedAt: string | null;
}

/** Submits a call the policy asks about and waits until it is parked and listed. */
export async function park(
  stack: TestStack,
  tool: string,
  {
    runId = unique('run'),
    token = TOKENS.acmeAgent,
    n = unique('n'),
  }: { runId?: string; token?: string; n?: string } = {},
): Promise<Parked> {
  const callId = unique('call');
  const input = { n };
  const body = { runId, callId, agent, tool, input, wait: 10_000 };
  const res = await stack.http('POST', '/v1/dispatches', token, body);
  if (res.status !== 202 || res.body.state !== 'suspended') {
    throw new Error(`expected a parked call, got ${res.status} ${JSON.stringify(res.body)}`);
  }
  const dispatchId = res.body.dispatchId as string;
  let last: unknown;
  const approval = await eventually(
    async () => {
      const list = await stack.http('GET', `/v1/approvals?runId=${runId}`, TOKENS.acmeApprover);
      last = list;
      return (list.body?.approvals as ApprovalView[] | undefined)?.find(
        (a) => a.dispatchId === dispatchId,
      );
    },
    { timeoutMs: 20_000, what: `approval of ${dispatchId} listed` },
  ).catch(async (err: Error) => {
    const d = await stack.http('GET', `/v1/dispatches/${dispatchId}`, TOKENS.acmeAgent);
    throw new Error(
      `${err.message}; last listing ${JSON.stringify(last)}; dispatch ${JSON.stringify(d)}`,
    );
  });
  return { dispatchId, runId, callId, input, body, approval };
}

/** Waits for a dispatch to settle and returns its view with its history. */
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

/** Resolves over HTTP. */
export function resolve(
  stack: TestStack,
  key: string,
  body: Record<string, unknown>,
  token: string = TOKENS.acmeApprover,
): Promise<{ status: number; body: any }> {
  return stack.http('POST', `/v1/approvals/${key}/resolve`, token, body);
}
