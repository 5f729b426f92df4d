import { Controller, Inject, Module, type DynamicModule } from '@nestjs/common';
import { EventPattern, Payload } from '@nestjs/microservices';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { JournalPublisher } from '@toolgate/bus';
import {
  ConsumerRole,
  createSubjects,
  journalEvent,
  type RequestedEvent,
  type Subjects,
} from '@toolgate/contracts';
import {
  eventually,
  startNatsServer,
  uniqueName,
  type NatsServerProcess,
  testJournalKeys,
} from '@toolgate/testing';
import { BusModule } from './bus.module';
import { bootstrapService, type RunningService } from './service-bootstrap';
import { startWithRetry } from './startup-retry';

const SEEN = Symbol('SEEN');

@Controller()
class RequestedController {
  constructor(@Inject(SEEN) private readonly seen: Set<string>) {}

  @EventPattern('requested')
  onRequested(@Payload() event: RequestedEvent): void {
    this.seen.add(event.dispatchId);
  }
}

@Module({})
class TinyModule {}

function requested(dispatchId: string): RequestedEvent {
  return journalEvent({
    type: 'requested',
    id: `${dispatchId}:requested`,
    tenant: 'acme',
    runId: 'run1',
    dispatchId,
    at: '2026-03-01T10:00:00.000Z',
    causationId: null,
    callId: `call-${dispatchId}`,
    tool: {
      name: 'noop',
      contractHash: 'a'.repeat(64),
      needsApproval: false,
      executor: 'inprocess',
    },
    input: {},
    agent: { agentType: 'tester' },
    isolation: 'none',
    submittedBy: 'tester',
  });
}

/**
 * A service on a broker of the test's own, started with the retrying start-up a service process
 * uses. `beforeModule` runs in each attempt once the connection is up, before the JetStream setup.
 */
function startTiny(
  broker: NatsServerProcess,
  prefix: string,
  seen: Set<string>,
  lines: string[],
  beforeModule: (attempt: number) => void = () => undefined,
): Promise<RunningService> {
  let attempt = 0;
  return startWithRetry(
    () =>
      bootstrapService({
        name: 'tiny',
        identity: 'tool-executor',
        nats: { natsUrl: broker.url, streamReplicas: 1 },
        prefix,
        port: 0,
        host: '127.0.0.1',
        logger: false,
        module: (nc: NatsConnection, subjects: Subjects): DynamicModule => {
          beforeModule(++attempt);
          return {
            module: TinyModule,
            imports: [BusModule.forRoot(nc, subjects)],
            controllers: [RequestedController],
            providers: [{ provide: SEEN, useValue: seen }],
          };
        },
        transport: { role: ConsumerRole.Evaluator },
      }),
    { name: 'tiny', log: (line) => lines.push(line), backoff: { initialMs: 50, maxMs: 200 } },
  );
}

const readyz = async (service: RunningService) => {
  const res = await fetch(`${service.url}/readyz`);
  return { status: res.status, body: (await res.json()) as { checks?: Record<string, boolean> } };
};

describe('a service and a broker that is down, hangs or restarts', () => {
  let broker: NatsServerProcess;
  const running: RunningService[] = [];

  beforeEach(async () => {
    broker = await startNatsServer({ start: false });
  });
  afterEach(async () => {
    for (const s of running.splice(0)) await s.stop().catch(() => undefined);
    await broker.cleanup();
  });

  it('starts by itself once a broker that was down at start-up comes up, saying so per attempt', async () => {
    const lines: string[] = [];
    const starting = startTiny(broker, uniqueName('late'), new Set(), lines);
    await eventually(() => (lines.length >= 2 ? true : undefined), {
      what: 'two failed attempts',
    });
    await broker.start();
    const service = await starting;
    running.push(service);

    expect((await readyz(service)).status).toBe(200);
    for (const line of lines) {
      expect(line).toMatch(
        new RegExp(
          `^tiny: start-up attempt \\d+ failed: connecting to NATS at ${broker.url}: connection refused .*; next attempt in \\d+\\.\\d s$`,
        ),
      );
    }
    expect(lines[0]).toContain('attempt 1 failed');
    expect(lines[1]).toContain('attempt 2 failed');
  });

  it('retries a start-up whose JetStream API call timed out against a hung broker', async () => {
    await broker.start();
    const lines: string[] = [];
    // The broker hangs right after the first attempt connected: its JetStream set-up times out.
    const starting = startTiny(broker, uniqueName('hung'), new Set(), lines, (attempt) => {
      if (attempt === 1) void broker.pause();
    });
    await eventually(() => (lines.length >= 1 ? true : undefined), {
      what: 'the first attempt to time out',
      timeoutMs: 20_000,
    });
    broker.resume();
    const service = await starting;
    running.push(service);

    expect(lines[0]).toMatch(
      /^tiny: start-up attempt 1 failed: ensuring the journal streams and consumers: timeout; next attempt in/,
    );
    expect((await readyz(service)).status).toBe(200);
  }, 30_000);

  it('/readyz answers 503 as soon as the broker is killed or hangs, 200 again once it is back, and consumers resume', async () => {
    await broker.start();
    const prefix = uniqueName('ready');
    const seen = new Set<string>();
    const service = await startTiny(broker, prefix, seen, []);
    running.push(service);
    let publisherConnection: NatsConnection | undefined;
    try {
      expect(await readyz(service)).toEqual({
        status: 200,
        body: { ready: true, checks: { nats: true, 'journal-streams': true } },
      });

      await broker.kill();
      // The very first probe after the broker died, not one that eventually agrees.
      expect(await readyz(service)).toEqual({
        status: 503,
        body: expect.objectContaining({
          ready: false,
          checks: { nats: false, 'journal-streams': false },
        }),
      });

      await broker.start();
      await eventually(async () => ((await readyz(service)).status === 200 ? true : undefined), {
        what: 'ready again after the broker restarted',
      });
      // A connection of its own made now: what a client publishes while it is still reconnecting is
      // dropped by the client (it resets its outbound buffer on every dial), which is not under test.
      publisherConnection = await connect({ servers: broker.url });
      await new JournalPublisher(
        publisherConnection,
        createSubjects(prefix),
        testJournalKeys(),
      ).append(requested('after-restart'));
      await eventually(() => (seen.has('after-restart') ? true : undefined), {
        what: 'the durable consumer to deliver an event published after the restart',
      });

      await broker.pause();
      try {
        // Within two seconds of the hang (probes back to back, each bounded by its own 800 ms).
        // Probed once every thread of the broker has stopped: loaded full runs saw the first
        // probe after `kill -STOP` returned answered by a thread still running (200, or 503 with
        // the ping answered); a probe that stays 200 through a hang still fails here.
        const hung = await eventually(
          async () => {
            const r = await readyz(service);
            return r.status === 503 ? r : undefined;
          },
          { timeoutMs: 2_000, intervalMs: 0, what: '/readyz 503 while the broker hangs' },
        );
        expect(hung).toEqual({
          status: 503,
          body: expect.objectContaining({ checks: { nats: false, 'journal-streams': false } }),
        });
      } finally {
        broker.resume();
      }
      await eventually(async () => ((await readyz(service)).status === 200 ? true : undefined), {
        what: 'ready again after the broker thawed',
      });
    } finally {
      await publisherConnection?.close();
    }
  });
});
