import type { NatsConnection } from '@nats-io/transport-node';

/** Whether a connection's socket is up now, as its status events say. */
export interface ConnectionState {
  readonly up: boolean;
}

const states = new WeakMap<NatsConnection, ConnectionState>();

/**
 * A connection's state, followed from its status events (one reader per connection, shared): down
 * the moment its socket drops, up again on reconnect. `isClosed()` is no substitute, since the
 * client reconnects forever and stays open through a whole outage.
 */
export function connectionState(nc: NatsConnection): ConnectionState {
  let state = states.get(nc);
  if (!state) {
    const s = { up: true };
    void (async () => {
      for await (const status of nc.status()) {
        if (status.type === 'disconnect') s.up = false;
        else if (status.type === 'reconnect') s.up = true;
      }
    })().catch(() => undefined);
    states.set(nc, (state = s));
  }
  return state;
}
