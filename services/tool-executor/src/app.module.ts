import { Logger, Module, type DynamicModule } from '@nestjs/common';
import type { NatsConnection } from '@nats-io/transport-node';
import type { ExecutorKind, Subjects } from '@toolgate/contracts';
import { ErrorStreaks, JournalPublisher, serviceKeysOf } from '@toolgate/bus';
import { BusModule, Metrics } from '@toolgate/service-kit';
import type { ToolDef } from '@toolgate/tools';
import type { ExecutorConfig } from './config';
import type { CallExecutor } from './execution/call-executor';
import { ExecutorMetrics } from './execution/executor-metrics';
import { ExecutionController } from './execution/execution.controller';
import type { InputCheck } from './execution/input-check';
import { PolicyRevisions } from './execution/policy-history';
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
          inject: [JournalPublisher, Metrics],
          useFactory: (publisher: JournalPublisher, registry: Metrics) => {
            const logger = new Logger('ToolRunner');
            const metrics = new ExecutorMetrics(registry);
            const streaks = new ErrorStreaks(publisher, () => new Date());
            return new ToolRunner({
              nc,
              subjects,
              publisher,
              builtins: new Map(builtins.map((b) => [b.contract.name, b])),
              executors,
              resolveCwd: worktreeCwdResolver(
                nc,
                subjects,
                config.cwd,
                config.worktreeTimeoutMs,
                serviceKeysOf(nc),
                config.worktreeRoot,
              ),
              defaultTimeoutMs: config.defaultTimeoutMs,
              inprocessSlots: config.inprocessConcurrency,
              heartbeatMs: Math.max(100, Math.floor(config.ackWaitMs / 3)),
              // A holder settles within one ack wait of its deadline, or is presumed gone.
              claimGraceMs: config.ackWaitMs,
              policyRevisions: new PolicyRevisions(nc, subjects),
              now: () => new Date(),
              log: (level, message, data) => {
                const line = data ? `${message} ${JSON.stringify(data)}` : message;
                if (level === 'error') logger.error(line);
                else if (level === 'warn') logger.warn(line);
                else logger.log(line);
              },
              onClaim: (outcome) => metrics.recordClaim(outcome),
              onRefused: (reason) => metrics.recordRefusal(reason),
              onRan: (call, outcome, seconds) =>
                metrics.recordRun(call.tool.executor, call.tool.name, outcome, seconds),
              ...(inputCheck ? { checkInput: (call) => inputCheck.check(call) } : {}),
              // The streak is best effort here: after a tool's side effect nothing may hold up
              // its settlement (a failed streak write is logged; the run's count misses one).
              onSettling: (call, outcome) =>
                streaks
                  .record(call.tenant, call.runId, call.dispatchId, outcome)
                  .catch((err: unknown) =>
                    logger.warn(
                      `error streak of run ${call.runId} not recorded: ${(err as Error).message}`,
                    ),
                  ),
            });
          },
        },
      ],
    };
  }
}
