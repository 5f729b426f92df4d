import { randomBytes } from 'node:crypto';
import type { Msg, NatsConnection } from '@nats-io/transport-node';
import {
  ErrorCode,
  RemoteToolRequestSchema,
  ToolRequestVerifier,
  type Subjects,
  type ToolLogLevel,
  type WireError,
} from '@toolgate/contracts';
import { Attr, annotate, consumerSpan } from '@toolgate/telemetry';
import { runTool, type ToolDef, type ToolRunOutcome } from '@toolgate/tools';
import { serveQueue, type Served } from './serve-queue';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** One `ctx.log()` call of a served tool, with the call it belongs to. */
export interface ToolLogEntry {
  level: ToolLogLevel;
  message: string;
  data?: Record<string, unknown>;
  toolName: string;
  dispatchId: string;
  runId: string;
}

export interface ServeToolOptions {
  /** Where `ctx.log()` goes; dropped when absent (it never writes journal entries). */
  log?: (entry: ToolLogEntry) => void;
  /** `ctx.cwd` when the request names none (default: this process's cwd). */
  cwd?: string;
  /**
   * The executor's tool-request public key (Ed25519 SPKI, base64; `toolgate keys
   * tool-request-public-key`): when set, a request runs only if its signature verifies for this
   * subject, it is fresh (signed within a minute) and not a replay; anything else is answered
   * `unauthorized` without running the tool. Unset: requests are not checked (an open broker lets
   * anyone send this worker a call).
   */
  executorPublicKey?: string | undefined;
}

/** A running worker. `stop()` takes no new calls and resolves once the in-flight ones replied. */
export type ServedTool = Served;

/**
 * Serves a remote tool on its queue group, so several workers share the calls. Each request is
 * parsed, its input validated with the def's own schema (a failure is an `invalid-arguments`
 * outcome, never a crash), and the tool run under an AbortSignal that fires at the request's
 * deadline. Every way a call can end is replied as a `ToolRunOutcome`.
 */
export function serveTool(
  nc: NatsConnection,
  subjects: Subjects,
  tenant: string,
  def: ToolDef,
  options: ServeToolOptions = {},
): ServedTool {
  const { subject, queue } = subjects.remoteTool(tenant, def.contract.name);
  const verifier = options.executorPublicKey
    ? new ToolRequestVerifier(options.executorPublicKey)
    : undefined;
  async function handle(msg: Msg): Promise<void> {
    // In the trace the request's `traceparent` carries (the executor's call): one dispatch, one
    // trace, this worker included.
    const outcome = await consumerSpan(
      subject,
      msg.headers,
      { [Attr.MessagingConsumerGroup]: queue, [Attr.Tool]: def.contract.name },
      async (span) => {
        const refusal = verifier?.check(
          subject,
          (name) => msg.headers?.get(name) || undefined,
          msg.data,
          Date.now(),
        );
        const result = refusal
          ? failure({
              code: ErrorCode.Unauthorized,
              message: `the request is not the executor's (${refusal}): not run`,
            })
          : await answer(msg.data, span.spanContext().spanId);
        annotate({
          [Attr.Outcome]: result.ok ? 'ok' : 'error',
          [Attr.ErrorCode]: result.ok ? undefined : result.error.code,
        });
        return result;
      },
    );
    if (msg.reply) msg.respond(encoder.encode(JSON.stringify(outcome)));
  }

  async function answer(data: Uint8Array, spanId: string): Promise<ToolRunOutcome> {
    let raw: unknown;
    try {
      raw = JSON.parse(decoder.decode(data));
    } catch {
      return failure({ code: ErrorCode.InvalidRequest, message: 'the request is not JSON' });
    }
    const parsed = RemoteToolRequestSchema.safeParse(raw);
    if (!parsed.success) {
      return failure({
        code: ErrorCode.InvalidRequest,
        message: `malformed remote tool request: ${parsed.error.issues[0]?.message ?? 'invalid'}`,
      });
    }
    const req = parsed.data;
    annotate({
      [Attr.DispatchId]: req.dispatchId,
      [Attr.Tenant]: req.tenant,
      [Attr.RunId]: req.runId,
    });
    // The dispatch was keyed and decided under a contract; running a different one (an old worker
    // after a contract change, or the reverse) would record a result the contract never promised.
    if (req.contractHash !== def.contractHash) {
      return failure({
        code: ErrorCode.ExecutorUnregistered,
        message: `this worker serves a different contract of ${def.contract.name}`,
        details: { expected: req.contractHash, served: def.contractHash },
      });
    }
    return runTool(
      def,
      req.input,
      {
        runId: req.runId,
        dispatchId: req.dispatchId,
        spanId: /^0+$/.test(spanId) ? randomBytes(8).toString('hex') : spanId,
        agent: req.agent,
        cwd: req.cwd ?? options.cwd ?? process.cwd(),
        isolation: req.isolation,
        log: (level, message, data) =>
          options.log?.({
            level,
            message,
            ...(data ? { data } : {}),
            toolName: def.contract.name,
            dispatchId: req.dispatchId,
            runId: req.runId,
          }),
      },
      // The executor stops waiting at the deadline: the signal fires then, so the tool can stop too.
      { timeoutMs: req.deadlineMs },
    );
  }

  return serveQueue(nc, subject, queue, handle);
}

function failure(error: WireError): ToolRunOutcome {
  return { ok: false, error };
}
