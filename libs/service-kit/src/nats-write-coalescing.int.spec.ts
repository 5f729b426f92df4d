import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { NATS_URL, eventually, uniqueName } from '@toolgate/testing';
import { connectNats } from './nats-settings';

/** This process's `write(2)` calls so far (Linux: /proc/self/io). */
function writeSyscalls(): number {
  return Number(/syscw: (\d+)/.exec(readFileSync('/proc/self/io', 'utf8'))![1]);
}

function socketOf(nc: NatsConnection): Socket {
  return (nc as unknown as { protocol: { transport: { socket: Socket } } }).protocol.transport
    .socket;
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

/**
 * 100 publishes, each from a microtask of its own within one turn of the event loop (as handlers
 * that await one another publish): the write(2) calls the process made for them.
 */
async function writesFor(nc: NatsConnection, subject: string): Promise<number> {
  await nc.flush();
  await turn();
  const before = writeSyscalls();
  for (let i = 0; i < 100; i++) {
    await Promise.resolve();
    nc.publish(subject, String(i));
  }
  await turn();
  const writes = writeSyscalls() - before;
  await nc.flush();
  return writes;
}

describe('coalesced NATS writes (a service connection, real broker)', () => {
  let service: NatsConnection;
  let plain: NatsConnection;
  beforeAll(async () => {
    service = await connectNats({ natsUrl: NATS_URL, streamReplicas: 1 }, 'coalescing-spec');
    plain = await connect({ servers: NATS_URL });
  });
  afterAll(async () => {
    await service.close();
    await plain.close();
  });

  it('sends what one turn of the event loop published in one write, every message in order', async () => {
    const subject = uniqueName('coalesce');
    const received: string[] = [];
    const sub = plain.subscribe(subject, {
      callback: (_err, msg) => {
        received.push(msg.string());
      },
    });
    await plain.flush();

    const coalesced = await writesFor(service, subject);
    const uncoalesced = await writesFor(plain, subject);

    // The plain client writes after each publish's microtask; the service's connection once.
    expect(uncoalesced).toBeGreaterThanOrEqual(50);
    expect(coalesced).toBeLessThanOrEqual(3);
    const expected = Array.from({ length: 100 }, (_, i) => String(i));
    await eventually(() => (received.length >= 200 ? true : undefined));
    expect(received).toEqual([...expected, ...expected]);
    sub.unsubscribe();
  });

  it('keeps request/reply and flush working, and leaves the socket uncorked after the turn', async () => {
    const subject = uniqueName('coalesce-echo');
    const sub = plain.subscribe(subject, {
      callback: (_err, msg) => {
        msg.respond(msg.data);
      },
    });
    await plain.flush();
    service.publish(uniqueName('coalesce-nobody'), 'x');
    await Promise.resolve(); // nats.js writes from a microtask
    expect(socketOf(service).writableCorked).toBe(1);
    await turn();
    expect(socketOf(service).writableCorked).toBe(0);
    const reply = await service.request(subject, 'ping', { timeout: 2000 });
    expect(reply.string()).toBe('ping');
    await service.flush();
    sub.unsubscribe();
  });

  it('coalesces the writes of the socket a reconnect dials, too', async () => {
    const reconnected = (async () => {
      for await (const s of service.status()) if (s.type === 'reconnect') return;
    })();
    const before = socketOf(service);
    before.destroy();
    await reconnected;
    await turn();
    const after = socketOf(service);
    expect(after).not.toBe(before);
    expect(await writesFor(service, uniqueName('coalesce-again'))).toBeLessThanOrEqual(3);
  });
});
