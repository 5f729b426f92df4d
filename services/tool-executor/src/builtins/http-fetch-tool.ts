import type { Response } from 'undici';
import { z } from 'zod';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { tool } from '@toolgate/tools';
import type { BuiltinDeps } from './builtin-deps';
import { assertHostAllowed, ConnectGuard, internalAllowance } from './connect-guard';

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
      const internal = internalAllowance(policy.http.internal, policy.http.servicePorts);
      // An agent per hop, whose guard knows the port it connects to (an internal address may be
      // opened on one port only).
      const agents: import('undici').Agent[] = [];
      try {
        for (;;) {
          // `:0` is checked as the port it is, not as the default (which the URL does not dial).
          const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
          await assertHostAllowed(deps.checkDomain, internal, url.hostname, port, 'http_fetch');
          const guard = new ConnectGuard(deps.checkDomain, internal, port, 'http_fetch');
          const agent = new (undici().Agent)({ connect: { lookup: guard.lookup } });
          agents.push(agent);
          let res: Response;
          try {
            res = await fetch(url, {
              method,
              headers,
              body,
              redirect: 'manual',
              signal,
              dispatcher: agent,
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
        await Promise.all(agents.map((agent) => agent.destroy()));
      }
    },
  });
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
