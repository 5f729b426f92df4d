import { Module, type DynamicModule } from '@nestjs/common';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Subjects } from '@toolgate/contracts';
import { BusModule, Metrics } from '@toolgate/service-kit';
import type { Kysely } from 'kysely';
import type { Database } from './db/database';
import { JOURNAL_DB } from './service/journal-db.provider';
import { JournalMetrics } from './service/journal-metrics';
import { ProjectionController } from './service/projection.controller';

@Module({})
export class JournalModule {
  static forRoot(nc: NatsConnection, subjects: Subjects, db: Kysely<Database>): DynamicModule {
    return {
      module: JournalModule,
      imports: [BusModule.forRoot(nc, subjects)],
      controllers: [ProjectionController],
      providers: [
        { provide: JOURNAL_DB, useValue: { db } },
        {
          provide: JournalMetrics,
          inject: [Metrics],
          useFactory: (metrics: Metrics) => new JournalMetrics(metrics),
        },
      ],
    };
  }
}
