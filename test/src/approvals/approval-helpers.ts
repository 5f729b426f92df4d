import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  WEBHOOK_DELIVERY_HEADER,
  WEBHOOK_EVENT_HEADER,
  WEBHOOK_SIGNATURE_HEADER,
  type ApprovalListItem,
  type ApprovalWebhookBody,
} from '@toolgate/contracts';
import { eventually } from '@toolgate/testing';
import { journalCounts } from '../support/dispatch-probes';
import { serveRemoteTool } from '../support/remote-tool';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

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
  const served = await serveRemoteTool(
    stack,
    {
      name,
      description: 'Counts its executions.',
      parameters: { type: 'object', properties: { n: { type: 'string' } }, required: ['n'] },
      policy: { timeoutMs: 30_000 },
    },
    (input) => {
      calls.push(input);
      return { ok: true, result: { ran: input } };
    },
  );
  return {
    name,
    calls,
    runsOf: (n) => calls.filter((c) => (c as { n?: string }).n === n).length,
    stop: () => served.stop(),
  };
}

/**
 * The `gated` counting tool, behind a policy that asks a person about every call of it (rule
 * `gate-it`): the set-up of the specs that only need some call to park.
 */
export async function gatedTool(stack: TestStack): Promise<CountingTool> {
  const gated = await countingTool(stack, 'gated');
  const put = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
    document: { engine: { ask: [{ id: 'gate-it', tool: 'gated' }] } },
  });
  if (put.status !== 200)
    throw new Error(`policy not put: ${put.status} ${JSON.stringify(put.body)}`);
  return gated;
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
  approval: ApprovalListItem;
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
      return (list.body?.approvals as ApprovalListItem[] | undefined)?.find(
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

/** How many journal messages of each type a parked call's dispatch has under `tenant`'s subjects. */
export function journalOf(
  stack: TestStack,
  parked: Parked,
  tenant = 'acme',
): Promise<Record<string, number>> {
  return journalCounts(stack, tenant, parked.runId, parked.dispatchId);
}

/** The journal of a call parked for a person: no resolution, never started. */
export const JOURNAL_WHILE_PARKED = { requested: 1, decided: 1, suspended: 1 };

/** The journal of a parked call that was allowed, ran and settled: one event of each type. */
export const JOURNAL_AFTER_ALLOW = {
  requested: 1,
  decided: 1,
  suspended: 1,
  resolved: 1,
  started: 1,
  settled: 1,
};

/** The journal of a parked call that was denied: never started. */
export const JOURNAL_AFTER_DENY = {
  requested: 1,
  decided: 1,
  suspended: 1,
  resolved: 1,
  settled: 1,
};

/** Resolves over HTTP. */
export function resolve(
  stack: TestStack,
  key: string,
  body: Record<string, unknown>,
  token: string = TOKENS.acmeApprover,
): Promise<{ status: number; body: any }> {
  return stack.http('POST', `/v1/approvals/${key}/resolve`, token, body);
}

/** One webhook request a {@link webhookReceiver} took. */
export interface Delivery {
  event: string;
  id: string;
  signature: string;
  raw: string;
  body: ApprovalWebhookBody;
}

/**
 * A real HTTP receiver of approval webhooks on loopback: `url` for
 * `GATEWAY_APPROVAL_WEBHOOK_URLS`, what it took in `deliveries`. With `failFirst`, the first attempt
 * of each delivery is answered 503 (every one is retried).
 */
export async function webhookReceiver(options: { failFirst?: boolean } = {}) {
  const deliveries: Delivery[] = [];
  const failedOnce = new Set<string>();
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    req.on('end', () => {
      const id = String(req.headers[WEBHOOK_DELIVERY_HEADER]);
      if (options.failFirst && !failedOnce.has(id)) {
        failedOnce.add(id);
        res.writeHead(503).end();
        return;
      }
      deliveries.push({
        event: String(req.headers[WEBHOOK_EVENT_HEADER]),
        id,
        signature: String(req.headers[WEBHOOK_SIGNATURE_HEADER]),
        raw,
        body: JSON.parse(raw) as ApprovalWebhookBody,
      });
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    deliveries,
    /** The delivery ids answered 503 once (`failFirst`). */
    refused: failedOnce as ReadonlySet<string>,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * A stack whose gateway posts approval webhooks to a {@link webhookReceiver} of the test's own
 * (signed with `secret`, retried 100 ms apart), with {@link gatedTool} registered; `stop` ends all
 * three.
 */
export async function startWebhookStack(
  label: string,
  options: { secret: string; failFirst?: boolean; env?: Record<string, string> },
) {
  const receiver = await webhookReceiver({ failFirst: options.failFirst });
  let stack: TestStack | undefined;
  try {
    stack = await startTestStack(label, {
      GATEWAY_APPROVAL_WEBHOOK_URLS: receiver.url,
      GATEWAY_APPROVAL_WEBHOOK_SECRET: options.secret,
      GATEWAY_APPROVAL_WEBHOOK_BACKOFF_MS: '100',
      ...options.env,
    });
    const gated = await gatedTool(stack);
    const started = stack;
    return {
      stack: started,
      gated,
      receiver,
      async stop() {
        gated.stop();
        await started.stop();
        await receiver.close();
      },
    };
  } catch (err) {
    await stack?.stop();
    await receiver.close();
    throw err;
  }
}
