import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { freePort } from './nats-server-process';

/**
 * A TCP relay on a loopback port of its own to a real server (PostgreSQL, NATS) that a test can
 * cut: a database that is unreachable, then back, without touching the shared server itself. With
 * a delay it is a slow link: a client behind it is the one that loses every race with the others.
 */
export interface TcpProxy {
  readonly port: number;
  /** Whether it accepts connections now. */
  readonly open: boolean;
  /** Starts accepting on its port (again). */
  listen(): Promise<void>;
  /** Stops accepting and destroys every relayed connection, as a server that went away. */
  cut(): Promise<void>;
}

/**
 * Called with each chunk a client sends, when it is due upstream: a promise it returns holds that
 * chunk and every later one of the connection until it settles.
 */
export type ClientChunkGate = (chunk: Buffer) => Promise<void> | undefined;

/** A relay to `target`, not yet accepting (call `listen`), delaying each chunk by `delayMs` each way. */
export async function tcpProxy(
  target: { host: string; port: number },
  options: {
    delayMs?: number;
    gate?: ClientChunkGate;
    /** The same for what the server sends a client. */
    serverGate?: ClientChunkGate;
  } = {},
): Promise<TcpProxy> {
  const port = await freePort();
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  const delayMs = options.delayMs ?? 0;
  const gate = options.gate;
  // Timers of one delay fire in the order they were set: the stream's bytes keep their order.
  const relay = (from: Socket, to: Socket, gated?: ClientChunkGate) => {
    if (gated) {
      // Chunks go one after another, each once its delay is over and the gate before it opened.
      let last: Promise<void> = Promise.resolve();
      from.on('data', (chunk: Buffer) => {
        const due = new Promise<void>((resolve) => setTimeout(resolve, delayMs));
        last = Promise.all([last, due]).then(async () => {
          await gated(chunk);
          if (!to.destroyed) to.write(chunk);
        });
      });
    } else if (delayMs <= 0) from.pipe(to);
    else from.on('data', (chunk) => setTimeout(() => to.destroyed || to.write(chunk), delayMs));
  };
  return {
    port,
    get open() {
      return server !== undefined;
    },
    async listen() {
      if (server) return;
      const listening = createServer((client) => {
        const upstream = createConnection(target);
        sockets.add(client).add(upstream);
        const forget = () => {
          sockets.delete(client);
          sockets.delete(upstream);
          client.destroy();
          upstream.destroy();
        };
        client.on('error', forget).on('close', forget);
        upstream.on('error', forget).on('close', forget);
        relay(client, upstream, gate);
        relay(upstream, client, options.serverGate);
      });
      await new Promise<void>((resolve, reject) => {
        listening.once('error', reject);
        listening.listen(port, '127.0.0.1', () => resolve());
      });
      server = listening;
    },
    async cut() {
      const closing = server;
      server = undefined;
      for (const s of sockets) s.destroy();
      sockets.clear();
      if (closing) await new Promise<void>((resolve) => closing.close(() => resolve()));
    },
  };
}
