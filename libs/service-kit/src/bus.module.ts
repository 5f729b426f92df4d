import { Global, Module, type DynamicModule } from '@nestjs/common';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Subjects } from '@toolgate/contracts';
import { JournalPublisher, serviceKeysOf } from '@toolgate/bus';
import { HealthController, Readiness } from './health';
import { Metrics, MetricsController, metricsFor } from './metrics';
import { natsReadinessCheck } from './nats-readiness';

/** Injection tokens for what every service shares. */
export const NATS_CONNECTION = Symbol('NATS_CONNECTION');
export const SUBJECTS = Symbol('SUBJECTS');

/**
 * Provides the service's NATS connection, its subjects, the journal publisher, health and metrics
 * (`/metrics`; the registry is the one the service's JetStream transport records into).
 * The connection is opened by the service's bootstrap (it must exist before the transport starts)
 * and drained by it on shutdown.
 */
@Global()
@Module({})
export class BusModule {
  static forRoot(nc: NatsConnection, subjects: Subjects): DynamicModule {
    return {
      module: BusModule,
      controllers: [HealthController, MetricsController],
      providers: [
        { provide: NATS_CONNECTION, useValue: nc },
        { provide: SUBJECTS, useValue: subjects },
        { provide: Metrics, useValue: metricsFor(nc) },
        {
          provide: JournalPublisher,
          // Signs with the keys the service's bootstrap bound to its connection; direct gets that
          // find something unsigned read it as nothing recorded, counted in /metrics.
          useFactory: (metrics: Metrics) =>
            new JournalPublisher(nc, subjects, serviceKeysOf(nc), {
              onUntrusted: metrics.untrustedCounter('read'),
            }),
          inject: [Metrics],
        },
        {
          provide: Readiness,
          useFactory: () => {
            const readiness = new Readiness();
            readiness.add(natsReadinessCheck(nc));
            return readiness;
          },
        },
      ],
      exports: [NATS_CONNECTION, SUBJECTS, JournalPublisher, Readiness, Metrics],
    };
  }
}
