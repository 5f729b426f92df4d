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
  AwaitDispatch: 'dispatch.await',
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

/**
 * One stream of the journal. Unpartitioned (the default) there is one, `<prefix>_journal` on
 * `<prefix>.journal.>`; with `n` partitions partition `i` is `<prefix>_journal_<i>` on
 * `<prefix>.journal.<i>.>`, each with its own leader on a cluster and its own consumers.
 */
export interface JournalPartition {
  readonly index: number;
  readonly stream: string;
  /** Every subject of this partition (the stream's filter, a `'*'` consumer's filter). */
  readonly all: string;
  /** One event type across this partition's tenants and runs (a consumer's filter). */
  ofType(type: string): string;
}

/** A journal subject's tokens: `tenant`, `runId`, `key` (dispatch or worktree id), `type`. */
export interface JournalSubjectParts {
  tenant: string;
  runId: string;
  key: string;
  type: string;
}

export interface JournalSubjects {
  /**
   * The journal's one stream. A partitioned journal has no one stream: reading this throws a
   * `ConfigError`, so code that does not name the tenant's partition fails loudly instead of
   * reading another partition's events.
   */
  readonly stream: string;
  /** How many partitions (streams) the journal has: 1 unless `TOOLGATE_JOURNAL_PARTITIONS` says. */
  readonly partitionCount: number;
  /** Every partition, in index order (one, the unpartitioned journal, by default). */
  readonly partitions: readonly JournalPartition[];
  /** The partition a tenant's events live in ({@link journalPartitionOf}). */
  partitionOf(tenant: string): JournalPartition;
  /** The stream that holds a journal subject: its tenant's partition's. */
  streamOf(subject: string): string;
  /** Every journal subject, of every partition. */
  readonly all: string;
  /** The subject of one event. */
  event(tenant: string, runId: string, key: string, type: string): string;
  /** All events of one dispatch (or worktree). */
  forKey(tenant: string, runId: string, key: string): string;
  /** All events of one run. */
  forRun(tenant: string, runId: string): string;
  /** One event type across every tenant and run (of every partition). */
  ofType(type: string): string;
  /** Every tenant's events. */
  forTenant(tenant: string): string;
  /** One event type of one tenant: of one run, or of every run (`'*'`). */
  ofTypeIn(type: string, tenant: string, runId: string | '*'): string;
  /**
   * Every event of a tenant's run; `'*'` for any tenant or any run (`toolgate journal tail`; with
   * partitions, any tenant's filter spans every partition's subjects).
   */
  matching(tenant: string | '*', runId: string | '*'): string;
  /**
   * The dispatch (or worktree) a journal subject names, as `<tenant>.<key>`: the unit whose
   * events must be folded in stream order. The subject as given when it is not a journal one.
   */
  keyOf(subject: string): string;
  /** The tokens of a journal subject (of either shape), or undefined when it is not one. */
  parse(subject: string): JournalSubjectParts | undefined;
}

/** Most partitions a journal may have (`TOOLGATE_JOURNAL_PARTITIONS`). */
export const MAX_JOURNAL_PARTITIONS = 64;

/**
 * The partition of a tenant among `count`: FNV-1a (32-bit) of the tenant's bytes, modulo `count`.
 * It is the hash nats-server's subject mapping `{{partition(count,<tenant wildcard>)}}` computes, so
 * an account-level mapping would place every tenant where this does (a spec holds the two equal).
 * Stable: changing `count` moves tenants, so it is chosen once per journal (docs/configuration.md).
 */
export function journalPartitionOf(tenant: string, count: number): number {
  assertSubjectToken('tenant', tenant);
  // Tenants are ASCII (SUBJECT_TOKEN_PATTERN): one byte per UTF-16 unit.
  let hash = 0x811c9dc5;
  for (let i = 0; i < tenant.length; i++) {
    hash ^= tenant.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % count;
}

export interface SubjectsOptions {
  /** Partitions of the journal (default 1: one stream, the subjects as they always were). */
  journalPartitions?: number;
}

export interface Subjects {
  readonly prefix: string;
  /** Stream(s) and subjects of the journal. */
  readonly journal: JournalSubjects;
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
export function createSubjects(prefix: string, options: SubjectsOptions = {}): Subjects {
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
    journal: journalSubjects(p, partitionCount(options.journalPartitions)),
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

function partitionCount(value: number | undefined): number {
  const count = value ?? 1;
  if (!Number.isInteger(count) || count < 1 || count > MAX_JOURNAL_PARTITIONS) {
    throw new ConfigError(
      `journal partitions must be an integer from 1 to ${MAX_JOURNAL_PARTITIONS}, got ${JSON.stringify(value)}`,
      { details: { field: 'journalPartitions' } },
    );
  }
  return count;
}

/**
 * The tokens of a journal subject, of either shape — 6 tokens unpartitioned, 7 partitioned (the
 * partition after `journal`) — or undefined when it is not one.
 */
export function parseJournalSubject(subject: string): JournalSubjectParts | undefined {
  // <prefix>.journal[.<partition>].<tenant>.<runId>.<key>.<event>: tokens hold no dots.
  const t = subject.split('.');
  if (t[1] !== 'journal' || (t.length !== 6 && t.length !== 7)) return undefined;
  const [tenant, runId, key, type] = t.slice(t.length - 4) as [string, string, string, string];
  return { tenant, runId, key, type };
}

/**
 * The journal's names. One partition: `<p>_journal` on `<p>.journal.<tenant>.<run>.<key>.<type>`,
 * unchanged on the wire. `n` partitions: a partition token after `journal`, chosen by the tenant,
 * so every builder that names a tenant names its partition's subjects.
 */
function journalSubjects(p: string, count: number): JournalSubjects {
  const tok = (kind: string, value: string): string => {
    assertSubjectToken(kind, value);
    return value;
  };
  const partitioned = count > 1;
  const partitions: JournalPartition[] = Array.from({ length: count }, (_, index) => {
    const root = partitioned ? `${p}.journal.${index}` : `${p}.journal`;
    return Object.freeze({
      index,
      stream: partitioned ? `${p}_journal_${index}` : `${p}_journal`,
      all: `${root}.>`,
      ofType: (type: string) => `${root}.*.*.*.${tok('event type', type)}`,
    });
  });
  const partitionOf = (tenant: string) => partitions[journalPartitionOf(tenant, count)]!;
  // The subject root of a tenant's events: `<p>.journal[.<partition>].<tenant>`.
  const tenantRoot = (tenant: string) =>
    partitioned
      ? `${p}.journal.${partitionOf(tenant).index}.${tok('tenant', tenant)}`
      : `${p}.journal.${tok('tenant', tenant)}`;
  const anyTenant = partitioned ? `${p}.journal.*.*` : `${p}.journal.*`;
  return Object.freeze({
    get stream(): string {
      if (partitioned) {
        throw new ConfigError(
          `the journal has ${count} partitions: name the tenant's stream (journal.partitionOf(tenant).stream)`,
        );
      }
      return partitions[0]!.stream;
    },
    partitionCount: count,
    partitions: Object.freeze(partitions),
    partitionOf,
    streamOf: (subject: string) => {
      if (!partitioned) return partitions[0]!.stream;
      const parts = parseJournalSubject(subject);
      if (!parts) {
        throw new ConfigError(`not a journal subject: ${JSON.stringify(subject)}`, {
          details: { field: 'subject' },
        });
      }
      return partitionOf(parts.tenant).stream;
    },
    all: `${p}.journal.>`,
    event: (tenant: string, runId: string, key: string, type: string) =>
      `${tenantRoot(tenant)}.${tok('runId', runId)}.${tok('key', key)}.${tok('event type', type)}`,
    forKey: (tenant: string, runId: string, key: string) =>
      `${tenantRoot(tenant)}.${tok('runId', runId)}.${tok('key', key)}.*`,
    forRun: (tenant: string, runId: string) => `${tenantRoot(tenant)}.${tok('runId', runId)}.>`,
    ofType: (type: string) => `${anyTenant}.*.*.${tok('event type', type)}`,
    forTenant: (tenant: string) => `${tenantRoot(tenant)}.>`,
    matching: (tenant: string, runId: string) =>
      `${tenant === '*' ? anyTenant : tenantRoot(tenant)}.${runId === '*' ? '*' : tok('runId', runId)}.>`,
    ofTypeIn: (type: string, tenant: string, runId: string) =>
      `${tenantRoot(tenant)}.${runId === '*' ? '*' : tok('runId', runId)}.*.${tok('event type', type)}`,
    keyOf: (subject: string) => {
      const parts = parseJournalSubject(subject);
      return parts ? `${parts.tenant}.${parts.key}` : subject;
    },
    parse: parseJournalSubject,
  });
}
