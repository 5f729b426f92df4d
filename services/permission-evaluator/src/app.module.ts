import { Module, type DynamicModule } from '@nestjs/common';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Subjects } from '@toolgate/contracts';
import { ErrorStreaks, JournalPublisher } from '@toolgate/bus';
import type { PolicyRuntime } from '@toolgate/policy-runtime';
import { BusModule } from '@toolgate/service-kit';
import { EvaluationController } from './evaluation/evaluation.controller';
import { Evaluator } from './evaluation/evaluator';

@Module({})
export class PermissionEvaluatorModule {
  static forRoot(nc: NatsConnection, subjects: Subjects, runtime: PolicyRuntime): DynamicModule {
    return {
      module: PermissionEvaluatorModule,
      imports: [BusModule.forRoot(nc, subjects)],
      controllers: [EvaluationController],
      providers: [
        {
          provide: Evaluator,
          inject: [JournalPublisher],
          useFactory: (publisher: JournalPublisher) => {
            const now = () => new Date();
            return new Evaluator(
              nc,
              subjects,
              publisher,
              runtime,
              now,
              new ErrorStreaks(publisher, now),
            );
          },
        },
      ],
    };
  }
}
