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
