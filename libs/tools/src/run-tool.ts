import {
  canonicalJson,
  ErrorCode,
  InvalidArgumentsError,
  ToolgateError,
  toWireError,
  type ToolContext,
  type WireError,
} from '@toolgate/contracts';
import type { ToolDef } from './tool-definition';

/** The outcome of one tool run, as it is journaled. */
export type ToolRunOutcome = { ok: true; result: unknown } | { ok: false; error: WireError };

const MAX_TOOL_ERROR_MESSAGE = 2000;

/**
 * Validates the arguments, runs `execute` under the deadline and the caller's signal, and turns
 * every way it can end into a journal-ready outcome. Never throws: a validation failure, a
 * `ModelRetry`, a timeout, a non-serialisable result and a crash are all error outcomes with a
 * stable code the model sees.
 */
export async function runTool(
  def: ToolDef,
  rawInput: unknown,
  ctx: Omit<ToolContext, 'signal'> & { signal?: AbortSignal },
  options: {
    timeoutMs?: number;
    /**
     * After a cancel or the deadline, how long the outcome waits for `execute` to return (it
     * observes its signal: a shell kills its process tree), so a caller told the call ended knows
     * the tool has stopped — unless it ignores its signal that long. Default 0: at once.
     */
    stopGraceMs?: number;
  } = {},
): Promise<ToolRunOutcome> {
  const validated = await def.schema.validate(rawInput);
  if (!validated.ok) {
    return {
      ok: false,
      error: new InvalidArgumentsError(def.contract.name, validated.issues).toWire(),
    };
  }
  const timeoutMs = options.timeoutMs ?? def.policy.timeoutMs;
  const controller = new AbortController();
  const onAbort = () => controller.abort(ctx.signal?.reason);
  ctx.signal?.addEventListener('abort', onAbort, { once: true });
  if (ctx.signal?.aborted) controller.abort(ctx.signal.reason);
  let timer: NodeJS.Timeout | undefined;
  const stopped = new Promise<ToolRunOutcome>((resolve) => {
    const settle = () =>
      resolve({
        ok: false,
        error:
          controller.signal.reason instanceof ToolgateError
            ? controller.signal.reason.toWire()
            : { code: ErrorCode.Cancelled, message: `${def.contract.name} was cancelled` },
      });
    if (controller.signal.aborted) settle();
    else controller.signal.addEventListener('abort', settle, { once: true });
  });
  if (timeoutMs !== undefined) {
    timer = setTimeout(
      () =>
        controller.abort(
          new ToolgateError(
            ErrorCode.Timeout,
            `${def.contract.name} did not finish within ${timeoutMs} ms`,
          ),
        ),
      timeoutMs,
    );
  }
  try {
    // Already cancelled: never start a tool whose outcome will be recorded as cancelled.
    if (controller.signal.aborted) return await stopped;
    const ran = (async (): Promise<ToolRunOutcome> => {
      const value = await def.execute(validated.value, { ...ctx, signal: controller.signal });
      return serialisable(def.contract.name, value);
    })().catch((err: unknown) => ({
      ok: false as const,
      error: toolError(def.contract.name, err),
    }));
    const outcome = await Promise.race([ran, stopped]);
    if (controller.signal.aborted && options.stopGraceMs) {
      let grace: NodeJS.Timeout | undefined;
      await Promise.race([
        ran,
        new Promise<void>((resolve) => (grace = setTimeout(resolve, options.stopGraceMs))),
      ]);
      clearTimeout(grace);
    }
    return outcome;
  } finally {
    if (timer) clearTimeout(timer);
    ctx.signal?.removeEventListener('abort', onAbort);
    if (!controller.signal.aborted)
      controller.abort(new ToolgateError(ErrorCode.Cancelled, 'finished'));
  }
}

function serialisable(toolName: string, value: unknown): ToolRunOutcome {
  const result = value === undefined ? null : value;
  try {
    canonicalJson(result);
  } catch (err) {
    return {
      ok: false,
      error: {
        code: ErrorCode.NonSerializableResult,
        message: `${toolName} returned a value that is not JSON: ${(err as Error).message}`,
      },
    };
  }
  return { ok: true, result };
}

function toolError(toolName: string, err: unknown): WireError {
  if (err instanceof ToolgateError) return err.toWire();
  const wire = toWireError(err);
  if (wire.code !== ErrorCode.Internal) return wire;
  // A tool's own failure: its message is what the model needs to correct course, bounded in size.
  const message = err instanceof Error ? err.message : String(err);
  return {
    code: ErrorCode.ToolFailed,
    message: `${toolName} failed: ${message.slice(0, MAX_TOOL_ERROR_MESSAGE)}`,
  };
}
