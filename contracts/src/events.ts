import { z } from 'zod';
import { ErrorCode } from './errors';
import { SubjectTokenSchema as Token } from './subjects';
import { ExecutorKindSchema, RiskSchema, ToolNameSchema } from './tool-contract';
import { ScriptHostFunctionSchema } from './script-tool';
import { tolerantReader } from './tolerant-reader';
import { TraceIdSchema } from './trace-link';

/**
 * Journal events: the facts every service publishes to and folds from the journal stream.
 * They are past-tense and fat enough that a consumer never has to ask a peer what happened.
 *
 * Delivery: each is published to JetStream with a `Nats-Msg-Id` equal to its `id` (deduplicated
 * within the stream's window); the once-per-dispatch types ({@link ONCE_PER_DISPATCH}) are also
 * published with `expect.lastSubjectSequence = 0`, so the broker refuses a second one for good.
 * Consumers receive them at least once through durable pull consumers and must fold idempotently.
 *
 * Evolution: the schemas below are the *writer's* — strict, so a publisher cannot journal a field
 * nobody declared. Consumers read through {@link parseJournalEvent}: a tolerant reader derived from
 * the same schemas (unknown fields are dropped, see {@link tolerantReader}), after older
 * `schemaVersion`s are upcast by {@link JOURNAL_UPCASTERS}. How to change an event:
 * - add an optional field (or one with a default): just add it. The version stays; consumers
 *   still on the previous release read the new events and ignore the field.
 * - anything else (rename, remove, retype, a new required field, a changed meaning): bump
 *   {@link JOURNAL_SCHEMA_VERSION}, change the schemas, and add the one upcaster from the previous
 *   version to {@link JOURNAL_UPCASTERS}; the recorded journal fixtures must still fold.
 * - a new event type or a new enum value (error code, outcome, executor kind): older readers
 *   refuse what they do not know, so deploy the consumers before the producers.
 * Readers refuse a version newer than their own (dead-lettered, still in the stream): upgrade
 * every consumer before any producer writes a new version.
 */

/** The version every event is written with today. */
export const JOURNAL_SCHEMA_VERSION = 1 as const;

const Sha256 = z.string().regex(/^[0-9a-f]{64}$/, 'must be a lowercase hex sha256');
const IsoDate = z.iso.datetime({ offset: true });

/** The calling agent. */
export const AgentRefSchema = z.strictObject({
  agentType: z.string().min(1).max(128),
  label: z.string().max(256).optional(),
});
export type AgentRef = z.infer<typeof AgentRefSchema>;

/** The environment an agent's tools see. */
export const IsolationSchema = z.union([
  z.literal('none'),
  z.literal('readonly'),
  z.strictObject({ kind: z.literal('worktree'), ref: z.string().min(1).max(256).optional() }),
]);
export type Isolation = z.infer<typeof IsolationSchema>;

/** Data sensitivity levels, ordered public < internal < private. */
export const TaintSchema = z.enum(['public', 'internal', 'private']);
export type Taint = z.infer<typeof TaintSchema>;

export const VerdictSchema = z.enum(['allow', 'deny', 'ask']);
export type Verdict = z.infer<typeof VerdictSchema>;

/** The chain layer that decided. */
export const DecidedBySchema = z.enum(['hook', 'deny-rule', 'ask-rule', 'canUseTool', 'default']);
export type DecidedBy = z.infer<typeof DecidedBySchema>;

export const WireErrorSchema = z.object({
  code: z.enum(Object.values(ErrorCode) as [ErrorCode, ...ErrorCode[]]),
  message: z.string(),
  details: z.record(z.string(), z.unknown()).optional(),
});

/** What a dispatch's events say about its tool: enough to run it without the registry. */
export const ToolRefSchema = z.strictObject({
  name: ToolNameSchema,
  contractHash: Sha256,
  risk: RiskSchema.optional(),
  needsApproval: z.boolean(),
  executor: ExecutorKindSchema,
  timeoutMs: z.number().int().positive().optional(),
  clearance: TaintSchema.optional(),
});
export type ToolRef = z.infer<typeof ToolRefSchema>;

const envelope = {
  /** Unique per event; also its `Nats-Msg-Id`. Deterministic per transition so retries dedupe. */
  id: z.string().min(1).max(256),
  tenant: Token,
  runId: Token,
  /** The dispatch id; for worktree events, the worktree id (the subject key). */
  dispatchId: Token,
  /** When the fact happened (ISO 8601, from the command's metadata, never a rule's clock). */
  at: IsoDate,
  schemaVersion: z.literal(JOURNAL_SCHEMA_VERSION),
  /** The id of the event (or request) that caused this one; null for a root. */
  causationId: z.string().max(256).nullable(),
};

/** Published by the gateway when a call is accepted; consumed by the evaluator and the journal. */
export const RequestedEventSchema = z.strictObject({
  ...envelope,
  type: z.literal('requested'),
  callId: z.string().min(1).max(256),
  tool: ToolRefSchema,
  input: z.unknown(),
  agent: AgentRefSchema,
  isolation: IsolationSchema,
  profile: z.string().max(128).optional(),
  taint: TaintSchema.optional(),
  /** The authenticated identity that submitted the call. */
  submittedBy: z.string().min(1).max(256),
  /** The dispatch this one retries after a `model-retry` error, and how deep that chain is. */
  retryOf: Token.optional(),
  retryDepth: z.number().int().min(0).default(0),
  /**
   * The W3C trace the call was submitted in (the caller's `traceparent`, which the gateway
   * continues); absent when there was none to continue. What a trace UI link names.
   */
  traceId: TraceIdSchema.optional(),
});

/** Published by the evaluator for every verdict; consumed by the executor (allow) and the journal. */
export const DecidedEventSchema = z.strictObject({
  ...envelope,
  type: z.literal('decided'),
  verdict: VerdictSchema,
  decidedBy: DecidedBySchema,
  rule: z.unknown().optional(),
  reason: z.string().max(2048).optional(),
  policyRevision: z.number().int().min(0),
  /** sha256 of the canonical post-hook input the verdict was reached on. */
  inputDigest: Sha256,
  /** The post-hook input: what `execute` receives. */
  input: z.unknown(),
  advisory: z.array(z.unknown()).default([]),
  tool: ToolRefSchema,
  agent: AgentRefSchema,
  isolation: IsolationSchema,
  profile: z.string().max(128).optional(),
});

/** Published by the evaluator on an ask verdict; the dispatch parks until a `resolved`. */
export const SuspendedEventSchema = z.strictObject({
  ...envelope,
  type: z.literal('suspended'),
  /** sha256 of tool name + canonical post-hook input. */
  approvalKey: Sha256,
  inputDigest: Sha256,
  policyRevision: z.number().int().min(0),
  tool: ToolRefSchema,
  input: z.unknown(),
  agent: AgentRefSchema,
  isolation: IsolationSchema,
  profile: z.string().max(128).optional(),
  decidedBy: DecidedBySchema,
  rule: z.unknown().optional(),
  submittedBy: z.string().min(1).max(256),
  expiresAt: IsoDate,
  onTimeout: z.enum(['allow', 'deny']),
  /** When true the submitter may not approve its own call. */
  separationOfDuties: z.boolean().default(false),
});

/** Published by the gateway (human, policy) or the journal's sweeper (timeout); first one wins. */
export const ResolvedEventSchema = z.strictObject({
  ...envelope,
  type: z.literal('resolved'),
  approvalKey: Sha256,
  inputDigest: Sha256,
  policyRevision: z.number().int().min(0),
  decision: z.enum(['allow', 'deny']),
  reason: z.string().max(2048).optional(),
  /** Who resolved it: an identity, or `system:timeout`. */
  by: z.string().min(1).max(256),
  source: z.enum(['human', 'timeout', 'policy']),
});

/** Published by the executor when it begins an attempt (once per attempt, not per dispatch). */
export const StartedEventSchema = z.strictObject({
  ...envelope,
  type: z.literal('started'),
  attempt: z.number().int().min(1),
  toolName: ToolNameSchema,
  executor: ExecutorKindSchema,
  cwd: z.string().optional(),
});

/** The dispatch's outcome; at most one per dispatch, enforced by the broker. */
export const SettledEventSchema = z.strictObject({
  ...envelope,
  type: z.literal('settled'),
  toolName: ToolNameSchema,
  outcome: z.enum(['ok', 'error', 'denied']),
  result: z.unknown().optional(),
  error: WireErrorSchema.optional(),
  durationMs: z.number().min(0),
  attempt: z.number().int().min(0),
  verdict: VerdictSchema.optional(),
  decidedBy: DecidedBySchema.optional(),
  rule: z.unknown().optional(),
});

/** One file a worktree changed relative to its base commit. */
export const FileChangeSchema = z.strictObject({
  path: z.string().min(1),
  status: z.enum(['added', 'modified', 'deleted', 'renamed', 'untracked']),
  from: z.string().optional(),
  binary: z.boolean(),
});
export type FileChange = z.infer<typeof FileChangeSchema>;

/** A patch artifact: where it is stored and what it touches. Never applied by Toolgate. */
export const PatchArtifactSchema = z.strictObject({
  kind: z.literal('patch'),
  ref: z.string().min(1),
  files: z.array(FileChangeSchema),
  baseCommit: z.string().regex(/^[0-9a-f]{40,64}$/),
  bytes: z.number().int().min(0),
  sha256: Sha256,
});
export type PatchArtifact = z.infer<typeof PatchArtifactSchema>;

const worktreeFields = { worktreeId: Token };

/** Published by the worktree service: a tree was created (or re-adopted) for an agent spawn. */
export const WorktreeAcquiredEventSchema = z.strictObject({
  ...envelope,
  ...worktreeFields,
  type: z.literal('worktree-acquired'),
  agentKey: z.string().min(1).max(256),
  repo: z.string().min(1),
  baseRef: z.string().min(1),
  baseCommit: z.string().regex(/^[0-9a-f]{40,64}$/),
  path: z.string().min(1),
  branch: z.string().min(1),
});
export const WorktreeCollectedEventSchema = z.strictObject({
  ...envelope,
  ...worktreeFields,
  type: z.literal('worktree-collected'),
  artifact: PatchArtifactSchema,
});
export const WorktreeRetainedEventSchema = z.strictObject({
  ...envelope,
  ...worktreeFields,
  type: z.literal('worktree-retained'),
  reason: z.string().max(2048),
});
export const WorktreeDroppedEventSchema = z.strictObject({
  ...envelope,
  ...worktreeFields,
  type: z.literal('worktree-dropped'),
  reason: z.enum(['pin-cap', 'stale', 'missing']),
});
export const WorktreeDisposedEventSchema = z.strictObject({
  ...envelope,
  ...worktreeFields,
  type: z.literal('worktree-disposed'),
});
/** An agent whose retained tree was dropped is restarted on a fresh tree, never resumed into it. */
export const WorktreeRestartedEventSchema = z.strictObject({
  ...envelope,
  ...worktreeFields,
  type: z.literal('worktree-restarted'),
  agentKey: z.string().min(1).max(256),
  droppedWorktreeId: Token,
  reason: z.string().max(2048),
});

/** The key (subject token in place of a dispatch id) of a run's own events, such as its error streak. */
export const RUN_KEY = 'run';

/**
 * A run's consecutive-error streak after one change (the error cap). Published by whoever settles a
 * dispatch — the tool-executor, the evaluator for a deny — just before its `settled` (a failure
 * extends the streak, a success ends it), and by the gateway for an explicit reset; read by the
 * evaluator, which refuses the run's next dispatch with `error-cap` while `failures` has reached
 * the policy's cap. One chain per run on the key {@link RUN_KEY}: each is appended with
 * `expect.lastSubjectSequence` = the sequence of the one it follows, so the broker keeps exactly
 * one successor of each state and concurrent settlements in one run never lose a count.
 */
export const ErrorStreakEventSchema = z.strictObject({
  ...envelope,
  type: z.literal('error-streak'),
  /** Calls in a row that ended in an error or a denial (0 after a success or a reset). */
  failures: z.number().int().min(0),
  /** What moved the streak. */
  cause: z.enum(['error', 'denied', 'ok', 'reset']),
  /** The dispatch whose settlement moved it (absent for a reset). */
  settledDispatchId: Token.optional(),
  /** Who reset it (a verified identity; absent otherwise). */
  resetBy: z.string().max(256).optional(),
  /** The dispatches applied most recently (at most 32): a settlement redone after a crash counts once. */
  recent: z.array(Token).max(32),
});

/** The run id under which script installs are journaled (`<prefix>.journal.<tenant>._scripts.<tool>.script-installed`). */
export const SCRIPTS_RUN_ID = '_scripts';

/**
 * Published by the gateway when an admin installs or replaces a script tool
 * (`tools.scripts.install`), after the registry holds it; consumed by the journal (audit log).
 * Subject key: run {@link SCRIPTS_RUN_ID}, key = the tool's name, so one tool's history is one
 * subject. `dispatchId` carries the tool name; `replaced` is the contract hash it replaced.
 */
export const ScriptInstalledEventSchema = z.strictObject({
  ...envelope,
  type: z.literal('script-installed'),
  toolName: ToolNameSchema,
  contractHash: Sha256,
  /** sha256 of the source and sidecar (the contract's version is `script:<sha256>`). */
  sha256: Sha256,
  requires: z.array(ScriptHostFunctionSchema),
  risk: RiskSchema,
  replaced: Sha256.optional(),
  /** The authenticated identity that installed it. */
  installedBy: z.string().min(1).max(256),
});

export const JournalEventSchema = z.discriminatedUnion('type', [
  RequestedEventSchema,
  DecidedEventSchema,
  SuspendedEventSchema,
  ResolvedEventSchema,
  StartedEventSchema,
  SettledEventSchema,
  WorktreeAcquiredEventSchema,
  WorktreeCollectedEventSchema,
  WorktreeRetainedEventSchema,
  WorktreeDroppedEventSchema,
  WorktreeDisposedEventSchema,
  WorktreeRestartedEventSchema,
  ErrorStreakEventSchema,
  ScriptInstalledEventSchema,
]);

export type JournalEvent = z.infer<typeof JournalEventSchema>;
export type JournalEventType = JournalEvent['type'];
export type JournalEventOf<T extends JournalEventType> = Extract<JournalEvent, { type: T }>;
export type RequestedEvent = JournalEventOf<'requested'>;
export type DecidedEvent = JournalEventOf<'decided'>;
export type SuspendedEvent = JournalEventOf<'suspended'>;
export type ResolvedEvent = JournalEventOf<'resolved'>;
export type StartedEvent = JournalEventOf<'started'>;
export type SettledEvent = JournalEventOf<'settled'>;
export type ErrorStreakEvent = JournalEventOf<'error-streak'>;
export type ScriptInstalledEvent = JournalEventOf<'script-installed'>;
export type WorktreeEvent = JournalEventOf<
  | 'worktree-acquired'
  | 'worktree-collected'
  | 'worktree-retained'
  | 'worktree-dropped'
  | 'worktree-disposed'
  | 'worktree-restarted'
>;

/** Every event type name (the last subject token). */
export const JOURNAL_EVENT_TYPES = JournalEventSchema.options.map(
  (o) => o.shape.type.value,
) as readonly JournalEventType[];

/** Transitions the broker lets happen once per dispatch (`expect.lastSubjectSequence = 0`). */
export const ONCE_PER_DISPATCH: ReadonlySet<JournalEventType> = new Set<JournalEventType>([
  'requested',
  'decided',
  'suspended',
  'resolved',
  'settled',
]);

/**
 * The writer and the reader ({@link parseJournalEvent}) as zod's ahead-of-time compiled parsers
 * (`z.compile`): one generated function instead of a walk of the schema tree per parse. Every event
 * is parsed by the writer once when published and by the reader in every service that reads it,
 * several times per dispatch, and the tree walk was most of what either cost. A value the compiled
 * parser does not accept is parsed again by the schema itself, so what is refused, and with which
 * issues, is what the schema refuses; that what it accepts is the value the schema returns is
 * checked by `events-compiled.spec.ts` over generated events. Each is compiled on first use:
 * generating one takes tens of milliseconds, which a process that never writes or reads an event
 * (most CLI commands) should not pay at start-up. The exported schemas stay uncompiled: they are
 * the definitions, to derive from.
 */
const compiled: { writer?: typeof JournalEventSchema; reader?: z.ZodType<JournalEvent> } = {};

/** An event as a publisher builds it: the envelope's constants are filled in by {@link journalEvent}. */
export type NewJournalEvent<T extends JournalEventType = JournalEventType> =
  T extends JournalEventType
    ? Omit<z.input<(typeof JournalEventSchema)['options'][number]> & { type: T }, 'schemaVersion'>
    : never;

/**
 * Validates and completes an event before it is published (the strict writer schema: an unknown
 * field is a bug of the publisher's, refused here). Throws on a malformed event.
 */
export function journalEvent<T extends JournalEventType>(
  event: NewJournalEvent<T>,
): JournalEventOf<T> {
  return (compiled.writer ??= z.compile(JournalEventSchema)).parse({
    ...event,
    schemaVersion: JOURNAL_SCHEMA_VERSION,
  }) as JournalEventOf<T>;
}

/** An event as JSON, before it is validated. */
export type RawJournalEvent = Readonly<Record<string, unknown>>;

/** Turns an event of version `n` (raw JSON) into one of version `n + 1`, `schemaVersion` included. */
export type JournalUpcaster = (event: RawJournalEvent) => Record<string, unknown>;

/**
 * The upcaster chain: `JOURNAL_UPCASTERS[n]` turns a version-`n` event into a version-`n + 1` one,
 * so an event of any older version is read as today's by applying them in turn. It is the only
 * place old versions are known; consumers and folds only ever see today's shape.
 *
 * To write version 2: set {@link JOURNAL_SCHEMA_VERSION} to 2, change the schemas, and add
 * `1: (event) => ({ ...event, schemaVersion: 2, ...what changed })` here (switch on `event.type`
 * when only some types changed). `events.spec.ts` checks the chain has no gap, and the recorded
 * journals in `services/journal/test/fixtures/recorded/` must still fold to their snapshots.
 */
export const JOURNAL_UPCASTERS: Readonly<Record<number, JournalUpcaster>> = {};

/**
 * `value` upcast from its `schemaVersion` to `current` through `upcasters`; null when it is not an
 * object with an integer version in `1..current` (not an event, or one from a newer release).
 * Exported for the chain's own tests; consumers use {@link parseJournalEvent}.
 */
export function upcastJournalEvent(
  value: unknown,
  upcasters: Readonly<Record<number, JournalUpcaster>> = JOURNAL_UPCASTERS,
  current: number = JOURNAL_SCHEMA_VERSION,
): RawJournalEvent | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  let event = value as RawJournalEvent;
  const version = event.schemaVersion;
  if (typeof version !== 'number' || !Number.isInteger(version)) return null;
  if (version < 1 || version > current) return null;
  for (let from = version; from < current; from++) {
    const upcast = upcasters[from];
    if (!upcast) return null;
    event = upcast(event);
    if (event.schemaVersion !== from + 1) return null;
  }
  return event;
}

/**
 * Reads an event from the stream as today's shape: upcasts an older `schemaVersion`, ignores
 * fields it does not know (a newer publisher's additions), validates everything it does know.
 * Returns null (never throws) when it is not an event this release can read.
 */
export function parseJournalEvent(value: unknown): JournalEvent | null {
  const upcast = upcastJournalEvent(value);
  if (!upcast) return null;
  // Today's event schemas, tolerant of fields they do not know.
  const reader = (compiled.reader ??= z.compile(tolerantReader(JournalEventSchema)));
  const parsed = reader.safeParse(upcast);
  return parsed.success ? parsed.data : null;
}

const utf8 = new TextDecoder();

/** The journal event a message body carries; null (never throws) when it is not JSON or not an event. */
export function decodeJournalEvent(data: Uint8Array): JournalEvent | null {
  try {
    return parseJournalEvent(JSON.parse(utf8.decode(data)));
  } catch {
    return null;
  }
}

/*
 * Worktree service requests (request/reply on `subjects.worktree(op)`). Sent by the tool-executor
 * for `{ kind: 'worktree' }` dispatches, answered by the worktree service; core NATS, so a caller
 * that gets no reply retries — every operation is idempotent (acquire per agent key, collect per
 * content, dispose per tree). Replies are `{ ok: true, ... }` or `{ ok: false, error: WireError }`.
 */

const CausationId = z.string().max(256).nullable().optional();

/** Acquire the worktree of an agent spawn (the same one again if it exists). */
export const WorktreeAcquireRequestSchema = z.strictObject({
  tenant: Token,
  runId: Token,
  /** The agent spawn's key: one tree per key within a tenant's run. */
  agentKey: z.string().min(1).max(256),
  /** Absolute path inside the host repository's working tree; the service's configured repository when absent. */
  repo: z.string().min(1).max(4096).optional(),
  /** Commit-ish to branch from; HEAD when absent. */
  ref: z.string().min(1).max(256).optional(),
  causationId: CausationId,
});
export type WorktreeAcquireRequest = z.input<typeof WorktreeAcquireRequestSchema>;

/** Collect a tree's changes against its base commit as a stored patch artifact. */
export const WorktreeCollectRequestSchema = z.strictObject({
  worktreeId: Token,
  causationId: CausationId,
});
export type WorktreeCollectRequest = z.input<typeof WorktreeCollectRequestSchema>;

/** Dispose of a tree; a failed agent's tree is retained when `keepOnError` says so. */
export const WorktreeDisposeRequestSchema = z.strictObject({
  worktreeId: Token,
  outcome: z.enum(['ok', 'error']),
  keepOnError: z.boolean().optional(),
  reason: z.string().max(2048).optional(),
  causationId: CausationId,
});
export type WorktreeDisposeRequest = z.input<typeof WorktreeDisposeRequestSchema>;

/** A worktree as the service reports it. `path` is where the executor pins `ctx.cwd`. */
export const WorktreeViewSchema = z.object({
  worktreeId: Token,
  tenant: Token,
  runId: Token,
  agentKey: z.string(),
  generation: z.number().int().min(0),
  repo: z.string(),
  baseRef: z.string(),
  baseCommit: z.string(),
  path: z.string(),
  branch: z.string(),
  state: z.enum(['creating', 'active', 'retained', 'disposing', 'disposed', 'dropped']),
  createdAt: z.string(),
  updatedAt: z.string(),
  retainedAt: z.string().optional(),
  droppedReason: z.enum(['pin-cap', 'stale', 'missing']).optional(),
  lastArtifact: PatchArtifactSchema.optional(),
});
export type WorktreeView = z.infer<typeof WorktreeViewSchema>;

const WorktreeErrorReplySchema = z.strictObject({ ok: z.literal(false), error: WireErrorSchema });

/** A successful acquire. `restarted` is set when the spawn's previous tree was dropped: the agent must start over. */
export const WorktreeAcquiredReplySchema = z.strictObject({
  ok: z.literal(true),
  /** The tree's path (`worktree.path`), where the executor pins `ctx.cwd`. */
  path: z.string(),
  worktree: WorktreeViewSchema,
  created: z.boolean(),
  restarted: z.strictObject({ droppedWorktreeId: Token, reason: z.string() }).optional(),
});

export const WorktreeAcquireReplySchema = z.union([
  WorktreeAcquiredReplySchema,
  WorktreeErrorReplySchema,
]);
export type WorktreeAcquireReply = z.infer<typeof WorktreeAcquireReplySchema>;

/** A successful collect: the stored patch artifact. */
export const WorktreeCollectedReplySchema = z.strictObject({
  ok: z.literal(true),
  artifact: PatchArtifactSchema,
});

export const WorktreeCollectReplySchema = z.union([
  WorktreeCollectedReplySchema,
  WorktreeErrorReplySchema,
]);
export type WorktreeCollectReply = z.infer<typeof WorktreeCollectReplySchema>;

/** A successful dispose: the tree as it is left (disposed, or retained on error). */
export const WorktreeDisposedReplySchema = z.strictObject({
  ok: z.literal(true),
  worktree: WorktreeViewSchema,
});

export const WorktreeDisposeReplySchema = z.union([
  WorktreeDisposedReplySchema,
  WorktreeErrorReplySchema,
]);
export type WorktreeDisposeReply = z.infer<typeof WorktreeDisposeReplySchema>;
