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
  /** Evaluations in flight per replica: each mostly waits for its decision's ack from the broker. */
  EVALUATOR_CONCURRENCY: z.coerce.number().int().min(1).max(4096).default(256),
  EVALUATOR_MAX_DELIVER: z.coerce.number().int().min(1).default(5),
  /** How long an evaluation may go unacked before another replica gets it: a crash's recovery time. */
  EVALUATOR_ACK_WAIT_MS: z.coerce.number().int().min(1000).default(30_000),
});

export type EvaluatorConfig = NatsSettings &
  Readonly<{
    prefix: string;
    port: number;
    concurrency: number;
    maxDeliver: number;
    ackWaitMs: number;
  }>;

/** Parses the environment once; defaults live only here. */
export function loadEvaluatorConfig(env: NodeJS.ProcessEnv): EvaluatorConfig {
  const e = Env.parse(env);
  assertStateOutsideToolScope(env, signingStatePaths(env));
  return Object.freeze({
    ...natsSettings(e),
    prefix: e.TOOLGATE_PREFIX,
    port: e.EVALUATOR_PORT,
    concurrency: e.EVALUATOR_CONCURRENCY,
    maxDeliver: e.EVALUATOR_MAX_DELIVER,
    ackWaitMs: e.EVALUATOR_ACK_WAIT_MS,
  });
}
