import { connect, type NatsConnection } from '@nats-io/transport-node';
import { connectionState } from '@toolgate/bus';
import { createSubjects, ErrorCode, ToolgateError } from '@toolgate/contracts';
import { eventually, startNatsServer, type NatsServerProcess } from '@toolgate/testing';
import { PolicyStore } from './policy-store';

/**
 * The KV mirrors while their broker is away. The client buffers what is sent while it reconnects
 * and clears that buffer on every dial, so a write made then would be dropped unseen and its caller
 * would wait out the 5 s timeout. Runs on a nats-server of its own, which it kills and restarts.
 */
describe('a policy store whose broker goes away', () => {
  let server: NatsServerProcess;
  let nc: NatsConnection;
  let store: PolicyStore;

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
    store = await PolicyStore.open(nc, createSubjects('kvoutage'));
  }, 30_000);
  afterAll(async () => {
    store?.stop();
    await nc?.close();
    await server?.cleanup();
  });

  it('refuses a write at once as not sent (never a conflict), and writes again once reconnected', async () => {
    const first = await store.put('acme', { v: 1 });
    await server.kill();
    await eventually(async () => !connectionState(nc).up || undefined, {
      what: 'the client to see its socket drop',
    });

    // A compare-and-set write as much as a blind one: the broker being away is no conflict.
    for (const expectedRevision of [undefined, first]) {
      const refused = await store.put('acme', { v: 2 }, expectedRevision).then(
        () => undefined,
        (err: Error) => err,
      );
      expect(refused).not.toBeInstanceOf(ToolgateError);
      expect(refused).toMatchObject({ name: 'ConnectionError' });
      expect(refused?.message).toMatch(/not sent: the NATS connection is reconnecting/);
    }

    await server.start();
    await eventually(async () => connectionState(nc).up || undefined, {
      what: 'the client reconnected',
    });
    // Nothing refused was stored; the mirror's watch resumed, so the writer reads its own write.
    expect(store.get('acme')).toEqual({ revision: first, document: { v: 1 } });
    const next = await store.put('acme', { v: 3 }, first);
    expect(next).toBe(first + 1);
    expect(store.get('acme')).toEqual({ revision: next, document: { v: 3 } });
    // A stale revision is still a conflict.
    await expect(store.put('acme', { v: 4 }, first)).rejects.toMatchObject({
      code: ErrorCode.Conflict,
    });
  }, 60_000);
});
