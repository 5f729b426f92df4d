import { NATS_URL } from './names';
import { startNatsCluster } from './nats-cluster';

/**
 * The two shapes a guarantee that rests on the journal's reads and appends must hold on
 * (DESIGN.md, "Running it"): this machine's single node with R1 streams, and a 3-node cluster of
 * the test's own with R3 streams (followers that may lag, a leader that answers the reads that
 * decide). For `describe.each(BROKER_SHAPES)('… ($shape)', …)`.
 */
export const BROKER_SHAPES = [
  { shape: 'one node, R1 streams', replicas: 1 },
  { shape: 'a 3-node cluster, R3 streams', replicas: 3 },
] as const;

export type BrokerShape = (typeof BROKER_SHAPES)[number];

/** A broker of one {@link BrokerShape}, for a test's connection and its services. */
export interface TestBroker {
  /** Every node's client URL, for a connection's `servers` (`useTestNats(label, { servers })`). */
  servers: string[];
  /** What a service started on it is told: `NATS_URL` and `TOOLGATE_STREAM_REPLICAS`. */
  env: { NATS_URL: string; TOOLGATE_STREAM_REPLICAS: string };
  /** Stops a cluster of the test's own (the shared single node is left running). */
  cleanup(): Promise<void>;
}

/**
 * The shared single node at {@link NATS_URL} (R1), or a 3-node cluster started for the caller
 * (`startNatsCluster`, R3). Call `cleanup()` in `afterAll`, after the connections on it closed.
 */
export async function startTestBroker(shape: BrokerShape, label: string): Promise<TestBroker> {
  if (shape.replicas === 1)
    return {
      servers: [NATS_URL],
      env: { NATS_URL, TOOLGATE_STREAM_REPLICAS: '1' },
      cleanup: async () => undefined,
    };
  const cluster = await startNatsCluster({ label, size: shape.replicas });
  return {
    servers: cluster.servers,
    env: { NATS_URL: cluster.url, TOOLGATE_STREAM_REPLICAS: String(shape.replicas) },
    cleanup: () => cluster.cleanup(),
  };
}
