import { fork } from 'node:child_process';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';

/** Where the conformance CLI is, and the loader that lets it start on Node 20 (see fs-shim.mjs). */
const CLI = require.resolve('@modelcontextprotocol/conformance/dist/index.js');
const SHIM = path.join(__dirname, 'register.mjs');
const RUNNER = path.join(__dirname, 'scenario-runner.mjs');

/**
 * A proxy that adds a bearer token to every request to `target`: the conformance suite's client
 * cannot present one, and Toolgate's /mcp answers 401 to everything without it. Headers, method
 * and body pass through unchanged otherwise (Origin and Host included).
 */
export async function tokenProxy(
  target: string,
  token: string,
): Promise<{ url: string; close(): Promise<void> }> {
  const to = new URL(target);
  const server: Server = createServer((req, res) => {
    const upstream = request(
      {
        hostname: to.hostname,
        port: to.port,
        path: req.url,
        method: req.method,
        headers: { ...req.headers, authorization: `Bearer ${token}` },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** Options of one `conformance server` run. */
export interface ScenarioOptions {
  specVersion?: string;
  outputDir?: string;
}

/** The conformance CLI, kept running: one `server` run per call, one at a time. */
export interface ConformanceRunner {
  /** Runs one conformance scenario against `url`; resolves with its exit code and output. */
  run(
    url: string,
    scenario: string,
    options?: ScenarioOptions,
  ): Promise<{ code: number | null; output: string }>;
  close(): Promise<void>;
}

/**
 * Starts the conformance CLI in a process of its own that stays up (scenario-runner.mjs): each
 * run is the CLI's `server` command as a process of its own would run it — a fresh evaluation of
 * the CLI, its exit code and output — without loading Node.js and the CLI's dependencies again.
 */
export function startConformanceRunner(): ConformanceRunner {
  const child = fork(RUNNER, [CLI], {
    execArgv: ['--import', SHIM],
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let log = '';
  child.stdout?.on('data', (d) => (log += d));
  child.stderr?.on('data', (d) => (log += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  let next = 0;
  let queue: Promise<unknown> = Promise.resolve();
  return {
    run(url, scenario, options = {}) {
      const args = ['server', '--url', url, '--scenario', scenario];
      if (options.specVersion) args.push('--spec-version', options.specVersion);
      if (options.outputDir) args.push('--output-dir', options.outputDir);
      const id = ++next;
      const answer = queue.then(
        () =>
          new Promise<{ code: number | null; output: string }>((resolve, reject) => {
            const onMessage = (m: { id: number; code: number; output: string }) => {
              if (m.id !== id) return;
              child.off('message', onMessage);
              resolve({ code: m.code, output: m.output });
            };
            child.on('message', onMessage);
            void exited.then((code) =>
              reject(
                new Error(`the conformance runner exited (${code}) during ${scenario}:\n${log}`),
              ),
            );
            child.send({ id, args });
          }),
      );
      queue = answer.catch(() => undefined);
      return answer;
    },
    async close() {
      if (child.exitCode === null && child.signalCode === null) {
        child.disconnect();
        await exited;
      }
    },
  };
}
