import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** An HTTP listener that records the URL of every request it receives: the effect an attack on it has. */
export interface RecordingListener {
  host: string;
  port: number;
  /** Each request's URL (path and query), in arrival order. */
  seen: string[];
  close(): Promise<void>;
}

/** Listens on `host` (`::`: every address, both families) at a free port. */
export async function recordingListener(
  host: string,
  handler: http.RequestListener,
): Promise<RecordingListener> {
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    seen.push(req.url ?? '');
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return {
    host,
    port: (server.address() as AddressInfo).port,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
