import { promises as dns, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import type { Agent, Response } from 'undici';
import { z } from 'zod';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { canonicalHost } from '@toolgate/permissions';
import { tool } from '@toolgate/tools';
import type { BuiltinDeps, CheckDomain } from './builtin-deps';
import { InternalAllowance, NO_INTERNAL_ADDRESSES, routesToThisHost } from './internal-addresses';

const isHttpUrl = (value: string): boolean => {
  try {
    const u = new URL(value);
    return u.protocol === 'http:' || u.protocol === 'https:';
  } catch {
    return false;
  }
};

const HeaderName = z
  .string()
  .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, { message: 'not a valid header name' });

const HttpFetchParams = z.object({
  url: z
    .string()
    .min(1)
    .max(8192)
    .refine(isHttpUrl, { message: 'must be an absolute http:// or https:// URL' })
    .describe('An absolute http:// or https:// URL.'),
  method: z.enum(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']).default('GET'),
  headers: z.record(HeaderName, z.string().max(8192)).optional(),
  body: z.string().optional().describe('Request body (UTF-8); not allowed with GET or HEAD.'),
});

/** What http_fetch returns. */
export interface HttpFetchResult {
  status: number;
  statusText: string;
  /** The URL of the final response, after redirects. */
  url: string;
  headers: Record<string, string>;
  body: string;
  /** The body went over the output cap and was cut. */
  truncated: boolean;
  /** Every URL redirected to, in order. */
  redirects: string[];
}

/** Headers that carry credentials; never forwarded to a different origin on a redirect. */
const CREDENTIAL_HEADERS = ['authorization', 'cookie', 'proxy-authorization'];

/**
 * undici, loaded with the first request rather than with the executor: most executors (and every
 * test stack that never fetches) would load it for nothing. The same module either way.
 */
let undiciModule: typeof import('undici') | undefined;
function undici(): typeof import('undici') {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (undiciModule ??= require('undici') as typeof import('undici'));
}

/**
 * `http_fetch`: one HTTP(S) request. Domain rules are enforced here rather than advisory, on the
 * canonical host (`canonicalHost`: every IPv4 and IPv6 spelling of an address is one host): the
 * URL's host is checked before anything is resolved, then every address it resolves to is checked
 * inside the connection's own `lookup`, so the socket connects to exactly the addresses that were
 * allowed (TLS still verifies the name) and nothing resolves the name a second time in between.
 * Every redirect hop goes through both checks: redirects are followed by hand, never by the client.
 * Body capped; deadline from the policy and the dispatch's signal.
 */
export function createHttpFetchTool(deps: BuiltinDeps) {
  return tool({
    name: 'http_fetch',
    description:
      'Make one HTTP(S) request (GET by default) and return status, headers and the UTF-8 body (capped). ' +
      'Hosts are checked against the domain rules before connecting, redirects included.',
    parameters: HttpFetchParams,
    risk: 'network',
    async execute(args, ctx): Promise<HttpFetchResult> {
      const policy = deps.policyFor(ctx);
      if (args.body !== undefined && (args.method === 'GET' || args.method === 'HEAD')) {
        throw new ToolgateError(
          ErrorCode.ModelRetry,
          `http_fetch: a ${args.method} request cannot have a body`,
        );
      }
      const { fetch, Headers } = undici();
      const signal = AbortSignal.any([ctx.signal, AbortSignal.timeout(policy.http.timeoutMs)]);
      let url = new URL(args.url);
      let method: string = args.method;
      let body: string | undefined = args.body;
      const headers = new Headers(args.headers ?? {});
      const redirects: string[] = [];
      const internal = internalAllowance(policy.http.internal);
      const guard = new ConnectGuard(deps.checkDomain, internal);
      try {
        for (;;) {
          await assertHostAllowed(deps.checkDomain, internal, url);
          let res: Response;
          try {
            res = await fetch(url, {
              method,
              headers,
              body,
              redirect: 'manual',
              signal,
              dispatcher: guard.agent,
            });
          } catch (err) {
            throw guard.refusal ?? fetchError(url, err, ctx.signal, policy.http.timeoutMs);
          }
          const location = res.headers.get('location');
          if (res.status >= 300 && res.status < 400 && location !== null) {
            await res.body?.cancel();
            if (redirects.length >= policy.http.maxRedirects) {
              throw new ToolgateError(
                ErrorCode.ToolFailed,
                `http_fetch: more than ${policy.http.maxRedirects} redirects`,
                {
                  details: { redirects },
                },
              );
            }
            let next: URL;
            try {
              next = new URL(location, url);
            } catch {
              throw new ToolgateError(
                ErrorCode.ToolFailed,
                'http_fetch: the redirect location is not a URL',
              );
            }
            if (next.protocol !== 'http:' && next.protocol !== 'https:') {
              throw new ToolgateError(
                ErrorCode.Denied,
                `http_fetch: redirect to a ${next.protocol} URL refused`,
                {
                  details: { redirects },
                },
              );
            }
            if (next.origin !== url.origin) for (const h of CREDENTIAL_HEADERS) headers.delete(h);
            // RFC 9110 §15.4: 303 turns into GET; 301/302 after POST do too in every client.
            if (
              res.status === 303 ||
              ((res.status === 301 || res.status === 302) && method === 'POST')
            ) {
              if (method !== 'HEAD') method = 'GET';
              body = undefined;
              headers.delete('content-type');
              headers.delete('content-length');
            }
            redirects.push(next.href);
            url = next;
            continue;
          }
          const { text, truncated } = await readCapped(
            res,
            policy.maxOutputBytes,
            url,
            ctx.signal,
            policy.http.timeoutMs,
          );
          const outHeaders: Record<string, string> = {};
          res.headers.forEach((value, name) => {
            outHeaders[name] = value;
          });
          return {
            status: res.status,
            statusText: res.statusText,
            url: url.href,
            headers: outHeaders,
            body: text,
            truncated,
            redirects,
          };
        }
      } finally {
        await guard.agent.destroy();
      }
    },
  });
}

/**
 * The connection half of the domain check: an undici agent whose sockets resolve names through
 * {@link ConnectGuard.lookup}, which checks every address before handing it to the socket. The
 * first refusal is kept so the call fails with it rather than with undici's generic error.
 */
class ConnectGuard {
  refusal: ToolgateError | undefined = undefined;
  readonly agent: Agent;

  constructor(
    private readonly checkDomain: CheckDomain,
    private readonly internal: InternalAllowance,
  ) {
    this.agent = new (undici().Agent)({ connect: { lookup: this.lookup } });
  }

  private readonly lookup: LookupFunction = (hostname, options, callback) => {
    this.allowedAddresses(hostname, options.family).then(
      (addresses) => {
        if (options.all) callback(null, addresses);
        else callback(null, addresses[0]!.address, addresses[0]!.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, '', 0),
    );
  };

  private async allowedAddresses(
    hostname: string,
    family: number | string | undefined,
  ): Promise<LookupAddress[]> {
    const bare = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
    const literal = isIP(bare);
    const addresses: LookupAddress[] =
      literal !== 0
        ? [{ address: bare, family: literal }]
        : // The canonical name (`LocalHost.` is `localhost`): what the rules saw is what resolves.
          await dns.lookup(canonicalHost(bare) ?? bare, {
            all: true,
            family: lookupFamily(family),
          });
    if (addresses.length === 0) throw Object.assign(new Error('no address'), { code: 'ENOTFOUND' });
    // Every address must pass: a name that resolves to an allowed and a denied address is refused,
    // whichever of them the socket would have tried first.
    for (const a of addresses) {
      const host = canonicalHost(a.address);
      const refused =
        host === undefined ? 'rules' : await addressRefusal(this.checkDomain, this.internal, host);
      if (refused) {
        const address = host ?? a.address;
        this.refusal ??= new ToolgateError(
          ErrorCode.Denied,
          refused === 'internal'
            ? `http_fetch: host ${bare} resolves to ${address}, ${INTERNAL_REFUSAL}`
            : `http_fetch: host ${bare} resolves to ${address}, which the domain rules do not allow`,
          {
            details: {
              host: bare,
              address,
              ...(refused === 'internal' ? { internal: true } : {}),
            },
          },
        );
        throw Object.assign(new Error(this.refusal.message), { code: 'EACCES' });
      }
    }
    return addresses;
  }
}

function lookupFamily(family: number | string | undefined): 0 | 4 | 6 {
  if (family === 4 || family === 'IPv4') return 4;
  if (family === 6 || family === 'IPv6') return 6;
  return 0;
}

async function verdictOf(checkDomain: CheckDomain, host: string): Promise<unknown> {
  try {
    return await checkDomain(host);
  } catch {
    return 'deny'; // fail closed
  }
}

/** How loopback is named in domain rules: an address routed to this host must pass all three. */
const LOOPBACK_NAMES = ['127.0.0.1', '::1', 'localhost'];

/** Why an internal address is refused, after "host X is" or "host X resolves to Y,". */
const INTERNAL_REFUSAL =
  'an internal address (loopback, this host, a private, link-local or reserved network): the executor connects to one only when EXECUTOR_FETCH_INTERNAL names it';

/** The cached allowance of a policy's `http.internal` (one array per parsed policy). */
const allowances = new WeakMap<readonly string[], InternalAllowance>();
function internalAllowance(entries: readonly string[]): InternalAllowance {
  if (entries.length === 0) return NO_INTERNAL_ADDRESSES;
  let allowance = allowances.get(entries);
  if (!allowance) allowances.set(entries, (allowance = new InternalAllowance(entries)));
  return allowance;
}

/**
 * Why connecting to an address is refused, if it is: an internal one the operator did not name
 * (`internal`, checked first: no domain rule opens it), or the domain rules (`rules`) — on the
 * address itself and, when it reaches this machine whatever its spelling
 * ({@link routesToThisHost}), on loopback under each name a rule may give it, so `http://0/`,
 * `[::]` or the host's own address meet a rule denying `127.0.0.0/8`, `::1` or `localhost`.
 * Decided on the address, not the spelling.
 */
async function addressRefusal(
  checkDomain: CheckDomain,
  internal: InternalAllowance,
  host: string,
): Promise<'internal' | 'rules' | undefined> {
  if (internal.refuses(host)) return 'internal';
  // A loopback address names itself; any other way to this machine is loopback by another name.
  const hosts = routesToThisHost(host) && !isLoopback(host) ? [host, ...LOOPBACK_NAMES] : [host];
  for (const h of hosts) {
    const verdict = await verdictOf(checkDomain, h);
    if (verdict !== 'allow') return 'rules';
  }
  return undefined;
}

function isLoopback(host: string): boolean {
  return host === '::1' || (isIP(host) === 4 && host.startsWith('127.'));
}

async function assertHostAllowed(
  checkDomain: CheckDomain,
  internal: InternalAllowance,
  url: URL,
): Promise<void> {
  const host = canonicalHost(url.hostname);
  // An address literal never reaches the connection's lookup: it is decided here, in full.
  const refused = host === undefined ? 'rules' : await addressRefusal(checkDomain, internal, host);
  if (refused === 'internal') {
    throw new ToolgateError(ErrorCode.Denied, `http_fetch: host ${host} is ${INTERNAL_REFUSAL}`, {
      details: { host, internal: true },
    });
  }
  if (refused) {
    throw new ToolgateError(
      ErrorCode.Denied,
      `http_fetch: host ${host ?? url.hostname} is not allowed by the domain rules`,
      { details: { host: host ?? url.hostname } },
    );
  }
}

async function readCapped(
  res: Response,
  cap: number,
  url: URL,
  callerSignal: AbortSignal,
  timeoutMs: number,
): Promise<{ text: string; truncated: boolean }> {
  if (!res.body) return { text: '', truncated: false };
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let truncated = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      const room = cap - size;
      if (value.length > room) {
        chunks.push(value.subarray(0, room));
        size = cap;
        truncated = true;
        break;
      }
      chunks.push(value);
      size += value.length;
    }
  } catch (err) {
    throw fetchError(url, err, callerSignal, timeoutMs);
  } finally {
    if (truncated) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
  return { text: Buffer.concat(chunks).toString('utf8'), truncated };
}

function fetchError(
  url: URL,
  err: unknown,
  callerSignal: AbortSignal,
  timeoutMs: number,
): ToolgateError {
  if (callerSignal.aborted)
    return new ToolgateError(ErrorCode.Cancelled, 'http_fetch was cancelled');
  const name = (err as { name?: string } | undefined)?.name;
  if (name === 'TimeoutError') {
    return new ToolgateError(
      ErrorCode.Timeout,
      `http_fetch: ${url.host} did not answer within ${timeoutMs} ms`,
    );
  }
  // undici hides the reason in `cause` (ECONNREFUSED, ENOTFOUND, certificate errors…).
  const cause = (err as { cause?: { code?: string } } | undefined)?.cause?.code;
  return new ToolgateError(
    ErrorCode.ToolFailed,
    `http_fetch: request to ${url.host} failed${cause ? ` (${cause})` : ''}`,
    {
      details: { host: url.host, ...(cause ? { errno: cause } : {}) },
    },
  );
}
