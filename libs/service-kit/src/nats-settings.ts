import { connect, type ConnectionOptions, type NatsConnection } from '@nats-io/transport-node';
import { z } from 'zod';

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
};

/** How a service reaches NATS. The password never appears in logs or errors. */
export interface NatsSettings {
  readonly natsUrl: string;
  readonly natsUser?: string;
  readonly natsPassword?: string;
  readonly streamReplicas: number;
}

/** Picks the NATS settings out of a parsed environment. */
export function natsSettings(e: {
  NATS_URL: string;
  NATS_USER?: string | undefined;
  NATS_PASSWORD?: string | undefined;
  TOOLGATE_STREAM_REPLICAS: number;
}): NatsSettings {
  return {
    natsUrl: e.NATS_URL,
    ...(e.NATS_USER ? { natsUser: e.NATS_USER } : {}),
    ...(e.NATS_PASSWORD ? { natsPassword: e.NATS_PASSWORD } : {}),
    streamReplicas: e.TOOLGATE_STREAM_REPLICAS,
  };
}

/** Connects with the service's settings; reconnects forever (the broker may roll). */
export function connectNats(
  settings: NatsSettings,
  name: string,
  extra: Partial<ConnectionOptions> = {},
): Promise<NatsConnection> {
  return connect({
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
