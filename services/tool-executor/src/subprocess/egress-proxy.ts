import { promises as fs } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { declaredHost, ErrorCode, ToolgateError } from '@toolgate/contracts';
import { canonicalHost } from '@toolgate/permissions';
import { EGRESS_MAX_CONNECTIONS } from '@toolgate/sandbox';
import type { CheckDomain } from '../builtins/builtin-deps';
import { assertHostAllowed, ConnectGuard } from '../builtins/connect-guard';
import type { InternalAllowance } from '../builtins/internal-addresses';

/** What one call's egress may reach. */
export interface EgressRules {
  /**
   * What the tool declares (`network.hosts`: names, each on every port or on the one its
   * `:<port>` gives): nothing else is reached, by name, address or port.
   */
  readonly hosts: readonly string[];
  /** The call's domain rules, as `http_fetch` applies them (the host, then every address). */
  readonly checkDomain: CheckDomain;
  /** The internal addresses the operator opened (`EXECUTOR_FETCH_INTERNAL`); none by default. */
  readonly internal: InternalAllowance;
  /** Names the call in refusals (the tool's name). */
  readonly who: string;
}

/**
 * Connections a call may hold open through its proxy at once, on each side: the tool's to the
 * proxy, and the proxy's upstream (a tunnel counts until closed, a forwarded request until its
 * upstream connection closes — pipelined requests on one connection count one each).
 */
export const MAX_EGRESS_CONNECTIONS = EGRESS_MAX_CONNECTIONS;

/** Request headers that belong to one hop (RFC 9110 §7.6.1) or to the proxy, never forwarded. */
const HOP_HEADERS = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/**
 * One call's egress proxy: an HTTP proxy on a Unix socket of its own (bound into the call's
 * sandbox, where the bridge of `@toolgate/sandbox` forwards the tool's proxy port to it) that
 * opens a `CONNECT` tunnel, or forwards a plain `http://` request, only to a host the tool
 * declares, that the call's domain rules allow, and only to addresses that pass them and are not
 * internal — the checks of `http_fetch` ({@link ConnectGuard}), made where the connection is
 * opened. A refusal is a `403` whose body says why; nothing is resolved for a refused name.
 * Bounded: {@link MAX_EGRESS_CONNECTIONS} at once, Node's header limits, and every connection
 * ends with the call ({@link close}).
 */
export class EgressProxy {
  private readonly sockets = new Set<Duplex>();
  /** Each declared name and its ports (`every`: any port). */
  private readonly hosts = new Map<string, Set<number> | 'every'>();
  /** Upstream connections open or being opened ({@link MAX_EGRESS_CONNECTIONS}). */
  private upstreams = 0;
  /** Set by {@link close}: a request whose checks end after it opens nothing. */
  private closed = false;

  private constructor(
    private readonly dir: string,
    private readonly server: http.Server,
    private readonly rules: EgressRules,
    /** The Unix socket to bind into the sandbox. */
    readonly socket: string,
  ) {
    for (const entry of rules.hosts) {
      const declared = declaredHost(entry);
      if (!declared) continue;
      const ports = this.hosts.get(declared.host);
      if (declared.port === undefined || ports === 'every') this.hosts.set(declared.host, 'every');
      else this.hosts.set(declared.host, new Set([...(ports ?? []), declared.port]));
    }
  }

  /**
   * Listens on a fresh socket in a new directory under `root` (default the OS's temporary
   * directory; the sandbox's `egressRoot`, which no sandboxed run can see, where there is one).
   */
  static async open(rules: EgressRules, root: string = os.tmpdir()): Promise<EgressProxy> {
    await fs.mkdir(root, { recursive: true, mode: 0o700 });
    const dir = await fs.mkdtemp(path.join(root, 'call-'));
    const socket = path.join(dir, 'egress.sock');
    const server = http.createServer({ requestTimeout: 0 });
    server.maxConnections = MAX_EGRESS_CONNECTIONS;
    const proxy = new EgressProxy(dir, server, rules, socket);
    server.on('connection', (s: net.Socket) => proxy.track(s));
    // Whatever a handler did not foresee ends that one connection, never the executor.
    server.on('connect', (req: http.IncomingMessage, client: Duplex, head: Buffer) => {
      proxy.tunnel(req, client, head).catch(() => client.destroy());
    });
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      proxy.forward(req, res).catch(() => res.destroy());
    });
    server.on('clientError', (err: NodeJS.ErrnoException, s: Duplex) => {
      if (!s.writable) return void s.destroy();
      if (err.code === 'HPE_HEADER_OVERFLOW') refuse(s, TOO_LARGE, 'the request head is too large');
      else refuse(s, BAD_REQUEST, 'not an HTTP request');
    });
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(socket, () => {
          server.off('error', reject);
          resolve();
        });
      });
    } catch (err) {
      await fs.rm(dir, { recursive: true, force: true });
      throw err;
    }
    return proxy;
  }

  /** Ends every connection and removes the socket. */
  async close(): Promise<void> {
    this.closed = true;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    await fs.rm(this.dir, { recursive: true, force: true });
  }

  private track(s: Duplex): void {
    this.sockets.add(s);
    s.on('close', () => this.sockets.delete(s));
    s.on('error', () => undefined);
  }

  /** `CONNECT host:port`: a tunnel to an allowed host, or a 403 saying why not. */
  private async tunnel(req: http.IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
    const target = authority(req.url ?? '');
    if (!target) return refuse(client, BAD_REQUEST, 'CONNECT needs host:port');
    const admitted = await this.admit(target.host, target.port);
    if (admitted === undefined) return void client.destroy();
    if ('status' in admitted) return refuse(client, admitted, admitted.message);
    const { host, guard, release } = admitted;
    const upstream = net.connect({ host, port: target.port, lookup: guard.lookup });
    upstream.once('close', release);
    this.track(upstream);
    upstream.once('error', (err: NodeJS.ErrnoException) => {
      if (guard.refusal) refuse(client, denied(guard.refusal), guard.refusal.message);
      else refuse(client, BAD_GATEWAY, `${target.host}:${target.port}: ${err.code ?? err.message}`);
    });
    upstream.once('connect', () => {
      upstream.removeAllListeners('error');
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    client.on('close', () => upstream.destroy());
  }

  /** An absolute-form `http://` request: forwarded to an allowed host, or a 403 saying why not. */
  private async forward(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      return answer(res, BAD_REQUEST, 'a proxied request needs an absolute http:// URL');
    }
    if (url.protocol !== 'http:') {
      return answer(
        res,
        BAD_REQUEST,
        `${url.protocol} goes through CONNECT, not a forwarded request`,
      );
    }
    const port = url.port === '' ? 80 : Number(url.port);
    if (port === 0) return answer(res, BAD_REQUEST, 'port 0 is no port to connect to');
    const admitted = await this.admit(url.hostname, port);
    if (admitted === undefined) return void res.destroy();
    if ('status' in admitted) return answer(res, admitted, admitted.message);
    const { host, guard, release } = admitted;
    const headers: Record<string, string | string[]> = {};
    // Headers `Connection` names are this hop's — but never the body's framing, which must
    // reach the upstream as the proxy read it (else the body runs into the next request).
    const listed = new Set(
      String(req.headers.connection ?? '')
        .split(',')
        .map((h) => h.trim().toLowerCase())
        .filter((h) => h !== 'content-length'),
    );
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined && !HOP_HEADERS.has(name) && !listed.has(name)) headers[name] = value;
    }
    // A body the tool sent chunked goes upstream chunked: unframed, it would run into the next
    // request on the upstream connection.
    if (req.headers['transfer-encoding'] !== undefined) headers['transfer-encoding'] = 'chunked';
    const upstream = http.request({
      host,
      port,
      method: req.method,
      path: `${url.pathname}${url.search}`,
      headers,
      lookup: guard.lookup,
      agent: false,
    });
    upstream.once('close', release);
    upstream.once('socket', (s) => this.track(s));
    // The tool gone before its answer: so is the upstream (and its count). The upstream gone
    // before the tool's body was read (an early 401 on an upload): the rest is read and dropped.
    res.once('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    upstream.once('close', () => {
      req.unpipe(upstream);
      req.resume();
    });
    // A 101 the request did not ask for (the proxy forwards no Upgrade): not carried.
    upstream.once('upgrade', (_up, socket: Duplex) => {
      socket.destroy();
      answer(
        res,
        BAD_GATEWAY,
        `${url.host}: switching protocols is not proxied; tunnel with CONNECT`,
      );
    });
    upstream.once('error', (err: NodeJS.ErrnoException) => {
      if (res.headersSent) return void res.destroy();
      if (guard.refusal) answer(res, denied(guard.refusal), guard.refusal.message);
      else answer(res, BAD_GATEWAY, `${url.host}: ${err.code ?? err.message}`);
    });
    upstream.once('response', (up) => {
      const out: string[] = [];
      for (let i = 0; i < up.rawHeaders.length; i += 2) {
        if (!HOP_HEADERS.has(up.rawHeaders[i]!.toLowerCase())) {
          out.push(up.rawHeaders[i]!, up.rawHeaders[i + 1]!);
        }
      }
      try {
        res.writeHead(up.statusCode ?? 502, up.statusMessage, out);
      } catch {
        // A status, reason or header Node will not write (a control character, a status under
        // 100): the upstream's answer is not repeated, and nothing throws out of this handler.
        up.destroy();
        return answer(res, BAD_GATEWAY, `${url.host}: an answer the proxy cannot repeat`);
      }
      up.pipe(res);
    });
    req.pipe(upstream);
  }

  /**
   * Whether a connection to `hostname` on `port` may be opened now: the canonical name to connect
   * to and the guard of its addresses; otherwise the refusal to answer — undeclared (an address
   * literal always is; a declared name on a port it is not declared on) or the rules' (403), too
   * many upstreams (503) — or undefined once the call is over (the connection is dropped).
   */
  private async admit(
    hostname: string,
    port: number,
  ): Promise<
    | { host: string; guard: ConnectGuard; release: () => void }
    | (Refusal & { message: string })
    | undefined
  > {
    const host = canonicalHost(hostname);
    const ports = host === undefined ? undefined : this.hosts.get(host);
    if (host === undefined || ports === undefined) {
      return {
        ...denied(),
        message: `${this.rules.who}: ${hostname} is not a host the tool declares`,
      };
    }
    if (ports !== 'every' && !ports.has(port)) {
      return {
        ...denied(),
        message: `${this.rules.who}: ${hostname} is declared on port${ports.size > 1 ? 's' : ''} ${[...ports].join(', ')}, not ${port}`,
      };
    }
    const { checkDomain, internal, who } = this.rules;
    try {
      await assertHostAllowed(checkDomain, internal, host, port, who);
    } catch (err) {
      const refusal =
        err instanceof ToolgateError
          ? err
          : new ToolgateError(ErrorCode.Denied, `${who}: ${host} is refused`);
      return { ...denied(refusal), message: refusal.message };
    }
    if (this.closed) return undefined;
    if (this.upstreams >= MAX_EGRESS_CONNECTIONS) return { ...TOO_MANY, message: TOO_MANY_TEXT };
    // Counted from here, in the same turn as the check (every request pipelined with this one
    // passes its own check later), until the caller's upstream closes.
    this.upstreams++;
    return {
      host,
      guard: new ConnectGuard(checkDomain, internal, port, who),
      release: () => this.upstreams--,
    };
  }
}

/** `host:port` of a CONNECT request (`[v6]:port` too); undefined when it is not one. */
function authority(target: string): { host: string; port: number } | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:[\]/\s]+):(\d{1,5})$/.exec(target);
  if (!m) return undefined;
  const port = Number(m[2]);
  if (port < 1 || port > 65_535) return undefined;
  return { host: m[1]!, port };
}

/**
 * A refusal's HTTP status and the Toolgate error code it carries in `Toolgate-Error`, so a tool can
 * tell the proxy's refusals (and their kind) from an upstream's own answers.
 */
interface Refusal {
  status: number;
  code: ErrorCode;
}
const BAD_REQUEST: Refusal = { status: 400, code: ErrorCode.InvalidRequest };
const TOO_LARGE: Refusal = { status: 431, code: ErrorCode.TooLarge };
const BAD_GATEWAY: Refusal = { status: 502, code: ErrorCode.Unavailable };
const TOO_MANY: Refusal = { status: 503, code: ErrorCode.Unavailable };
const TOO_MANY_TEXT = `more than ${MAX_EGRESS_CONNECTIONS} connections at once`;
/** A 403 with the refusal's own code (`denied`). */
function denied(refusal?: ToolgateError): Refusal {
  return { status: 403, code: refusal?.code ?? ErrorCode.Denied };
}

function refusalHeaders(refusal: Refusal, body: string): Record<string, string> {
  return {
    'Content-Type': 'text/plain; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(body)),
    'Toolgate-Error': refusal.code,
    Connection: 'close',
  };
}

/** A refusal written on a raw connection (a CONNECT, a request Node could not parse). */
function refuse(client: Duplex, refusal: Refusal, message: string): void {
  const body = `${message}\n`;
  const head = Object.entries(refusalHeaders(refusal, body))
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  client.end(
    `HTTP/1.1 ${refusal.status} ${http.STATUS_CODES[refusal.status]}\r\n${head}\r\n${body}`,
  );
}

/** A refusal answered to a forwarded request. */
function answer(res: http.ServerResponse, refusal: Refusal, message: string): void {
  const body = `${message}\n`;
  // The reason phrase given: a failed writeHead leaves the one it refused on the response.
  res.writeHead(refusal.status, http.STATUS_CODES[refusal.status], refusalHeaders(refusal, body));
  res.end(body);
}
