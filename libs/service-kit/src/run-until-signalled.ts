import { setupTelemetry } from '@toolgate/telemetry';
import { drainWithin, loadDrainSettings, type Drainable } from './drain';
import { describeFailure } from './startup-failure';
import { startWithRetry } from './startup-retry';

/**
 * A service process's main: telemetry, start — retried with backoff while NATS or the database do
 * not answer, a permanent failure (bad configuration) exiting at once — and a graceful stop on
 * SIGTERM/SIGINT (fail readiness, stop pulling, finish in-flight work, drain — saying what it waits
 * for, and for at most TOOLGATE_DRAIN_TIMEOUT_MS). A signal during start-up ends it; a second
 * signal exits at once.
 */
export async function runUntilSignalled(
  name: string,
  start: () => Promise<Drainable>,
): Promise<void> {
  let drain: ReturnType<typeof loadDrainSettings>;
  try {
    drain = loadDrainSettings(process.env);
  } catch (err) {
    console.error(`${name}: failed to start, not retrying: ${describeFailure(err)}`);
    process.exit(1);
  }
  const telemetry = setupTelemetry({ serviceName: `toolgate-${name}` });
  const starting = new AbortController();
  let service: Drainable | undefined;
  let stopping = false;
  let received = '';
  const stop = async (signal: string) => {
    console.log(`${name}: ${signal} received, shutting down (a second signal exits at once)`);
    const ending = service
      ? await drainWithin(service, {
          capMs: drain.capMs,
          log: (line) => console.log(`${name}: ${line}`),
        })
      : 'drained';
    await telemetry.shutdown();
    process.exit(ending === 'drained' ? 0 : 1);
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
