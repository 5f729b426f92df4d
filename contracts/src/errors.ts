/**
 * Typed errors with stable string codes.
 *
 * Every error that crosses a process boundary (bus, HTTP, CLI, SDK) travels as a {@link WireError}
 * `{ code, message, details }` and is checked by `code`, never by `instanceof`: the class identity
 * does not survive serialisation, the code does.
 */

/** The stable error codes. Adding one is a contract change; renaming one is a breaking change. */
export const ErrorCode = {
  /** A definition or configuration is invalid (tool, policy, schema, environment). */
  Config: 'config',
  /** A request at an edge is malformed (HTTP body, bus payload, CLI flag). */
  InvalidRequest: 'invalid-request',
  /** A request, or the event it would journal, is larger than the edge or the broker takes. */
  TooLarge: 'too-large',
  /** The dispatch names a tool that is not registered. */
  UnknownTool: 'unknown-tool',
  /** The call's arguments do not satisfy the tool's parameters schema. */
  InvalidArguments: 'invalid-arguments',
  /** The tool asked the model to retry with corrected input (bounded per call chain). */
  ModelRetry: 'model-retry',
  /** The tool returned a value that is not JSON-serialisable. */
  NonSerializableResult: 'non-serializable-result',
  /** The tool's declared executor is not served here. */
  ExecutorUnregistered: 'executor-unregistered',
  /** The permission chain denied the call. */
  Denied: 'denied',
  /** A deadline passed (tool run, hook, approval, request). */
  Timeout: 'timeout',
  /** The approval was already resolved; details name the winning decision. */
  AlreadyResolved: 'already-resolved',
  /** An approval resolution names a different call than the one that was asked for. */
  ApprovalMismatch: 'approval-mismatch',
  /** The dispatch was cancelled. */
  Cancelled: 'cancelled',
  /**
   * An imported MCP tool's upstream definition is no longer the one an admin approved (a "rug
   * pull"): its calls are refused until the tool is imported (re-approved) again.
   */
  ContractDrift: 'contract-drift',
  /** The tool threw an error that is not one of the codes above. */
  ToolFailed: 'tool-failed',
  /** A path resolves outside the scopes the execution policy allows. */
  PathOutsideScope: 'path-outside-scope',
  /** A message could not be processed within its redelivery budget and was dead-lettered. */
  PoisonMessage: 'poison-message',
  /**
   * The run's consecutive-error cap is reached: its last calls all ended in an error or a denial,
   * so its next dispatch is refused until a call succeeds or someone resets the cap.
   */
  ErrorCap: 'error-cap',
  /** No credentials, or credentials that do not verify. */
  Unauthorized: 'unauthorized',
  /** Credentials verify but lack the scope or tenant for the operation. */
  Forbidden: 'forbidden',
  /**
   * A bus request names no operation of the API it was sent to (`<prefix>.api.<op>` with a
   * mistyped `<op>`); details list the operations there are.
   */
  UnknownOperation: 'unknown-operation',
  /** The addressed resource does not exist (or is not visible to the caller). */
  NotFound: 'not-found',
  /** The operation conflicts with the current state. */
  Conflict: 'conflict',
  /** A dependency (broker, database, worker) is not reachable right now. */
  Unavailable: 'unavailable',
  /** A bug: something that should not happen did. */
  Internal: 'internal',
} as const;

export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

const knownCodes: ReadonlySet<string> = new Set(Object.values(ErrorCode));

/** Whether `code` is one of the stable codes. */
export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && knownCodes.has(code);
}

/** Codes whose failure may succeed when retried unchanged. */
const retryableCodes: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  ErrorCode.Timeout,
  ErrorCode.Unavailable,
]);

/**
 * Whether a failure with this code may succeed when retried unchanged (a dependency that is not
 * reachable right now, a deadline) — the default of {@link ToolgateError.retryable}. The
 * tool-executor retries such a failure itself only when it happened before the tool could start.
 */
export function isRetryableCode(code: ErrorCode): boolean {
  return retryableCodes.has(code);
}

/** JSON-safe details attached to an error. */
export type ErrorDetails = Record<string, unknown>;

/** An error as it travels on the wire. */
export interface WireError {
  code: ErrorCode;
  message: string;
  details?: ErrorDetails;
}

/** The base of every Toolgate error. */
export class ToolgateError extends Error {
  readonly code: ErrorCode;
  readonly details: ErrorDetails | undefined;
  readonly retryable: boolean;

  constructor(
    code: ErrorCode,
    message: string,
    options: { details?: ErrorDetails; cause?: unknown; retryable?: boolean } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ToolgateError';
    this.code = code;
    this.details = options.details;
    this.retryable = options.retryable ?? retryableCodes.has(code);
  }

  /** The wire form. The cause stays behind: it may carry secrets or host detail. */
  toWire(): WireError {
    return this.details === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, details: this.details };
  }

  toJSON(): WireError {
    return this.toWire();
  }
}

/** An invalid definition or configuration, raised at definition time. */
export class ConfigError extends ToolgateError {
  constructor(message: string, options: { details?: ErrorDetails; cause?: unknown } = {}) {
    super(ErrorCode.Config, message, options);
    this.name = 'ConfigError';
  }
}

/** One problem found while validating a value against a schema. */
export interface ValidationIssue {
  /** JSON path segments to the offending value; empty for the root. */
  path: (string | number)[];
  message: string;
}

/** The tool's arguments did not validate; `details.issues` lists every problem. */
export class InvalidArgumentsError extends ToolgateError {
  constructor(toolName: string, issues: ValidationIssue[]) {
    super(ErrorCode.InvalidArguments, formatIssues(toolName, issues), {
      details: { tool: toolName, issues },
    });
    this.name = 'InvalidArgumentsError';
  }
}

/** Thrown by a tool to ask the model to correct its call; surfaced as an error tool result. */
export class ModelRetry extends ToolgateError {
  constructor(message: string) {
    super(ErrorCode.ModelRetry, message);
    this.name = 'ModelRetry';
  }
}

/** A tool returned a value that cannot be represented as JSON. */
export class NonSerializableValueError extends ToolgateError {
  constructor(message: string, details?: ErrorDetails) {
    super(ErrorCode.NonSerializableResult, message, details ? { details } : {});
    this.name = 'NonSerializableValueError';
  }
}

function formatIssues(toolName: string, issues: ValidationIssue[]): string {
  const listed = issues
    .slice(0, 5)
    .map((i) => `${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`)
    .join('; ');
  const more = issues.length > 5 ? ` (+${issues.length - 5} more)` : '';
  return `invalid arguments for ${toolName}: ${listed}${more}`;
}

/** Whether `err` carries the given code, across process boundaries (duck-typed, never instanceof). */
export function hasErrorCode(err: unknown, code: ErrorCode): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === code;
}

/**
 * The wire form of any thrown value. Unknown errors become `internal` with a generic message so
 * stack traces, paths and secrets never leave the process.
 */
export function toWireError(err: unknown): WireError {
  if (err instanceof ToolgateError) return err.toWire();
  if (isWireError(err)) {
    return err.details === undefined
      ? { code: err.code, message: err.message }
      : { code: err.code, message: err.message, details: err.details };
  }
  return { code: ErrorCode.Internal, message: 'internal error' };
}

/** Rebuilds a typed error from its wire form. An unknown code becomes `internal`. */
export function fromWireError(wire: unknown): ToolgateError {
  if (!isWireError(wire)) {
    return new ToolgateError(ErrorCode.Internal, 'malformed error on the wire');
  }
  const options = wire.details === undefined ? {} : { details: wire.details };
  if (wire.code === ErrorCode.Config) return new ConfigError(wire.message, options);
  return new ToolgateError(wire.code, wire.message, options);
}

/** Whether `value` has the shape of a {@link WireError} with a known code. */
export function isWireError(value: unknown): value is WireError {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return (
    isErrorCode(v.code) &&
    typeof v.message === 'string' &&
    (v.details === undefined || (typeof v.details === 'object' && v.details !== null))
  );
}
