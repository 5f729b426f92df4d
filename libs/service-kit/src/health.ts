import { Controller, Get, HttpCode, HttpStatus, Inject, Injectable, Res } from '@nestjs/common';

/** A named readiness probe; `check` resolves true when the dependency is usable. */
export interface ReadinessCheck {
  name: string;
  check(): Promise<boolean> | boolean;
}

/**
 * How long one check may take before it counts as failed: a dependency that hangs (a stopped
 * broker, a database behind a dead route) must turn /readyz to 503 within a second, not hold it.
 */
const READINESS_CHECK_TIMEOUT_MS = 800;

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
    await Promise.all(
      this.checks.map(async (c) => {
        results[c.name] = await withTimeout(c, READINESS_CHECK_TIMEOUT_MS);
      }),
    );
    if (this.draining) results.draining = false;
    return { ready: Object.values(results).every(Boolean), checks: results };
  }
}

/** A check's answer, false when it throws or does not answer within `timeoutMs`. */
async function withTimeout(c: ReadinessCheck, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      Promise.resolve()
        .then(() => c.check())
        .then(Boolean, () => false),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs))),
    ]);
  } finally {
    clearTimeout(timer);
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

  /**
   * 200 or 503 with the report either way. The status is set here, not thrown: a thrown
   * HttpException would meet the service's exception filter (the gateway's maps it to a 500
   * `internal`), and a probe's 503 must stay a 503 with its checks.
   */
  @Get('readyz')
  async readyz(
    @Res({ passthrough: true }) res: { status(code: number): unknown },
  ): Promise<{ ready: boolean; checks: Record<string, boolean> }> {
    const report = await this.readiness.report();
    res.status(report.ready ? HttpStatus.OK : HttpStatus.SERVICE_UNAVAILABLE);
    return report;
  }
}
