import { z } from 'zod';
import { WireErrorSchema } from './events';
import { ProgressSchema } from './policy-whatif';

/**
 * Operators' requests to the journal service (`JournalOperation` in subjects.ts), on
 * `subjects.ops(op)` (`<prefix>.ops.journal.<op>`), answered by one journal replica (queue group). Sent by `toolgate journal …` with the NATS
 * credentials of an operator; a deployment gives only operators publish rights on
 * `<prefix>.ops.>`. A rebuild acts on nothing the request says but a schema name: the stream is
 * verified as the live fold verifies it, and the live projection is replaced only by one equal to it
 * row by row, so a forged request costs work, never correctness.
 *
 * The answer is several messages to the request's reply subject: {@link JournalOpsFrame} progress
 * lines, then exactly one report or error.
 */
/** A PostgreSQL schema name the journal may create, fill and swap (a plain identifier). */
export const SchemaNameSchema = z
  .string()
  .regex(
    /^[A-Za-z_][A-Za-z0-9_]{0,62}$/,
    'must be a plain SQL identifier ([A-Za-z_][A-Za-z0-9_]*)',
  );

export const JournalRebuildRequestSchema = z.strictObject({
  /**
   * The schema to rebuild into (default: the live schema's name + `_rebuild`). It must not exist,
   * or hold a journal projection (an earlier rebuild's or a replaced one), which is dropped first.
   * After a switch it holds the projection that was replaced.
   */
  into: SchemaNameSchema.optional(),
  /**
   * Switch even when the rebuilt projection differs from the live one (after a fold was fixed, a
   * rebuild is meant to differ); the differences are reported all the same.
   */
  force: z.boolean().default(false),
});
export type JournalRebuildRequest = z.input<typeof JournalRebuildRequestSchema>;

/** Rows one projection has and the other has not, per table (full rows compared). */
export const ProjectionDifferenceCountSchema = z.object({
  table: z.string(),
  onlyInLive: z.number().int().min(0),
  onlyInRebuilt: z.number().int().min(0),
});

export const JournalRebuildReportSchema = z.object({
  /** The schema that serves the projection (its name does not change). */
  live: z.string(),
  /** The schema rebuilt into; after a switch, it holds the replaced projection. */
  into: z.string(),
  /** Events folded into the rebuilt projection, and the last stream sequence among them. */
  events: z.number().int().min(0),
  lastSeq: z.number().int().min(0),
  /**
   * A partitioned journal's streams, each with the last sequence folded from it (`lastSeq` is the
   * largest of them; absent when the journal is one stream).
   */
  partitions: z
    .array(z.object({ stream: z.string(), lastSeq: z.number().int().min(0) }))
    .optional(),
  /** Stream messages that were not events this release can read (never folded, as live). */
  skipped: z.number().int().min(0),
  /** Whether the rebuilt projection now serves: only when it equalled the live one. */
  switched: z.boolean(),
  /** Empty when equal; otherwise why it did not switch. */
  differences: z.array(ProjectionDifferenceCountSchema),
  /** Why it did not switch, in words (absent after a switch). */
  reason: z.string().optional(),
});
export type JournalRebuildReport = z.infer<typeof JournalRebuildReportSchema>;

/** One message of a journal operation's answer. */
export const JournalOpsFrameSchema = z.union([
  z.object({ progress: ProgressSchema.extend({ phase: z.string() }) }),
  z.object({ report: JournalRebuildReportSchema }),
  z.object({ error: WireErrorSchema }),
]);
export type JournalOpsFrame = z.infer<typeof JournalOpsFrameSchema>;
