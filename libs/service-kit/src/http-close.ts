import type { Server } from 'node:http';

/**
 * Lets a service's HTTP server close while its clients keep their connections alive.
 *
 * Node's `server.close()` stops accepting connections and closes those idle at that moment, but
 * goes on serving every request that arrives on a connection busy at that moment, and calls back
 * only once each has gone quiet. A client that keeps one busy — a probe polling `/readyz` back to
 * back, an agent's pooled HTTP client — never lets that happen: the stop never ended (a start-up
 * that failed after listening hung in its clean-up, silently, for good). From {@link close} on,
 * every response, those in flight included, closes its connection once it is sent.
 */
export function closableHttp(server: Server): { close(): Promise<void> } {
  const open = new Set<{ headersSent: boolean; shouldKeepAlive: boolean }>();
  let closing = false;
  server.prependListener('request', (_req, res) => {
    if (closing) res.shouldKeepAlive = false;
    open.add(res);
    res.once('close', () => open.delete(res));
  });
  return {
    close() {
      closing = true;
      for (const res of open) if (!res.headersSent) res.shouldKeepAlive = false;
      if (!server.listening) return Promise.resolve();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      return closed;
    },
  };
}
