import { z } from 'zod';
import {
  assertStateOutsideToolScope,
  signingStatePaths,
  NatsEnvShape,
  natsSettings,
  type NatsSettings,
} from '@toolgate/service-kit';

const Env = z.object({
  ...NatsEnvShape,
  TOOLGATE_PREFIX: z.string().default('toolgate'),
  EVALUATOR_PORT: z.coerce.number().int().min(0).max(65535).default(8081),
  /**
   * The interface its health and metrics port listens on (every one by default, for the kubelet's
   * probes and Prometheus; the all-in-one binds it where the gateway binds, `GATEWAY_HOST`).
   */
  EVALUATOR_HOST: z.string().min(1).default('0.0.0.0'),
  /** Evaluations in flight per replica: each mostly waits for its decision's ack from the broker. */
  EVALUATOR_CONCURRENCY: z.coerce.number().int().min(1).max(4096).default(256),
  EVALUATOR_MAX_DELIVER: z.coerce.number().int().min(1).default(5),
  /**
   * How long a delivery may go unheard-from before the broker hands it to another replica: what a
   * crashed replica held comes back within it. Short, because a live replica renews it with
   * in-progress heartbeats (within every third of it, once held for two ninths) for as long as
   * it handles a message.
   */
  EVALUATOR_ACK_WAIT_MS: z.coerce.number().int().min(1000).default(5_000),
  /**
   * Deliveries in flight across ALL replicas of the consumer (the broker's limit, one per
   * consumer): size it replicas × concurrency, or replicas cannot add throughput past it.
   */
  EVALUATOR_MAX_ACK_PENDING: z.coerce.number().int().min(1).default(1000),
});

export type EvaluatorConfig = NatsSettings &
  Readonly<{
    prefix: string;
    port: number;
    /** Where its health and metrics port listens. */
    host: string;
    concurrency: number;
    maxDeliver: number;
    ackWaitMs: number;
    maxAckPending: number;
  }>;

/** Parses the environment once; defaults live only here. */
export function loadEvaluatorConfig(env: NodeJS.ProcessEnv): EvaluatorConfig {
  const e = Env.parse(env);
  assertStateOutsideToolScope(env, signingStatePaths(env));
  return Object.freeze({
    ...natsSettings(e),
    prefix: e.TOOLGATE_PREFIX,
    port: e.EVALUATOR_PORT,
    host: e.EVALUATOR_HOST,
    concurrency: e.EVALUATOR_CONCURRENCY,
    maxDeliver: e.EVALUATOR_MAX_DELIVER,
    ackWaitMs: e.EVALUATOR_ACK_WAIT_MS,
    maxAckPending: e.EVALUATOR_MAX_ACK_PENDING,
  });
}
