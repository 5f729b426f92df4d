import type { Msg, NatsConnection } from '@nats-io/transport-node';

/** A running worker or hook. `stop()` takes no new requests and resolves once the in-flight ones replied. */
export interface Served {
  readonly subject: string;
  stop(): Promise<void>;
}

/**
 * The serving loop `serveTool` and `serveHook` share: one subscription in queue group `queue`
 * (replicas share the requests), each request handled concurrently, and a `stop()` that drains the
 * subscription and then waits for the requests still being answered.
 */
export function serveQueue(
  nc: NatsConnection,
  subject: string,
  queue: string,
  handle: (msg: Msg) => Promise<void>,
): Served {
  const inflight = new Set<Promise<void>>();
  const sub = nc.subscribe(subject, {
    queue,
    callback: (err, msg) => {
      if (err) return;
      const p = handle(msg).finally(() => inflight.delete(p));
      inflight.add(p);
    },
  });
  return {
    subject,
    async stop() {
      await sub.drain();
      await Promise.allSettled([...inflight]);
    },
  };
}
