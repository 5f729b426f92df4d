import type { Socket } from 'node:net';
import type { NatsConnection } from '@nats-io/transport-node';

/**
 * The part of nats.js's Node transport (`NodeTransport`, internal to `@nats-io/transport-node`,
 * pinned to ~3.3) that write coalescing wraps: every protocol write goes through `_send`.
 */
interface NodeTransportInternals {
  socket?: Socket;
  _send(frame: Uint8Array): Promise<void>;
}

const coalesced = new WeakSet<object>();

/**
 * Coalesces a connection's socket writes per turn of the event loop.
 *
 * nats.js writes what it has buffered from a microtask, so each handler that publishes, acks or
 * asks the broker something costs a `write(2)` of its own: with four appends, their acks, seven
 * deliveries' acks and the direct gets of every dispatch, a service spent 8–17 % of its CPU in the
 * kernel's socket writes, and the broker as much again reading them. Here the socket is corked at
 * a turn's first write and uncorked by `setImmediate` — once the I/O callbacks of that turn have
 * run — so everything the turn sent leaves in one write, in the order it was sent. A write waits
 * at most for the rest of its turn; under load that is what lets writes share a syscall.
 * `npm run bench`: the dispatch section's write syscalls fell from 46,000 to 14,300.
 *
 * Applied to the transport of each dial: again after every reconnect (a new socket). Returns
 * whether the transport it found could be wrapped — false would mean the client's internals
 * changed (its spec fails then, so an upgrade that breaks this is seen, never silent in CI).
 */
export function coalesceWrites(nc: NatsConnection): boolean {
  const wrapCurrent = (): boolean => {
    const transport = (nc as unknown as { protocol?: { transport?: NodeTransportInternals } })
      .protocol?.transport;
    if (!transport || typeof transport._send !== 'function') return false;
    if (coalesced.has(transport)) return true;
    const send = transport._send.bind(transport);
    transport._send = (frame) => {
      const socket = transport.socket;
      if (socket && socket.writableCorked === 0 && !socket.destroyed) {
        socket.cork();
        setImmediate(() => socket.uncork());
      }
      return send(frame);
    };
    coalesced.add(transport);
    return true;
  };
  void (async () => {
    for await (const status of nc.status()) if (status.type === 'reconnect') wrapCurrent();
  })().catch(() => undefined);
  return wrapCurrent();
}
