import { connect, type ConnectionOptions, type NatsConnection } from '@nats-io/transport-node';
import { z } from 'zod';
import {
  MAX_JOURNAL_PARTITIONS,
  signingSettingsFromEnv,
  type SigningSettings,
} from '@toolgate/contracts';
import { coalesceWrites } from './nats-write-coalescing';

/**
 * The NATS part of every service's environment, spread into each service's config schema so the
 * variables are parsed once, with their defaults defined only here.
 */
export const NatsEnvShape = {
  NATS_URL: z.string().default('nats://127.0.0.1:4222'),
  /** Credentials of this service's NATS user (deploy/nats gives each service its own). */
  NATS_USER: z.string().optional(),
  NATS_PASSWORD: z.string().optional(),
  /** Replicas of the journal and dead-letter streams when a service creates them (3 in production). */
  TOOLGATE_STREAM_REPLICAS: z.coerce.number().int().min(1).max(5).default(1),
  /**
   * Streams the journal is partitioned into by tenant (1: one stream, as always). Every service
   * and client of one deployment must be told the same number (docs/configuration.md).
   */
  TOOLGATE_JOURNAL_PARTITIONS: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_JOURNAL_PARTITIONS)
    .default(1),
  /** This service's X25519 private key (base64 PKCS#8 DER, `toolgate keys generate`). */
  TOOLGATE_SIGNING_KEY: z.string().optional(),
  /** JSON object: identity → base64 public key, for every identity. */
  TOOLGATE_SIGNING_PUBLIC_KEYS: z.string().optional(),
  /** A JSON keys file instead of (or under) the two above: `{ privateKey | privateKeys, publicKeys }`. */
  TOOLGATE_SIGNING_KEYS_FILE: z.string().optional(),
  /** Refuse to start without configured keys (set in the deploy manifests; implied by NODE_ENV=production). */
  TOOLGATE_REQUIRE_SIGNING_KEYS: z.enum(['true', 'false']).optional(),
  /** What this service signs journal events with: `v1` only while a release before v2 still runs. */
  TOOLGATE_EVENT_SIGNATURES: z.enum(['v1', 'v2']).optional(),
  NODE_ENV: z.string().optional(),
  /** Where the development keyring lives when no keys are configured (see `devKeyringPath`). */
  XDG_STATE_HOME: z.string().optional(),
};

/** How a service reaches NATS. The password never appears in logs or errors. */
export interface NatsSettings {
  readonly natsUrl: string;
  readonly natsUser?: string;
  readonly natsPassword?: string;
  readonly streamReplicas: number;
  /** Partitions of the journal (`createSubjects`' `journalPartitions`); unset: 1, unpartitioned. */
  readonly journalPartitions?: number;
  /** How the service finds its signing keys (`resolveServiceKeys`). Never logged. */
  readonly signing?: SigningSettings;
}

/** Picks the NATS settings out of a parsed environment. */
export function natsSettings(e: {
  NATS_URL: string;
  NATS_USER?: string | undefined;
  NATS_PASSWORD?: string | undefined;
  TOOLGATE_STREAM_REPLICAS: number;
  TOOLGATE_JOURNAL_PARTITIONS?: number;
  TOOLGATE_SIGNING_KEY?: string | undefined;
  TOOLGATE_SIGNING_PUBLIC_KEYS?: string | undefined;
  TOOLGATE_SIGNING_KEYS_FILE?: string | undefined;
  TOOLGATE_REQUIRE_SIGNING_KEYS?: 'true' | 'false' | undefined;
  TOOLGATE_EVENT_SIGNATURES?: 'v1' | 'v2' | undefined;
  NODE_ENV?: string | undefined;
  XDG_STATE_HOME?: string | undefined;
}): NatsSettings {
  // `signingSettingsFromEnv` reads its own variables, by these names, out of the rest.
  const { TOOLGATE_STREAM_REPLICAS, TOOLGATE_JOURNAL_PARTITIONS, ...env } = e;
  return {
    natsUrl: e.NATS_URL,
    ...(e.NATS_USER ? { natsUser: e.NATS_USER } : {}),
    ...(e.NATS_PASSWORD ? { natsPassword: e.NATS_PASSWORD } : {}),
    streamReplicas: TOOLGATE_STREAM_REPLICAS,
    // Only when partitioned: a configuration without the setting reads as it always has.
    ...(TOOLGATE_JOURNAL_PARTITIONS && TOOLGATE_JOURNAL_PARTITIONS > 1
      ? { journalPartitions: TOOLGATE_JOURNAL_PARTITIONS }
      : {}),
    signing: signingSettingsFromEnv(env),
  };
}

/**
 * Connects with the service's settings; reconnects forever (the broker may roll). Its writes are
 * coalesced per turn of the event loop (`coalesceWrites`).
 */
export async function connectNats(
  settings: NatsSettings,
  name: string,
  extra: Partial<ConnectionOptions> = {},
): Promise<NatsConnection> {
  const nc = await connect({
    servers: settings.natsUrl.split(',').map((s) => s.trim()),
    name,
    maxReconnectAttempts: -1,
    // nats.js otherwise captures a stack trace for every request (every JetStream publish is one):
    // ~3% of the dispatch path's CPU. Failed requests still carry their error, without the caller's stack.
    noAsyncTraces: true,
    ...(settings.natsUser ? { user: settings.natsUser } : {}),
    ...(settings.natsPassword ? { pass: settings.natsPassword } : {}),
    ...extra,
  });
  coalesceWrites(nc);
  return nc;
}

/** An optional comma-separated environment variable as a list (blank entries dropped). */
export const commaList = z
  .string()
  .optional()
  .transform((v) =>
    v
      ? v
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean)
      : undefined,
  );
