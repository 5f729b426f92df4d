import { spawn } from 'node:child_process';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';

/** Where the conformance CLI is, and the loader that lets it start on Node 20 (see fs-shim.mjs). */
const CLI = require.resolve('@modelcontextprotocol/conformance/dist/index.js');
const SHIM = path.join(__dirname, 'register.mjs');

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

/** Runs one conformance scenario against `url`; resolves with its exit code and output. */
export function runScenario(
  url: string,
  scenario: string,
  options: { specVersion?: string; outputDir?: string } = {},
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const args = ['--import', SHIM, CLI, 'server', '--url', url, '--scenario', scenario];
    if (options.specVersion) args.push('--spec-version', options.specVersion);
    if (options.outputDir) args.push('--output-dir', options.outputDir);
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('close', (code) => resolve({ code, output }));
  });
}
