/**
 * Egress for a sandboxed run that may use the network: the run keeps a network namespace of its
 * own (loopback only: no route to the host's 127.0.0.1, its other addresses or anything beyond),
 * and a bridge inside it forwards every TCP connection to `127.0.0.1:EGRESS_PORT` to a Unix
 * socket bound in from the host, where the caller's proxy decides what each connection may reach
 * (`services/tool-executor`'s egress proxy: the tool's declared hosts, the domain rules, no
 * internal address). The boundary is the namespace: a tool that ignores the proxy variables, dials
 * an address, kills the bridge or binds the port itself reaches nothing the proxy did not allow.
 */

/** The port the bridge listens on inside the run's network namespace. */
export const EGRESS_PORT = 3128;

/**
 * Connections a call's egress holds at once, on each side of its proxy: what the proxy accepts
 * from the tool and opens upstream, and what the executor accepts in a runc container's
 * namespace.
 */
export const EGRESS_MAX_CONNECTIONS = 64;

/** Where the proxy's Unix socket is bound inside the sandbox (read-only). */
export const EGRESS_SOCKET = '/run/toolgate/egress.sock';

/** The proxy, for every client that reads the usual variables (curl, pip, git, requests, Go…). */
const PROXY_URL = `http://127.0.0.1:${EGRESS_PORT}`;

/** Set in the command's environment of a run with egress, over the tool's own. */
export const EGRESS_ENV: Readonly<Record<string, string>> = Object.freeze({
  HTTP_PROXY: PROXY_URL,
  HTTPS_PROXY: PROXY_URL,
  ALL_PROXY: PROXY_URL,
  http_proxy: PROXY_URL,
  https_proxy: PROXY_URL,
  all_proxy: PROXY_URL,
  // Nothing bypasses it: every other route leads nowhere.
  NO_PROXY: '',
  no_proxy: '',
});

/**
 * Threads of the bridge's Node.js process (the main one and V8's, with the flags below), counted
 * by the run's pids cgroup and RLIMIT_NPROC on top of the tool's own processes.
 */
export const BRIDGE_TASKS = 6;

/** Memory the bridge may use, added to the run's memory cgroup on top of the tool's limit. */
export const BRIDGE_MEMORY_BYTES = 64 * 1024 * 1024;

/**
 * The bridge: listens on 127.0.0.1:EGRESS_PORT, then starts the command (argv after the socket
 * and port) with the same stdio and environment, pipes each connection to the socket, and exits
 * with the command's status (128 + the signal when a signal ended it, as bubblewrap reports one).
 * It starts the command only once it listens, so no connection of the command comes too early.
 * Fixed text: the socket, the port and the command are arguments.
 */
const BRIDGE_SCRIPT = `'use strict';
const net = require('net');
const { spawn } = require('child_process');
const { signals } = require('os').constants;
const [socket, port, ...argv] = process.argv.slice(1);
// The command's own NODE_OPTIONS, kept away from this process's start (see bridgeEnv).
const env = { ...process.env };
delete env.NODE_OPTIONS;
if (env.TOOLGATE_TOOL_NODE_OPTIONS !== undefined) env.NODE_OPTIONS = env.TOOLGATE_TOOL_NODE_OPTIONS;
delete env.TOOLGATE_TOOL_NODE_OPTIONS;
const server = net.createServer((client) => {
  const upstream = net.connect(socket);
  client.on('error', () => upstream.destroy());
  upstream.on('error', () => client.destroy());
  client.pipe(upstream).pipe(client);
});
server.on('error', (err) => {
  process.stderr.write('toolgate egress: ' + err.message + '\\n');
  process.exit(125);
});
server.listen(Number(port), '127.0.0.1', () => {
  const child = spawn(argv[0], argv.slice(1), { stdio: 'inherit', env });
  child.on('error', (err) => {
    process.stderr.write(argv[0] + ': ' + err.message + '\\n');
    process.exit(err.code === 'ENOENT' ? 127 : 126);
  });
  child.on('exit', (code, signal) => process.exit(signal ? 128 + (signals[signal] || 0) : code));
});
`;

/**
 * The environment a run with egress is started with: the command's, with the proxy named, and the
 * command's `NODE_OPTIONS` moved aside, so that the bridge (a Node process too) starts as it should
 * whatever the tool sets there; the bridge gives it back to the command.
 */
export function bridgeEnv(env: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = { ...env, ...EGRESS_ENV };
  delete out.TOOLGATE_TOOL_NODE_OPTIONS;
  if (out.NODE_OPTIONS !== undefined) {
    out.TOOLGATE_TOOL_NODE_OPTIONS = out.NODE_OPTIONS;
    delete out.NODE_OPTIONS;
  }
  return out;
}

/**
 * The bridge's command line, before the command's own (`prlimit` and the tool's argv): `node` is
 * the path of this process's Node.js binary, bound into the sandbox when the layout lacks it.
 * The bridge runs outside the command's resource limits (its own are the cgroups'), so a tool
 * lowering its memory cannot stop it starting.
 */
export function bridgeArgv(node: string): string[] {
  return [
    node,
    '--max-old-space-size=16',
    '--max-semi-space-size=1',
    '--v8-pool-size=1',
    '-e',
    BRIDGE_SCRIPT,
    '--',
    EGRESS_SOCKET,
    String(EGRESS_PORT),
  ];
}
