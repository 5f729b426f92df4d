import { z } from 'zod';

/**
 * Whether a failed start-up may succeed if tried again unchanged. A broker or database that does
 * not answer yet (or answers "not now") is transient; a configuration, a credential or a permission
 * that is wrong stays wrong, and so does a bug.
 */
export type StartupFailureKind = 'transient' | 'permanent';

/** What a start-up was doing when it failed, carried to the log line with the failure itself. */
export class StartupStepError extends Error {
  constructor(
    readonly step: string,
    cause: unknown,
  ) {
    super(`${step}: ${describeFailure(cause)}`, { cause });
    this.name = 'StartupStepError';
  }
}

/** How long a start-up step runs before it is said to be still running, and again at each multiple. */
export const STARTUP_STEP_NOTICE_MS = 15_000;

/**
 * Runs one step of a start-up, naming it on failure (`connecting to NATS at …`). A step still
 * running after {@link STARTUP_STEP_NOTICE_MS} (and at each multiple of it) is said so on `notice`
 * (default: stderr): a start-up that waits on something — a stream being placed, a lock another
 * replica holds, a long fold — says what it waits on instead of staying silent until its probe
 * gives up. The step is not cut short: some are long on purpose.
 */
export async function startupStep<T>(
  step: string,
  run: () => Promise<T> | T,
  notice: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
  noticeMs = STARTUP_STEP_NOTICE_MS,
): Promise<T> {
  const startedAt = Date.now();
  const timer = setInterval(
    () => notice(`start-up: still ${step} after ${Math.round((Date.now() - startedAt) / 1000)} s`),
    noticeMs,
  );
  timer.unref();
  try {
    return await run();
  } catch (err) {
    if (err instanceof StartupStepError) throw err;
    throw new StartupStepError(step, err);
  } finally {
    clearInterval(timer);
  }
}

/** NATS client errors (by name: the class may come from another copy of the client). */
const PERMANENT_NATS_ERRORS: ReadonlySet<string> = new Set([
  'AuthorizationError',
  'UserAuthenticationExpiredError',
  'PermissionViolationError',
  'InvalidArgumentError',
  'InvalidSubjectError',
  'InvalidNameError',
]);

/** Bugs: trying again runs the same code into the same wall. */
const PROGRAMMING_ERRORS: ReadonlySet<string> = new Set([
  'TypeError',
  'ReferenceError',
  'SyntaxError',
  'RangeError',
]);

/** Operating-system network errors: the other side is not there (yet), or the path to it is not. */
const TRANSIENT_SYSTEM_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'EAI_AGAIN',
  // A name that does not resolve yet: in a cluster the broker's Service may come up after us.
  'ENOTFOUND',
  // The previous process on our port has not let go of it yet.
  'EADDRINUSE',
]);

/**
 * PostgreSQL SQLSTATE classes and codes that mean "not now": connection exceptions (08), operator
 * intervention such as a restart or recovery in progress (57P01–57P03), insufficient resources
 * (53, e.g. too many connections), and transaction rollbacks (40) under a concurrent migration.
 */
function isTransientSqlState(code: string): boolean {
  return (
    code.startsWith('08') ||
    code.startsWith('53') ||
    code.startsWith('40') ||
    code === '57P01' ||
    code === '57P02' ||
    code === '57P03'
  );
}

/** A five-character SQLSTATE (PostgreSQL's `code`), as opposed to a Node system error code. */
const SQLSTATE = /^[0-9A-Z]{5}$/;

/**
 * Classifies a start-up failure. Walks the `cause` chain (a named step wraps the real error; the
 * NATS client wraps socket errors) and decides on the first link it recognises. Unrecognised
 * failures are transient: a start-up that gives up on something it did not foresee leaves a
 * service down until a person comes, which is exactly what retrying avoids.
 */
export function classifyStartupFailure(err: unknown): StartupFailureKind {
  for (let link: unknown = err, depth = 0; link && depth < 8; depth++) {
    const kind = classifyOne(link);
    if (kind) return kind;
    link = (link as { cause?: unknown }).cause;
  }
  return 'transient';
}

function classifyOne(err: unknown): StartupFailureKind | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const { name, code, retryable, status, message } = err as {
    name?: unknown;
    code?: unknown;
    retryable?: unknown;
    status?: unknown;
    message?: unknown;
  };
  // A Toolgate error says for itself; `config` is the one a start-up raises for bad settings.
  if (typeof retryable === 'boolean' && typeof code === 'string')
    return retryable ? 'transient' : 'permanent';
  if (name === 'ZodError') return 'permanent';
  if (typeof name === 'string' && PERMANENT_NATS_ERRORS.has(name)) return 'permanent';
  if (typeof name === 'string' && PROGRAMMING_ERRORS.has(name)) return 'permanent';
  if (typeof (err as { apiError?: unknown }).apiError === 'function') {
    // The API answered: 503 (JetStream not ready, no quorum) and 408 may pass; 4xx is a request
    // the server will refuse again (a stream configured differently, a limit, a bad name).
    return typeof status === 'number' && (status >= 500 || status === 408)
      ? 'transient'
      : 'permanent';
  }
  if (name === 'ConnectionError' && typeof message === 'string' && /does not support/.test(message))
    return 'permanent';
  if (typeof code === 'string') {
    if (TRANSIENT_SYSTEM_CODES.has(code)) return 'transient';
    // Authentication (28), an unknown database (3D) or schema (3F), a privilege or SQL error (42).
    if (SQLSTATE.test(code)) return isTransientSqlState(code) ? 'transient' : 'permanent';
  }
  return undefined;
}

/** One line about a failure: its message, the configuration issues for a zod error. */
export function describeFailure(err: unknown): string {
  if (err instanceof z.ZodError) return `invalid configuration: ${z.prettifyError(err)}`;
  if (err instanceof Error) {
    const cause = err.cause as { message?: unknown } | undefined;
    // "connection refused" says more with the socket error under it (ECONNREFUSED 127.0.0.1:4222).
    const detail =
      cause && typeof cause.message === 'string' && !err.message.includes(cause.message)
        ? ` (${cause.message})`
        : '';
    return `${err.message || err.name}${detail}`;
  }
  return String(err);
}
