import type { KeyObject } from 'node:crypto';
import {
  NoRespondersError,
  RequestNotSentError,
  leanHeaders,
  RequestTimeoutError,
  type InboxRequests,
} from '@toolgate/bus';
import {
  ErrorCode,
  isWireError,
  MAX_JSON_DEPTH,
  signToolRequest,
  withinJsonDepth,
  ToolgateError,
  type RemoteToolRequest,
  type Subjects,
  type WireError,
} from '@toolgate/contracts';
import type { ToolRunOutcome } from '@toolgate/tools';
import { Attr, injectTraceContext, producerSpan } from '@toolgate/telemetry';
import { abortedError } from './call-executor';

const decoder = new TextDecoder();

/**
 * Runs a tool on a team's worker over NATS request/reply. A call no worker received (no worker is
 * serving the tool: no responders; or the connection was down, so it was never sent) is thrown as
 * a transient `unavailable` error — the tool did not
 * start, so the runner may retry it. Every other failure is an outcome: once a worker may have the
 * request, trying again could run the tool twice.
 *
 * `signal` stops the wait for the reply (the outcome is its reason: `cancelled`, or `timeout` at
 * the runner's deadline). The worker is not told: the bus protocol has no cancel message, so a
 * worker's run goes on until its own handling of `deadlineMs` ends it.
 */
export async function runRemoteTool(
  requests: InboxRequests,
  subjects: Subjects,
  request: RemoteToolRequest,
  signingKey: KeyObject,
  signal?: AbortSignal,
): Promise<ToolRunOutcome> {
  const { subject } = subjects.remoteTool(request.tenant, request.toolName);
  const payload = Buffer.from(JSON.stringify(request));
  // Signed with the executor's tool-request key, so a worker holding its public key can refuse a
  // call anyone else on the broker sends it (docs/bus-protocol.md).
  const auth = signToolRequest(signingKey, subject, payload, Date.now());
  try {
    signal?.throwIfAborted();
    // The worker joins the dispatch's trace: its request carries this span as `traceparent`.
    const reply = await producerSpan(
      subject,
      { [Attr.Tool]: request.toolName, [Attr.DispatchId]: request.dispatchId },
      () => {
        // Inside the span: the request's `traceparent` is this span.
        const headers = injectTraceContext(leanHeaders());
        for (const [name, value] of Object.entries(auth)) headers.set(name, value);
        return untilAborted(
          requests.request(subject, payload, { timeoutMs: request.deadlineMs, headers }),
          signal,
        );
      },
    );
    return parseOutcome(reply.data);
  } catch (err) {
    if (signal?.aborted) return { ok: false, error: abortedError(signal, request.toolName) };
    if (err instanceof NoRespondersError) {
      throw new ToolgateError(ErrorCode.Unavailable, `no worker is serving ${request.toolName}`, {
        retryable: true,
      });
    }
    if (err instanceof RequestNotSentError) {
      throw new ToolgateError(
        ErrorCode.Unavailable,
        `the broker is unreachable: the call to ${request.toolName} was not sent`,
        { retryable: true },
      );
    }
    if (err instanceof RequestTimeoutError) {
      return failure(
        ErrorCode.Timeout,
        `${request.toolName} did not answer within ${request.deadlineMs} ms`,
      );
    }
    return failure(ErrorCode.Unavailable, `remote call to ${request.toolName} failed`);
  }
}

/** `pending`, or the signal's reason as soon as it fires (the pending reply is then ignored). */
function untilAborted<T>(pending: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return pending;
  pending.catch(() => undefined);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    pending.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

function parseOutcome(data: Uint8Array): ToolRunOutcome {
  let value: unknown;
  try {
    value = JSON.parse(decoder.decode(data));
  } catch {
    return failure(
      ErrorCode.NonSerializableResult,
      'the worker replied with something that is not JSON',
    );
  }
  if (!withinJsonDepth(value, MAX_JSON_DEPTH + 2)) {
    return failure(
      ErrorCode.NonSerializableResult,
      `the worker's result nests deeper than ${MAX_JSON_DEPTH} levels of objects and arrays`,
    );
  }
  if (typeof value === 'object' && value !== null) {
    const v = value as { ok?: unknown; result?: unknown; error?: unknown };
    if (v.ok === true) return { ok: true, result: v.result ?? null };
    if (v.ok === false && isWireError(v.error)) return { ok: false, error: v.error };
  }
  return failure(ErrorCode.Internal, 'the worker replied with a malformed outcome');
}

function failure(code: WireError['code'], message: string): ToolRunOutcome {
  return { ok: false, error: { code, message } };
}
