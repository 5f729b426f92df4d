import { setupTelemetry } from '@toolgate/telemetry';
import { describeFailure } from './startup-failure';
import { startWithRetry } from './startup-retry';

/**
 * A service process's main: telemetry, start — retried with backoff while NATS or the database do
 * not answer, a permanent failure (bad configuration) exiting at once — and a graceful stop on
 * SIGTERM/SIGINT (fail readiness, stop pulling, finish in-flight work, drain). A signal during
 * start-up ends it; a second signal exits at once.
 */
export async function runUntilSignalled(
  name: string,
  start: () => Promise<{ stop(): Promise<void> }>,
): Promise<void> {
  const telemetry = setupTelemetry({ serviceName: `toolgate-${name}` });
  const starting = new AbortController();
  let service: { stop(): Promise<void> } | undefined;
  let stopping = false;
  let received = '';
  const stop = async (signal: string) => {
    console.log(`${name}: ${signal} received, shutting down`);
    await service?.stop();
    await telemetry.shutdown();
    process.exit(0);
  };
  const onSignal = (signal: string) => {
    if (stopping) process.exit(1);
    stopping = true;
    received = signal;
    // Still starting: stop retrying; an attempt in progress is stopped once it is up.
    if (!service) starting.abort();
    else void stop(signal);
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  try {
    service = await startWithRetry(start, { name, signal: starting.signal });
  } catch (err) {
    if (starting.signal.aborted) {
      console.log(`${name}: stopped while starting`);
      process.exit(0);
    }
    console.error(`${name}: failed to start, not retrying: ${describeFailure(err)}`);
    process.exit(1);
  }
  if (stopping) await stop(received);
}
