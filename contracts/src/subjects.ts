import { z } from 'zod';
import { ConfigError } from './errors';

/**
 * Every NATS subject, stream, consumer, bucket and queue name Toolgate uses, built from one
 * configurable prefix. Services never write a subject string of their own: publisher and consumer
 * both call these builders, so they cannot drift apart.
 *
 * Journal grammar: `<prefix>.journal.<tenant>.<runId>.<key>.<event>`, where `key` is the dispatch
 * id for dispatch events and the worktree id for worktree events. Filtering on the last token gives
 * a service only the events it acts on; `<prefix>.journal.<tenant>.<runId>.>` replays a run.
 */

/** A subject token: no dots, wildcards, whitespace or control characters. */
export const SUBJECT_TOKEN_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;
/** A subject token in a request or event body (tenant, run id, dispatch id): the pattern above. */
export const SubjectTokenSchema = z
  .string()
  .regex(SUBJECT_TOKEN_PATTERN, 'must be 1-128 characters of [A-Za-z0-9_-]');
/** The prefix also names streams and buckets, so it is a single short token. */
export const PREFIX_PATTERN = /^[A-Za-z0-9_-]{1,32}$/;

/** Throws a {@link ConfigError} unless `value` is one safe subject token. */
export function assertSubjectToken(kind: string, value: unknown): asserts value is string {
  if (!isSubjectToken(value)) {
    throw new ConfigError(
      `${kind} must be 1-128 characters of [A-Za-z0-9_-] (no dots, wildcards or spaces), got ${JSON.stringify(value)}`,
      { details: { field: kind } },
    );
  }
}

/** Whether `value` is one safe subject token. */
export function isSubjectToken(value: unknown): value is string {
  return typeof value === 'string' && SUBJECT_TOKEN_PATTERN.test(value);
}

/**
 * The event type a journal subject names: its last token (not checked to be a known type). The
 * one reading of it that signing, trust checks and tests share, so they cannot disagree.
 */
export function eventTypeOfSubject(subject: string): string {
  return subject.slice(subject.lastIndexOf('.') + 1);
}

/** Operations served by the gateway over NATS request/reply (mirrors the HTTP API). */
export const ApiOperation = {
  RegisterTool: 'tools.register',
  ListTools: 'tools.list',
  SubmitDispatch: 'dispatch.submit',
  GetDispatch: 'dispatch.get',
  GetDispatchValue: 'dispatch.value',
  GetRun: 'run.get',
  ResetErrorCap: 'run.reset-error-cap',
  PutPolicy: 'policy.put',
  GetPolicy: 'policy.get',
  EvaluatePolicy: 'policy.evaluate',
  WhatIfPolicy: 'policy.whatif',
  ListApprovals: 'approvals.list',
  GetApproval: 'approvals.get',
  ResolveApproval: 'approvals.resolve',
  InstallScript: 'tools.scripts.install',
  ListScripts: 'tools.scripts',
  WhoAmI: 'whoami',
  ImportMcpTools: 'mcp.servers.import',
} as const;
export type ApiOperation = (typeof ApiOperation)[keyof typeof ApiOperation];

/** Read-side queries the journal service answers from its projection (the gateway forwards them). */
export const QueryOperation = {
  GetDispatch: 'dispatch.get',
  GetDispatchValue: 'dispatch.value',
  GetRun: 'run.get',
  ListApprovals: 'approvals.list',
  GetApproval: 'approvals.get',
} as const;
export type QueryOperation = (typeof QueryOperation)[keyof typeof QueryOperation];

/** Requests the worktree service answers. */
export const WorktreeOperation = {
  Acquire: 'acquire',
  Collect: 'collect',
  Dispose: 'dispose',
} as const;
export type WorktreeOperation = (typeof WorktreeOperation)[keyof typeof WorktreeOperation];

/**
 * Operators' requests to the journal service (`toolgate journal …`); bodies and answers in
 * `journal-ops.ts`.
 */
export const JournalOperation = {
  /** Rebuild the projection from the stream into a schema of its own, compare, and switch. */
  Rebuild: 'rebuild',
} as const;
export type JournalOperation = (typeof JournalOperation)[keyof typeof JournalOperation];

/** The core-NATS approval notifications (`subjects.approvals`): a call parked, an approval resolved. */
export const ApprovalNotification = {
  Pending: 'pending',
  Resolved: 'resolved',
} as const;
export type ApprovalNotification = (typeof ApprovalNotification)[keyof typeof ApprovalNotification];

/** The durable consumers, one per role; replicas of a service share theirs. */
export const ConsumerRole = {
  Evaluator: 'evaluator',
  Executor: 'executor',
  Journal: 'journal',
  Worktree: 'worktree',
} as const;
export type ConsumerRole = (typeof ConsumerRole)[keyof typeof ConsumerRole];

export interface Subjects {
  readonly prefix: string;
  /** Stream and subjects of the journal. */
  readonly journal: {
    readonly stream: string;
    /** Every journal subject (the stream's filter). */
    readonly all: string;
    /** The subject of one event. */
    event(tenant: string, runId: string, key: string, type: string): string;
    /** All events of one dispatch (or worktree). */
    forKey(tenant: string, runId: string, key: string): string;
    /** All events of one run. */
    forRun(tenant: string, runId: string): string;
    /** One event type across every tenant and run. */
    ofType(type: string): string;
    /** Every tenant's events. */
    forTenant(tenant: string): string;
    /** One event type of one tenant: of one run, or of every run (`'*'`). */
    ofTypeIn(type: string, tenant: string, runId: string | '*'): string;
    /** Every event of a tenant's run; `'*'` for any tenant or any run (`toolgate journal tail`). */
    matching(tenant: string | '*', runId: string | '*'): string;
    /**
     * The dispatch (or worktree) a journal subject names, as `<tenant>.<key>`: the unit whose
     * events must be folded in stream order. The subject as given when it is not a journal one.
     */
    keyOf(subject: string): string;
  };
  /** Dead-lettered messages, one subject per consuming role. */
  readonly deadLetter: {
    readonly stream: string;
    readonly all: string;
    forRole(role: ConsumerRole): string;
  };
  /** Durable consumer name for a role. */
  consumer(role: ConsumerRole): string;
  /** Gateway request/reply subject for an operation. */
  api(operation: ApiOperation): string;
  /**
   * Every gateway API subject (`<prefix>.api.>`): the gateway serves them all in one queue group,
   * so that a request naming no operation gets `unknown-operation` rather than no responders.
   */
  readonly apiAll: string;
  /** The operation a `<prefix>.api.<op>` subject names, or undefined when it names none. */
  apiOperationOf(subject: string): ApiOperation | undefined;
  /** Journal-service query subject for an operation. */
  query(operation: QueryOperation): string;
  /** Core-NATS notifications of approval events for one tenant (`pending`, `resolved`). */
  approvals(tenant: string, event: ApprovalNotification | '*'): string;
  /** A team's remote hook or canUseTool service. */
  hook(tenant: string, name: string): string;
  /** A remote tool worker's subject and queue group. */
  remoteTool(tenant: string, toolName: string): { subject: string; queue: string };
  /** Worktree service requests. */
  worktree(operation: WorktreeOperation): string;
  /** Operators' requests to the journal service (`toolgate journal rebuild`). */
  ops(operation: JournalOperation): string;
  /** KV bucket of registered tools. */
  readonly toolsBucket: string;
  /** KV bucket of permission policies (revisioned). */
  readonly policyBucket: string;
  /** Object store of artifacts (patches). */
  readonly artifactsBucket: string;
  /**
   * KV bucket of the MCP edge's consumed `requestState` nonces (gateway only): a parked call's
   * state is accepted once across every gateway replica, and the key's age bounds the bucket.
   */
  readonly mcpStateBucket: string;
  /** Cancellations of running calls, gateway → every tool-executor replica (see `cancel-dispatch.ts`). */
  readonly cancelDispatch: string;
  /**
   * The tools a stdio MCP upstream serves, gateway → tool-executor (signed request/reply, one
   * replica of the queue group answers; see `mcp-upstream.ts`).
   */
  readonly mcpListTools: string;
}

/** Builds every name from `prefix`, validating each token it is given. */
export function createSubjects(prefix: string): Subjects {
  if (typeof prefix !== 'string' || !PREFIX_PATTERN.test(prefix)) {
    throw new ConfigError(
      `subject prefix must be 1-32 characters of [A-Za-z0-9_-], got ${JSON.stringify(prefix)}`,
    );
  }
  const p = prefix;
  const tok = (kind: string, value: string): string => {
    assertSubjectToken(kind, value);
    return value;
  };
  // Operations, roles and approval events come from closed sets; a value outside them (an unchecked
  // cast, a string from the wire) must not become a subject, even when it is token-shaped or, for
  // operations, dot-separated tokens.
  const known = <T extends string>(kind: string, allowed: Record<string, T>, value: T): T => {
    if (!Object.values(allowed).includes(value)) {
      throw new ConfigError(`unknown ${kind} ${JSON.stringify(value)}`, {
        details: { field: kind },
      });
    }
    return value;
  };
  return Object.freeze({
    prefix: p,
    journal: Object.freeze({
      stream: `${p}_journal`,
      all: `${p}.journal.>`,
      event: (tenant: string, runId: string, key: string, type: string) =>
        `${p}.journal.${tok('tenant', tenant)}.${tok('runId', runId)}.${tok('key', key)}.${tok('event type', type)}`,
      forKey: (tenant: string, runId: string, key: string) =>
        `${p}.journal.${tok('tenant', tenant)}.${tok('runId', runId)}.${tok('key', key)}.*`,
      forRun: (tenant: string, runId: string) =>
        `${p}.journal.${tok('tenant', tenant)}.${tok('runId', runId)}.>`,
      ofType: (type: string) => `${p}.journal.*.*.*.${tok('event type', type)}`,
      forTenant: (tenant: string) => `${p}.journal.${tok('tenant', tenant)}.>`,
      matching: (tenant: string, runId: string) =>
        `${p}.journal.${tenant === '*' ? '*' : tok('tenant', tenant)}.${runId === '*' ? '*' : tok('runId', runId)}.>`,
      ofTypeIn: (type: string, tenant: string, runId: string) =>
        `${p}.journal.${tok('tenant', tenant)}.${runId === '*' ? '*' : tok('runId', runId)}.*.${tok('event type', type)}`,
      keyOf: (subject: string) => {
        // <prefix>.journal.<tenant>.<runId>.<key>.<event>: tokens hold no dots.
        const t = subject.split('.');
        return t.length === 6 && t[1] === 'journal' ? `${t[2]}.${t[4]}` : subject;
      },
    }),
    deadLetter: Object.freeze({
      stream: `${p}_deadletter`,
      all: `${p}.deadletter.>`,
      forRole: (role: ConsumerRole) => `${p}.deadletter.${known('role', ConsumerRole, role)}`,
    }),
    consumer: (role: ConsumerRole) => `${p}_${known('role', ConsumerRole, role)}`,
    api: (operation: ApiOperation) => `${p}.api.${known('operation', ApiOperation, operation)}`,
    apiAll: `${p}.api.>`,
    apiOperationOf: (subject: string) => {
      const head = `${p}.api.`;
      if (!subject.startsWith(head)) return undefined;
      const operation = subject.slice(head.length);
      return (Object.values(ApiOperation) as string[]).includes(operation)
        ? (operation as ApiOperation)
        : undefined;
    },
    query: (operation: QueryOperation) =>
      `${p}.query.${known('operation', QueryOperation, operation)}`,
    approvals: (tenant: string, event: ApprovalNotification | '*') =>
      `${p}.approvals.${tok('tenant', tenant)}.${event === '*' ? '*' : known('notification', ApprovalNotification, event)}`,
    hook: (tenant: string, name: string) =>
      `${p}.hooks.${tok('tenant', tenant)}.${tok('hook name', name)}`,
    remoteTool: (tenant: string, toolName: string) => {
      const subject = `${p}.tools.${tok('tenant', tenant)}.${tok('tool name', toolName)}`;
      return { subject, queue: subject };
    },
    worktree: (operation: WorktreeOperation) =>
      `${p}.worktree.${known('operation', WorktreeOperation, operation)}`,
    ops: (operation: JournalOperation) =>
      `${p}.ops.journal.${known('operation', JournalOperation, operation)}`,
    toolsBucket: `${p}_tools`,
    policyBucket: `${p}_policy`,
    artifactsBucket: `${p}_artifacts`,
    mcpStateBucket: `${p}_mcp_state`,
    cancelDispatch: `${p}.executor.cancel`,
    mcpListTools: `${p}.executor.mcp.list`,
  });
}
