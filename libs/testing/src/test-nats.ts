import { connect, type ConnectionOptions, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { createSubjects, type Subjects } from '@toolgate/contracts';
import { NATS_URL, uniqueName } from './names';

export interface TestNats {
  nc: NatsConnection;
  jsm: JetStreamManager;
  prefix: string;
  subjects: Subjects;
  /** Deletes every stream (including KV and object-store streams) named after the prefix and closes. */
  cleanup(): Promise<void>;
}

/**
 * A stream no test deletes, on the shared broker. nats-server 2.9 removes an account's storage
 * directory when its last stream is deleted, and a stream (a journal, a KV bucket, an object store)
 * created in that instant fails: "error creating store for stream". Test files end, and delete
 * their streams, at any moment, so without it the account empties now and then mid-run (a whole
 * `npm test` lost a service's start-up to it once). The journal's own creation rides such a
 * failure out (`ensureJournalStreams`, its spec on a broker of its own); this keeps the rest clear.
 */
export const ANCHOR_STREAM = 'toolgate_test_anchor';

async function keepAccountStore(jsm: JetStreamManager): Promise<void> {
  try {
    await jsm.streams.info(ANCHOR_STREAM);
  } catch {
    await jsm.streams
      .add({ name: ANCHOR_STREAM, subjects: ['toolgate-test-anchor'], max_msgs: 1 })
      // Another file made it first (10058): what was wanted.
      .catch((err: unknown) => {
        if ((err as { code?: unknown }).code !== 10058) throw err;
      });
  }
}

/**
 * A connection and a stream prefix of this test's own, so test files run side by side. `options`
 * go to the connection (the bench's turn off async stack traces, as the services' connections do).
 */
export async function useTestNats(
  label: string,
  options: Partial<ConnectionOptions> = {},
): Promise<TestNats> {
  const prefix = uniqueName(label);
  const nc = await connect({ servers: NATS_URL, name: `test-${prefix}`, ...options });
  const jsm = await jetstreamManager(nc);
  await keepAccountStore(jsm);
  return {
    nc,
    jsm,
    prefix,
    subjects: createSubjects(prefix),
    async cleanup() {
      if (nc.isClosed()) return;
      for await (const name of jsm.streams.names()) {
        if (name.includes(prefix)) await jsm.streams.delete(name).catch(() => undefined);
      }
      await nc.drain();
    },
  };
}
