import { Controller, Inject } from '@nestjs/common';
import { EventPattern, Payload } from '@nestjs/microservices';
import type { RequestedEvent } from '@toolgate/contracts';
import { Evaluator } from './evaluator';

@Controller()
export class EvaluationController {
  constructor(@Inject(Evaluator) private readonly evaluator: Evaluator) {}

  @EventPattern('requested')
  onRequested(@Payload() event: RequestedEvent): Promise<void> {
    return this.evaluator.onRequested(event);
  }
}
