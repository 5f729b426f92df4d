import {
  Controller,
  Get,
  HttpCode,
  HttpException,
  HttpStatus,
  Inject,
  Injectable,
} from '@nestjs/common';

/** A named readiness probe; `check` resolves true when the dependency is usable. */
export interface ReadinessCheck {
  name: string;
  check(): Promise<boolean> | boolean;
}

/** Collects readiness checks; a service registers its own at start-up. */
@Injectable()
export class Readiness {
  private readonly checks: ReadinessCheck[] = [];
  private draining = false;

  add(check: ReadinessCheck): void {
    this.checks.push(check);
  }

  /** Marks the service as going away: /readyz fails so traffic moves elsewhere. */
  drain(): void {
    this.draining = true;
  }

  async report(): Promise<{ ready: boolean; checks: Record<string, boolean> }> {
    const results: Record<string, boolean> = {};
    for (const c of this.checks) {
      try {
        results[c.name] = Boolean(await c.check());
      } catch {
        results[c.name] = false;
      }
    }
    if (this.draining) results.draining = false;
    return { ready: Object.values(results).every(Boolean), checks: results };
  }
}

/** `/healthz`: the process is alive. `/readyz`: every dependency answers and we are not draining. */
@Controller()
export class HealthController {
  constructor(@Inject(Readiness) private readonly readiness: Readiness) {}

  @Get('healthz')
  @HttpCode(200)
  healthz(): { status: 'ok' } {
    return { status: 'ok' };
  }

  @Get('readyz')
  async readyz(): Promise<{ ready: boolean; checks: Record<string, boolean> }> {
    const report = await this.readiness.report();
    if (!report.ready) throw new HttpException(report, HttpStatus.SERVICE_UNAVAILABLE);
    return report;
  }
}
