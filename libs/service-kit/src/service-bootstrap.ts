import 'reflect-metadata';
import { Logger, type INestApplication, type LoggerService } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NatsConnection } from '@nats-io/transport-node';
import { connectNats, type NatsSettings } from './nats-settings';
import {
  ConfigError,
  createSubjects,
  isServiceIdentity,
  resolveServiceKeys,
  type ConsumerRole,
  type ServiceIdentity,
  type ServiceKeys,
  type Subjects,
} from '@toolgate/contracts';
import {
  bindServiceKeys,
  type InFlightMessage,
  type JournalStreamOptions,
  type PoisonReport,
} from '@toolgate/bus';
import { JetStreamServer, type JetStreamHandlerOptions } from './jetstream-server';
import { Readiness } from './health';
import { journalReadinessCheck } from './journal-readiness';
import { natsReadinessCheck } from './nats-readiness';
import { closableHttp } from './http-close';
import { startClean } from './opened-resources';
import { startupStep } from './startup-failure';
import type { MetricsSettings } from './metric-labels';
import { metricsFor } from './metrics';

export interface ServiceBootstrapOptions {
  /** Service name: the NATS connection name and the log context. */
  name: string;
  /** The signing identity (default: `name`, which must then be one). */
  identity?: ServiceIdentity;
  /**
   * The identity's keys when the service resolved them already, for work before the bootstrap
   * (default: resolved from `nats.signing`). Keys of another identity are a config error.
   */
  keys?: ServiceKeys;
  nats: NatsSettings;
  /** Which user-valued labels the service's metrics carry (default: tenant and tool, capped). */
  metrics?: MetricsSettings;
  prefix: string;
  /** HTTP port for health (and the gateway's API); 0 picks a free one. */
  port: number;
  host?: string;
  /** Builds the root module once the connection exists. */
  module(nc: NatsConnection, subjects: Subjects): unknown;
  /** The JetStream transport, when the service consumes journal events. */
  transport?: {
    role: ConsumerRole;
    handlers?: Record<string, JetStreamHandlerOptions>;
    onPoison?(app: INestApplication, report: PoisonReport): Promise<void>;
  };
  streams?: JournalStreamOptions;
  logger?: LoggerService | false;
  /**
   * Whether `/readyz` checks that the journal and dead-letter streams (and the service's consumers)
   * exist on the broker (`journal-streams`): for every service that appends to the journal or
   * pulls from it. Default: when it has a `transport`.
   */
  usesJournal?: boolean;
  /**
   * Streams besides the journal's that the service reads its state from (its KV buckets'
   * `KV_<bucket>`, an object store's `OBJ_<bucket>`): with `usesJournal`, `/readyz` checks they
   * exist too. None of them is recreated empty while the service runs (an empty policy or tool
   * bucket would change what is allowed).
   */
  requiredStreams?: (subjects: Subjects) => readonly string[];
  /** Adjusts the application before it listens (filters, body limits). */
  configure?(app: INestApplication): void;
  /**
   * The service's other NATS connections (its KV mirrors' own): each is counted in /metrics and
   * checked by /readyz under its name, so a replica whose policy or registry connection is still
   * reconnecting is not sent writes it would time out on.
   */
  sideConnections?: readonly SideConnection[];
}

/** A NATS connection a service opened besides its own, named for its /readyz check. */
export interface SideConnection {
  name: string;
  nc: NatsConnection;
}

export interface RunningService {
  name: string;
  app: INestApplication;
  nc: NatsConnection;
  subjects: Subjects;
  /** The service's signing keys (also bound to `nc`: `serviceKeysOf`). */
  keys: ServiceKeys;
  /** The HTTP address the service listens on. */
  url: string;
  /** Graceful shutdown: fail readiness, stop pulling, finish in-flight work, close HTTP, drain NATS. */
  stop(): Promise<void>;
  /** The journal messages its handlers are working on now (what a stop waits for). */
  inFlight(): InFlightMessage[];
  /** Stops the work still running and hands it back, when a stop hits its cap (see `Drainable`). */
  abandon?(): Promise<void>;
}

/**
 * Starts one service: NATS connection, Nest application with health endpoints, the JetStream
 * transport for its handlers, and HTTP. The same function runs a service in its own process and
 * all five in one.
 */
export async function bootstrapService(options: ServiceBootstrapOptions): Promise<RunningService> {
  const identity = options.identity ?? options.name;
  if (!isServiceIdentity(identity))
    throw new ConfigError(`${identity} is not a signing identity`, { details: { identity } });
  // Before connecting: a service without its keys fails with a config error, not at its first event.
  const keys = options.keys ?? resolveServiceKeys(identity, options.nats.signing);
  if (keys.identity !== identity)
    throw new ConfigError(`the keys given to ${identity} are ${keys.identity}'s`, {
      details: { identity, keys: keys.identity },
    });
  return startClean(async (opened) => {
    const subjects = createSubjects(options.prefix, {
      journalPartitions: options.nats.journalPartitions,
    });
    const nc = opened.add(
      await startupStep(`connecting to NATS at ${natsServersForLog(options.nats)}`, () =>
        connectNats(options.nats, `toolgate-${options.name}`),
      ),
      (c) => c.close(),
    );
    // First, so the registry every part of the service records into has the service's settings.
    metricsFor(nc, options.metrics);
    bindServiceKeys(nc, keys);
    const streams = options.streams ?? { replicas: options.nats.streamReplicas };
    const app = opened.add(
      await startupStep('creating the application', () =>
        NestFactory.create(options.module(nc, subjects) as never, {
          // Nest's route-mapping chatter is noise in production logs; warnings and errors are kept.
          logger: options.logger ?? ['error', 'warn'],
          abortOnError: false,
        }),
      ),
      (a) => a.close(),
    );
    // Made before it listens, so that every request it serves is seen (see `closableHttp`).
    // A start-up that fails after listening closes it first too (newest first).
    const http = opened.add(closableHttp(app.getHttpServer()), (h) => h.close());
    options.configure?.(app);
    for (const side of options.sideConnections ?? []) {
      metricsFor(nc).trackConnection(side.nc);
      app.get(Readiness).add(natsReadinessCheck(side.nc, side.name));
    }
    let server: JetStreamServer | undefined;
    if (options.transport) {
      const transport = options.transport;
      app.connectMicroservice(
        {
          strategy: (server = new JetStreamServer({
            nc,
            subjects,
            role: transport.role,
            keys,
            streams,
            ...(transport.handlers ? { handlers: transport.handlers } : {}),
            ...(transport.onPoison
              ? { onPoison: (report) => transport.onPoison!(app, report) }
              : {}),
          })),
        },
        { inheritAppConfig: true },
      );
      await startupStep('ensuring the journal streams and consumers', () =>
        app.startAllMicroservices(),
      );
    }
    if (options.usesJournal ?? options.transport !== undefined) {
      const logger = new Logger(options.name);
      app.get(Readiness).add(
        journalReadinessCheck(
          nc,
          subjects,
          () => server?.consumers() ?? [],
          (line) => logger.error(line),
          options.requiredStreams?.(subjects) ?? [],
        ),
      );
    }
    await startupStep(`listening on HTTP port ${options.port}`, () =>
      app.listen(options.port, options.host ?? '0.0.0.0'),
    );
    const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    return {
      name: options.name,
      app,
      nc,
      subjects,
      keys,
      url,
      inFlight: () => server?.inFlight() ?? [],
      stop: stopOnce(async () => {
        app.get(Readiness).drain();
        // Nest's close() shuts HTTP before connected microservices, so stop pulling and finish
        // in-flight handlers first: /readyz keeps answering 503 (not connection refused) meanwhile.
        await server?.close();
        // Before Nest's close, which would wait for every kept-alive connection to go quiet.
        await http.close();
        await app.close();
        if (!nc.isClosed()) await nc.drain();
      }),
    };
  });
}

/** The configured NATS servers without any credentials embedded in their URLs, for log lines. */
export function natsServersForLog(nats: NatsSettings): string {
  return nats.natsUrl
    .split(',')
    .map((s) => s.trim().replace(/\/\/[^@/]*@/, '//'))
    .join(',');
}

/** Wraps a stop function so calling it again (a restart after a failed stop, a test's afterAll) is harmless. */
export function stopOnce(stop: () => Promise<void>): () => Promise<void> {
  let stopping: Promise<void> | undefined;
  return () => (stopping ??= stop());
}
