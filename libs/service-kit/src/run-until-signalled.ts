import { setupTelemetry } from '@toolgate/telemetry';

/**
 * A service process's main: telemetry, start, and a graceful stop on SIGTERM/SIGINT (fail readiness,
 * stop pulling, finish in-flight work, drain). A second signal exits at once.
 */
export async function runUntilSignalled(
  name: string,
  start: () => Promise<{ stop(): Promise<void> }>,
): Promise<void> {
  const telemetry = setupTelemetry({ serviceName: `toolgate-${name}` });
  let service: { stop(): Promise<void> };
  try {
    service = await start();
  } catch (err) {
    console.error(`${name}: failed to start: ${(err as Error)?.message ?? err}`);
    process.exit(1);
  }
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) process.exit(1);
    stopping = true;
    console.log(`${name}: ${signal} received, shutting down`);
    await service.stop();
    await telemetry.shutdown();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}
