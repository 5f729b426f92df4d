import { connect, type NatsConnection } from '@nats-io/transport-node';
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

/** A connection and a stream prefix of this test's own, so test files run side by side. */
export async function useTestNats(label: string): Promise<TestNats> {
  const prefix = uniqueName(label);
  const nc = await connect({ servers: NATS_URL, name: `test-${prefix}` });
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
