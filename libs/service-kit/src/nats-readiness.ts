import type { NatsConnection } from '@nats-io/transport-node';
import { connectionState } from '@toolgate/bus';
import type { ReadinessCheck } from './health';

/** How long /readyz waits for the broker's PONG before it calls NATS unreachable. */
const PING_TIMEOUT_MS = 500;

/**
 * Whether the broker answers, as /readyz asks it. The client reconnects forever, so it is never
 * closed while the broker is away: `isClosed()` would say "ready" through a whole outage. Instead,
 * the connection's status events mark it down the moment its socket drops (and up on reconnect),
 * and while it is up a ping must come back within half a second — a broker that hangs keeps the
 * socket open but stops answering.
 */
export function natsReadinessCheck(nc: NatsConnection, name = 'nats'): ReadinessCheck {
  const connection = connectionState(nc);
  return {
    name,
    async check() {
      if (nc.isClosed() || nc.isDraining() || !connection.up) return false;
      let timer: NodeJS.Timeout | undefined;
      try {
        return await Promise.race([
          nc.flush().then(
            () => true,
            () => false,
          ),
          new Promise<boolean>(
            (resolve) => (timer = setTimeout(() => resolve(false), PING_TIMEOUT_MS)),
          ),
        ]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
