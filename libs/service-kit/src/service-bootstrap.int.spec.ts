import { Controller, Inject, Module, type DynamicModule } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import type { NatsConnection } from '@nats-io/transport-node';
import { consumerName, JournalPublisher } from '@toolgate/bus';
import {
  ConsumerRole,
  ErrorCode,
  journalEvent,
  type RequestedEvent,
  type Subjects,
} from '@toolgate/contracts';
import {
  eventually,
  NATS_URL,
  useTestNats,
  type TestNats,
  testJournalKeys,
  testKeys,
} from '@toolgate/testing';
import { BusModule } from './bus.module';
import { Readiness } from './health';
import type { JetStreamEventContext } from './jetstream-server';
import { settlePoisoned } from './poison-settlement';
import {
  bootstrapService,
  type RunningService,
  type ServiceBootstrapOptions,
} from './service-bootstrap';

const HANDLED = Symbol('HANDLED');

/** What the handler saw, and a gate a test can hold the handler at. */
class Handled {
  readonly deliveries: { dispatchId: string; deliveryCount: number }[] = [];
  hold: Promise<void> | undefined;
  entered: (() => void) | undefined;
}

@Controller()
class RequestedController {
  constructor(@Inject(HANDLED) private readonly handled: Handled) {}

  @EventPattern('requested')
  async onRequested(
    @Payload() event: RequestedEvent,
    @Ctx() delivery: JetStreamEventContext,
  ): Promise<void> {
    this.handled.deliveries.push({
      dispatchId: event.dispatchId,
      deliveryCount: delivery.deliveryCount,
    });
    if (event.dispatchId.startsWith('flaky') && delivery.deliveryCount === 1)
      throw new Error('first delivery fails');
    if (event.dispatchId.startsWith('poison')) throw new Error('never works');
    if (event.dispatchId.startsWith('slow')) {
      this.handled.entered?.();
      await this.handled.hold;
    }
  }
}

@Module({})
class TinyModule {}

function tinyModule(nc: NatsConnection, subjects: Subjects, handled: Handled): DynamicModule {
  return {
    module: TinyModule,
    imports: [BusModule.forRoot(nc, subjects)],
    controllers: [RequestedController],
    providers: [{ provide: HANDLED, useValue: handled }],
  };
}

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

describe('bootstrapService with a tiny Nest module on real NATS', () => {
  let t: TestNats;
  let service: RunningService;
  let publisher: JournalPublisher;
  const handled = new Handled();
  /** The tiny service as the executor, on this file's prefix. */
  const tiny = (): ServiceBootstrapOptions => ({
    name: 'tiny',
    identity: 'tool-executor',
    nats: { natsUrl: NATS_URL, streamReplicas: 1 },
    prefix: t.prefix,
    port: 0,
    host: '127.0.0.1',
    logger: false,
    module: (nc, subjects) => tinyModule(nc, subjects, handled),
  });

  beforeAll(async () => {
    t = await useTestNats('servicekit');
    service = await bootstrapService({
      ...tiny(),
      transport: {
        role: ConsumerRole.Evaluator,
        handlers: { requested: { maxDeliver: 2, backoffMs: [20] } },
        onPoison: settlePoisoned,
      },
    });
    publisher = new JournalPublisher(t.nc, t.subjects, testJournalKeys());
  });
  afterAll(async () => {
    await service?.stop();
    await t?.cleanup();
  });

  it("refuses, before connecting, keys given for another identity than the service's", async () => {
    await expect(bootstrapService({ ...tiny(), keys: testKeys('gateway') })).rejects.toMatchObject({
      code: ErrorCode.Config,
    });
  });

  const consumer = () =>
    consumerName(t.subjects, { role: ConsumerRole.Evaluator, eventType: 'requested' });
  const settledOf = (dispatchId: string) => publisher.last('acme', 'run1', dispatchId, 'settled');

  it('/healthz answers 200 and /readyz 200 with every check true', async () => {
    const health = await fetch(`${service.url}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });
    const ready = await fetch(`${service.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({
      ready: true,
      checks: { nats: true, 'journal-streams': true },
    });
  });

  it("delivers a journal event to the @EventPattern('requested') handler and acks it", async () => {
    await publisher.append(requested('d1'));
    await eventually(
      () => (handled.deliveries.some((d) => d.dispatchId === 'd1') ? true : undefined),
      {
        what: 'the handler to see d1',
      },
    );
    await eventually(
      async () => {
        const info = await t.jsm.consumers.info(t.subjects.journal.stream, consumer());
        return info.num_pending === 0 && info.num_ack_pending === 0 ? info : undefined;
      },
      { what: 'the event to be acked' },
    );
    expect(handled.deliveries.filter((d) => d.dispatchId === 'd1')).toEqual([
      { dispatchId: 'd1', deliveryCount: 1 },
    ]);
  });

  it('redelivers an event whose handler threw', async () => {
    await publisher.append(requested('flaky1'));
    await eventually(
      () =>
        handled.deliveries.some((d) => d.dispatchId === 'flaky1' && d.deliveryCount === 2)
          ? true
          : undefined,
      {
        what: 'the redelivery',
      },
    );
    expect(await settledOf('flaky1')).toBeNull();
  });

  it('settles the dispatch of an event that poisons its handler as poison-message', async () => {
    await publisher.append(requested('poison1'));
    const settled = await eventually(async () => (await settledOf('poison1')) ?? undefined, {
      what: 'the poison settlement',
    });
    expect(settled.event).toMatchObject({
      type: 'settled',
      dispatchId: 'poison1',
      causationId: 'poison1:requested',
      toolName: 'noop',
      outcome: 'error',
      error: { code: ErrorCode.PoisonMessage, details: { consumer: consumer() } },
      attempt: 2,
    });
  });

  it('stopping fails /readyz with 503 while in-flight work finishes, then acks it; stop is idempotent', async () => {
    let release!: () => void;
    handled.hold = new Promise<void>((resolve) => (release = resolve));
    const entered = new Promise<void>((resolve) => (handled.entered = resolve));
    await publisher.append(requested('slow1'));
    await entered;

    const stopping = service.stop();
    try {
      expect(service.stop()).toBe(stopping);
      const ready = await fetch(`${service.url}/readyz`);
      expect(ready.status).toBe(503);
      expect(await ready.json()).toMatchObject({ ready: false, checks: { draining: false } });
    } finally {
      release();
    }
    await stopping;
    expect(service.nc.isClosed()).toBe(true);
    const info = await t.jsm.consumers.info(t.subjects.journal.stream, consumer());
    expect(info.num_ack_pending).toBe(0);
    expect(info.num_pending).toBe(0);
  });

  it('stops while a client keeps its connection busy polling /readyz back to back', async () => {
    const polled = await bootstrapService(tiny());
    // Each answer takes a while, so the connection is busy whenever the stop comes.
    polled.app.get(Readiness).add({
      name: 'slow',
      check: () => new Promise<boolean>((resolve) => setTimeout(() => resolve(true), 200)),
    });
    let polling = true;
    let answered = 0;
    const poller = (async () => {
      while (polling) {
        try {
          await (await fetch(`${polled.url}/readyz`)).text();
          answered++;
        } catch {
          // Refused once the server is closed: the poller keeps trying until the test ends.
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      }
    })();
    try {
      await eventually(async () => answered >= 2 || undefined);
      let timer: NodeJS.Timeout | undefined;
      const stopped = await Promise.race([
        polled.stop().then(() => 'stopped'),
        new Promise(
          (resolve) => (timer = setTimeout(() => resolve('still stopping after 10 s'), 10_000)),
        ),
      ]);
      clearTimeout(timer);
      expect(stopped).toBe('stopped');
      expect(polled.nc.isClosed()).toBe(true);
      await expect(fetch(`${polled.url}/healthz`)).rejects.toThrow();
    } finally {
      polling = false;
      await poller;
    }
  }, 30_000);
});
