import { z } from 'zod';
import { AgentRefSchema, DecidedBySchema, VerdictSchema, WireErrorSchema } from './events';
import { SubjectTokenSchema as Token } from './subjects';
import { ToolNameSchema } from './tool-contract';
import { PolicyDocumentWireSchema } from './policy-document-wire';

/**
 * Policy what-if: the journal's recorded calls replayed through a candidate policy.
 *
 * `POST /v1/policy/whatif` and the `policy.whatif` NATS operation (admin scope) take a
 * {@link PolicyWhatIfRequest} and answer a {@link PolicyWhatIfReport}. Over HTTP, a client that
 * sends `Accept: application/x-ndjson` gets the answer as {@link PolicyWhatIfFrame} lines instead:
 * progress while the journal streams, then the report (or an error). Read only: nothing is
 * journaled, no hook is called, no tool runs.
 */

/** The media type of a what-if answer streamed with its progress. */
export const NDJSON_MEDIA_TYPE = 'application/x-ndjson';

/** How many changed calls a report lists when the request does not say. */
export const DEFAULT_WHATIF_CHANGE_LIMIT = 1000;

export const PolicyWhatIfRequestSchema = z.strictObject({
  /**
   * The candidate policy document, in the stored form `PUT /v1/policy` takes (rules, profiles,
   * `remote` hooks, approvals). Validated as a put would; never stored.
   */
  candidate: PolicyDocumentWireSchema,
  /** Only calls recorded at or after this instant (the stream's own timestamps). */
  since: z.iso.datetime({ offset: true }).optional(),
  /** Only this run's calls. */
  runId: Token.optional(),
  /** How many changed calls to list in full (the counts always cover every call). */
  limit: z.number().int().min(0).max(10_000).default(DEFAULT_WHATIF_CHANGE_LIMIT),
});
export type PolicyWhatIfRequest = z.input<typeof PolicyWhatIfRequestSchema>;

/** One side of a changed call: the verdict and what decided it. */
export const WhatIfVerdictSchema = z.object({
  verdict: VerdictSchema,
  decidedBy: DecidedBySchema,
  rule: z.unknown().optional(),
  reason: z.string().optional(),
});
export type WhatIfVerdict = z.infer<typeof WhatIfVerdictSchema>;

/**
 * How a replay dealt with remote hooks and canUseTool, which it never calls: `reused` — a hook's
 * (or canUseTool's) verdict recorded with the call was given again; `unknown` — the candidate
 * consults a hook whose answer the journal does not record (a hook the recorded decision never
 * reached, or one the recorded policy did not have): it was taken to pass, so the call's new
 * verdict depends on that hook.
 */
export const WhatIfHookUseSchema = z.enum(['reused', 'unknown']);
export type WhatIfHookUse = z.infer<typeof WhatIfHookUseSchema>;

/**
 * How the candidate's consecutive-error cap bears on a call, its runs' streaks replayed in stream
 * order: `refused` — the streak reaches the cap, the candidate refuses the call (`error-cap`);
 * `possible` — it may: calls before it whose outcome the journal cannot tell (they did not run, or
 * a person would now decide them) could have failed, so its verdict is not certain; `lifted` —
 * refused by the cap when recorded, decided by the candidate's chain now.
 */
export const WhatIfErrorCapMarkSchema = z.enum(['refused', 'possible', 'lifted']);
export type WhatIfErrorCapMark = z.infer<typeof WhatIfErrorCapMarkSchema>;

/** A call the candidate's error cap bears on (listed whether or not its verdict changes). */
export const WhatIfErrorCapCallSchema = z.object({
  seq: z.number().int().min(1),
  dispatchId: Token,
  runId: Token,
  callId: z.string(),
  mark: WhatIfErrorCapMarkSchema,
  /** The verdict the candidate gives it (`deny` when refused). */
  verdict: VerdictSchema,
});
export type WhatIfErrorCapCall = z.infer<typeof WhatIfErrorCapCallSchema>;

/** A recorded call whose verdict the candidate changes. */
export const WhatIfChangeSchema = z.object({
  /** The stream sequence of the recorded `decided`. */
  seq: z.number().int().min(1),
  dispatchId: Token,
  runId: Token,
  callId: z.string(),
  tool: ToolNameSchema,
  agent: AgentRefSchema,
  profile: z.string().optional(),
  /** When the call was decided. */
  at: z.string(),
  before: WhatIfVerdictSchema.extend({ policyRevision: z.number().int().min(0) }),
  after: WhatIfVerdictSchema,
  hooks: WhatIfHookUseSchema.optional(),
  /** How the candidate's error cap bears on it (see `WhatIfErrorCapMarkSchema`). */
  errorCap: WhatIfErrorCapMarkSchema.optional(),
});
export type WhatIfChange = z.infer<typeof WhatIfChangeSchema>;

export const PolicyWhatIfReportSchema = z.object({
  /** What was read: the stream sequences and the request's filters. */
  window: z.object({
    firstSeq: z.number().int().min(0),
    lastSeq: z.number().int().min(0),
    since: z.string().optional(),
    runId: z.string().optional(),
  }),
  /** Recorded calls replayed (a `requested` with its `decided`). */
  calls: z.number().int().min(0),
  changed: z.number().int().min(0),
  unchanged: z.number().int().min(0),
  /** Recorded calls not replayed, and why. */
  skipped: z.object({
    /** Requested but not decided in the window (still in flight, or decided later). */
    undecided: z.number().int().min(0),
    /** Refused by the run's consecutive-error cap before the chain ran. */
    errorCap: z.number().int().min(0),
  }),
  /** Remote hooks are never called: how often a recorded answer was reused or guessed. */
  hooks: z.object({
    reused: z.number().int().min(0),
    unknown: z.number().int().min(0),
    note: z.string(),
  }),
  byTool: z.array(
    z.object({ tool: z.string(), calls: z.number().int(), changed: z.number().int() }),
  ),
  byChange: z.array(
    z.object({ from: VerdictSchema, to: VerdictSchema, count: z.number().int().min(1) }),
  ),
  /**
   * The candidate's error cap replayed: its cap (null: none), how many calls it refuses, may
   * refuse, or no longer refuses, and those calls in stream order (at most the request's `limit`,
   * and at most {@link WHATIF_CAP_CALLS_BUDGET_BYTES} of them).
   */
  errorCap: z
    .object({
      cap: z.number().int().min(1).nullable(),
      refused: z.number().int().min(0),
      possible: z.number().int().min(0),
      lifted: z.number().int().min(0),
      calls: z.array(WhatIfErrorCapCallSchema),
    })
    .optional(),
  /**
   * The changed calls in stream order, at most the request's `limit`, and at most
   * {@link WHATIF_CHANGES_BUDGET_BYTES} of them (each call's ids and agent are the submitter's).
   */
  changes: z.array(WhatIfChangeSchema),
  /** Whether more calls changed than `changes` lists. */
  truncated: z.boolean(),
});
export type PolicyWhatIfReport = z.infer<typeof PolicyWhatIfReportSchema>;

/**
 * The JSON bytes a report's `changes` take at most (the calls that fit, in stream order), and its
 * error cap's `calls`: the reply stays within the broker's `max_payload` whatever the `limit` and
 * whatever the calls' submitters wrote into their ids and agents.
 */
export const WHATIF_CHANGES_BUDGET_BYTES = 256 * 1024;
export const WHATIF_CAP_CALLS_BUDGET_BYTES = 128 * 1024;

/** How far a long operation has come: `done` of `total` units (messages read, rows folded). */
export const ProgressSchema = z.object({
  done: z.number().int().min(0),
  total: z.number().int().min(0),
});
export type Progress = z.infer<typeof ProgressSchema>;

/** One line of a streamed what-if answer: progress, then exactly one report or error. */
export const PolicyWhatIfFrameSchema = z.union([
  z.object({ progress: ProgressSchema }),
  z.object({ report: PolicyWhatIfReportSchema }),
  z.object({ error: WireErrorSchema }),
]);
export type PolicyWhatIfFrame = z.infer<typeof PolicyWhatIfFrameSchema>;
