import { Controller, Inject } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import type { DecidedEvent, ResolvedEvent } from '@toolgate/contracts';
import type { JetStreamEventContext } from '@toolgate/service-kit';
import { ToolRunner } from './tool-runner';

/** Journal events the executor acts on: allow decisions and approval resolutions. */
@Controller()
export class ExecutionController {
  constructor(@Inject(ToolRunner) private readonly runner: ToolRunner) {}

  @EventPattern('decided')
  onDecided(@Payload() event: DecidedEvent, @Ctx() delivery: JetStreamEventContext): Promise<void> {
    return this.runner.onDecided(event, delivery);
  }

  @EventPattern('resolved')
  onResolved(
    @Payload() event: ResolvedEvent,
    @Ctx() delivery: JetStreamEventContext,
  ): Promise<void> {
    return this.runner.onResolved(event, delivery);
  }
}
