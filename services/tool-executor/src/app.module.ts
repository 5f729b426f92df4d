import { Module, type DynamicModule } from '@nestjs/common';
import type { NatsConnection } from '@nats-io/transport-node';
import { JournalPublisher } from '@toolgate/bus';
import { BusModule } from '@toolgate/service-kit';
import type { ExecutorKind, Subjects } from '@toolgate/contracts';
import type { ToolDef } from '@toolgate/tools';
import type { ExecutorConfig } from './config';
import type { CallExecutor } from './execution/call-executor';
import { ExecutionController } from './execution/execution.controller';
import type { InputCheck } from './execution/input-check';
import { ToolRunner } from './execution/tool-runner';
import { worktreeCwdResolver } from './execution/worktree-cwd';

@Module({})
export class ToolExecutorModule {
  static forRoot(
    nc: NatsConnection,
    subjects: Subjects,
    config: ExecutorConfig,
    builtins: ToolDef[],
    executors: Partial<Record<ExecutorKind, CallExecutor>>,
    inputCheck?: InputCheck,
  ): DynamicModule {
    return {
      module: ToolExecutorModule,
      imports: [BusModule.forRoot(nc, subjects)],
      controllers: [ExecutionController],
      providers: [
        {
          provide: ToolRunner,
          inject: [JournalPublisher],
          useFactory: (publisher: JournalPublisher) =>
            new ToolRunner({
              nc,
              subjects,
              publisher,
              builtins: new Map(builtins.map((b) => [b.contract.name, b])),
              executors,
              resolveCwd: worktreeCwdResolver(nc, subjects, config.cwd, config.worktreeTimeoutMs),
              defaultTimeoutMs: config.defaultTimeoutMs,
              inprocessSlots: config.inprocessConcurrency,
              heartbeatMs: Math.max(500, Math.floor(config.ackWaitMs / 3)),
              now: () => new Date(),
              ...(inputCheck ? { checkInput: (call) => inputCheck.check(call) } : {}),
            }),
        },
      ],
    };
  }
}
