import { z } from 'zod';
import path from 'node:path';
import {
  assertStateOutsideToolScope,
  defaultStateDir,
  signingStatePaths,
  MetricsEnvShape,
  metricsSettings,
  NatsEnvShape,
  natsSettings,
  type MetricsSettings,
  type NatsSettings,
} from '@toolgate/service-kit';

const Env = z.object({
  ...NatsEnvShape,
  ...MetricsEnvShape,
  TOOLGATE_PREFIX: z.string().default('toolgate'),
  JOURNAL_PORT: z.coerce.number().int().min(0).max(65535).default(8083),
  /**
   * The interface its health and metrics port listens on (every one by default, for the kubelet's
   * probes and Prometheus; the all-in-one binds it where the gateway binds, `GATEWAY_HOST`).
   */
  JOURNAL_HOST: z.string().min(1).default('0.0.0.0'),
  /** PostgreSQL; when unset an embedded PGlite database on disk is used. */
  DATABASE_URL: z.string().optional(),
  JOURNAL_SCHEMA: z.string().optional(),
  /**
   * The embedded database's directory. Default `journal-pglite` in the state directory
   * (`$XDG_STATE_HOME/toolgate`, or `~/.local/state/toolgate`): never inside a tool's scope, where
   * a tenant's shell could read every tenant's calls out of its files.
   */
  JOURNAL_PGLITE_PATH: z.string().min(1).optional(),
  /** How often the approval timeout sweeper looks for expired approvals. */
  JOURNAL_SWEEP_INTERVAL_MS: z.coerce.number().int().min(50).default(1000),
  JOURNAL_MAX_DELIVER: z.coerce.number().int().min(1).default(10),
  /**
   * How long a delivery may go unheard-from before the broker hands it to another replica: what a
   * crashed replica held comes back within it. Short, because a live replica renews it with
   * in-progress heartbeats (within every third of it, once held for two ninths) for as long as
   * it handles a message.
   */
  JOURNAL_ACK_WAIT_MS: z.coerce.number().int().min(1000).default(5_000),
  /**
   * Deliveries in flight across all journal replicas (default: enough for a batch per lane
   * folding and one pulled ahead for each, at least 1000).
   */
  JOURNAL_MAX_ACK_PENDING: z.coerce.number().int().min(1).optional(),
  /**
   * The journal stream's retention by age (the journal service keeps the stream's settings). Above
   * the longest approval window (30 days: an open approval's `suspended` is read from the stream)
   * by default; never below the 2-minute duplicate window. What the stream drops, the projection
   * keeps (docs/deploy.md, "Growth").
   */
  JOURNAL_STREAM_MAX_AGE_MS: z.coerce
    .number()
    .int()
    .min(120_000)
    .default(35 * 86_400_000),
  /** The journal stream's retention by size, per replica (-1: by age only); the oldest go first. */
  JOURNAL_STREAM_MAX_BYTES: z.coerce.number().int().min(-1).default(-1),
  /**
   * How long the projection lets an event wait, from when the broker stored it, for others to
   * fold in the same transaction: the projection's staleness under light load, traded for far
   * fewer transactions (a backlog's events never wait).
   */
  JOURNAL_BATCH_LINGER_MS: z.coerce.number().int().min(0).max(1000).default(100),
  /** Most events folded in one transaction. */
  JOURNAL_BATCH_SIZE: z.coerce.number().int().min(1).max(2000).default(500),
  /**
   * Transactions folding at once: events are split by dispatch (or worktree) into lanes, each lane
   * in stream order, so a dispatch's events are still folded in order. 1 with PGlite, which runs
   * one transaction at a time.
   */
  JOURNAL_LANES: z.coerce.number().int().min(1).max(16).optional(),
});

/** Lanes against PostgreSQL by default: enough to overlap one transaction's commit with the next's work. */
const DEFAULT_POSTGRES_LANES = 3;

/** Lanes when none are configured: side by side on PostgreSQL, one on the embedded database. */
function lanesDefault(e: { DATABASE_URL?: string | undefined }): number {
  return e.DATABASE_URL ? DEFAULT_POSTGRES_LANES : 1;
}

export type JournalConfig = NatsSettings &
  Readonly<{
    prefix: string;
    port: number;
    /** Where its health and metrics port listens. */
    host: string;
    databaseUrl?: string;
    schema?: string;
    pglitePath: string;
    sweepIntervalMs: number;
    maxDeliver: number;
    ackWaitMs: number;
    maxAckPending: number;
    streamMaxAgeMs: number;
    streamMaxBytes: number;
    batchLingerMs: number;
    metrics: MetricsSettings;
    batchSize: number;
    lanes: number;
  }>;

/** Parses the environment once; defaults live only here. */
export function loadJournalConfig(env: NodeJS.ProcessEnv): JournalConfig {
  const e = Env.parse(env);
  const pglitePath = e.JOURNAL_PGLITE_PATH ?? path.join(defaultStateDir(env), 'journal-pglite');
  assertStateOutsideToolScope(env, [
    ...signingStatePaths(env),
    ...(e.DATABASE_URL ? [] : [{ setting: 'JOURNAL_PGLITE_PATH', path: pglitePath }]),
  ]);
  return Object.freeze({
    ...natsSettings(e),
    metrics: metricsSettings(e),
    prefix: e.TOOLGATE_PREFIX,
    port: e.JOURNAL_PORT,
    host: e.JOURNAL_HOST,
    ...(e.DATABASE_URL ? { databaseUrl: e.DATABASE_URL } : {}),
    ...(e.JOURNAL_SCHEMA ? { schema: e.JOURNAL_SCHEMA } : {}),
    pglitePath,
    sweepIntervalMs: e.JOURNAL_SWEEP_INTERVAL_MS,
    maxDeliver: e.JOURNAL_MAX_DELIVER,
    ackWaitMs: e.JOURNAL_ACK_WAIT_MS,
    streamMaxAgeMs: e.JOURNAL_STREAM_MAX_AGE_MS,
    streamMaxBytes: e.JOURNAL_STREAM_MAX_BYTES,
    maxAckPending:
      e.JOURNAL_MAX_ACK_PENDING ??
      Math.max(1000, e.JOURNAL_BATCH_SIZE * (e.JOURNAL_LANES ?? lanesDefault(e)) * 2),
    batchLingerMs: e.JOURNAL_BATCH_LINGER_MS,
    batchSize: e.JOURNAL_BATCH_SIZE,
    lanes: e.JOURNAL_LANES ?? lanesDefault(e),
  });
}
