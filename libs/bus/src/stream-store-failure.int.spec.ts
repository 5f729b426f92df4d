import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { JetStreamApiError, jetstreamManager } from '@nats-io/jetstream';
import { createSubjects } from '@toolgate/contracts';
import { startNatsServer, type NatsServerProcess } from '@toolgate/testing';
import { ensureJournalStreams } from './journal-infrastructure';

/**
 * nats-server 2.9 removes an account's storage directory when its last stream is deleted, and a
 * stream created while that happens finds the directory gone ("error creating store for stream",
 * 10049 with status 500): a whole test run hit it once. Here the broker's account directory is made unmakeable (a
 * file stands where the directory goes) for a while, as the race leaves it for an instant.
 */
describe('creating the journal streams while the broker cannot make their storage', () => {
  let server: NatsServerProcess;
  let nc: NatsConnection;
  const accountDir = () => path.join(server.storeDir, 'jetstream', '$G');

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
  });
  afterAll(async () => {
    await nc?.close();
    await server?.cleanup();
  });

  it('creates them once the store can be made again, within the retries', async () => {
    const jsm = await jetstreamManager(nc);
    await rm(accountDir(), { recursive: true, force: true });
    await writeFile(accountDir(), 'not a directory');
    // The store comes back 300 ms later: the creation in flight then must not have given up.
    const healed = new Promise<void>((resolve) =>
      setTimeout(() => void rm(accountDir(), { force: true }).then(resolve), 300),
    );
    const subjects = createSubjects('storefail');
    await ensureJournalStreams(jsm, subjects);
    await healed;
    const info = await jsm.streams.info(subjects.journal.stream);
    expect(info.config.subjects).toEqual([subjects.journal.partitions[0]!.all]);
  });

  it('still fails, with the broker’s error, when the store stays unmakeable', async () => {
    const jsm = await jetstreamManager(nc);
    for await (const name of jsm.streams.names()) await jsm.streams.delete(name);
    await rm(accountDir(), { recursive: true, force: true });
    await writeFile(accountDir(), 'not a directory');
    try {
      const err = await ensureJournalStreams(jsm, createSubjects('storegone')).then(
        () => null,
        (e: unknown) => e as JetStreamApiError,
      );
      expect(err).toBeInstanceOf(JetStreamApiError);
      expect([err!.code, err!.status, err!.message]).toEqual([
        10049,
        500,
        'error creating store for stream',
      ]);
    } finally {
      await rm(accountDir(), { force: true });
    }
  });
});
