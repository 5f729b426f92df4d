import {
  ErrorCode,
  fromWireError,
  HTTP_ROUTES,
  isWireError,
  NDJSON_MEDIA_TYPE,
  routePath,
  ToolgateError,
  type HttpRouteName,
} from '@toolgate/contracts';

/** The `fetch` the CLI uses; injectable so tests can point it at a real in-process gateway. */
export type FetchFn = typeof fetch;

/** One request to a route of the table: its path parameters, query and JSON body. */
export interface RouteRequest {
  params?: Record<string, string>;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
}

/**
 * The gateway's HTTP API as the CLI sees it. Every failure is a `ToolgateError`: the gateway's
 * `{ error: { code, message, details } }` body rebuilt by `fromWireError`, or `unavailable` when
 * the gateway cannot be reached. The token goes in the `Authorization` header and nowhere else.
 * Requests name a route of the contracts' route table (`HTTP_ROUTES`), which gives the method and
 * the path: the CLI writes no URL of its own.
 */
export class GatewayHttpClient {
  constructor(
    private readonly baseUrl: string,
    private readonly token: string,
    private readonly fetchFn: FetchFn = fetch,
  ) {}

  /** Calls the route `name` and answers its JSON body. */
  call<T>(name: HttpRouteName, request: RouteRequest = {}): Promise<T> {
    const { method, url } = this.target(name, request);
    return this.request<T>(method, url, request.body);
  }

  /**
   * Calls the route `name` asking for an NDJSON answer (`Accept: application/x-ndjson`) and hands
   * each line, parsed, to `onLine` as it arrives. A refusal (a non-2xx status) throws as any
   * request does.
   */
  async callLines(
    name: HttpRouteName,
    request: RouteRequest,
    onLine: (line: unknown) => void,
  ): Promise<void> {
    const { method, url } = this.target(name, request);
    const res = await this.send(method, url, request.body, NDJSON_MEDIA_TYPE);
    if (!res.ok || res.body === null) {
      await this.read(res);
      return;
    }
    const decoder = new TextDecoder();
    let buffered = '';
    const flush = (final: boolean) => {
      const lines = buffered.split('\n');
      buffered = final ? '' : (lines.pop() ?? '');
      for (const line of lines) {
        if (line.trim() === '') continue;
        let parsed: unknown;
        try {
          parsed = JSON.parse(line);
        } catch {
          throw new ToolgateError(ErrorCode.Internal, 'the gateway sent a line that is not JSON');
        }
        onLine(parsed);
      }
    };
    for await (const chunk of res.body) {
      buffered += decoder.decode(chunk as Uint8Array, { stream: true });
      flush(false);
    }
    buffered += decoder.decode();
    flush(true);
  }

  private target(name: HttpRouteName, request: RouteRequest): { method: string; url: string } {
    return {
      method: HTTP_ROUTES[name].method.toUpperCase(),
      url: withQuery(routePath(name, request.params), request.query),
    };
  }

  private async request<T>(method: string, route: string, body?: unknown): Promise<T> {
    return this.read<T>(await this.send(method, route, body, 'application/json'));
  }

  private async send(
    method: string,
    route: string,
    body: unknown,
    accept: string,
  ): Promise<Response> {
    const url = `${this.baseUrl.replace(/\/+$/, '')}${route}`;
    try {
      return await this.fetchFn(url, {
        method,
        headers: {
          authorization: `Bearer ${this.token}`,
          accept,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
    } catch (cause) {
      // The cause may hold the URL but never the token (it only travels in a header).
      throw new ToolgateError(
        ErrorCode.Unavailable,
        `cannot reach the gateway at ${this.baseUrl}`,
        { cause },
      );
    }
  }

  private async read<T>(res: Response): Promise<T> {
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      throw new ToolgateError(
        ErrorCode.Internal,
        `the gateway answered ${res.status} with a body that is not JSON`,
      );
    }
    if (res.ok) return parsed as T;
    const wire = (parsed as { error?: unknown } | undefined)?.error;
    if (isWireError(wire)) throw fromWireError(wire);
    throw new ToolgateError(
      ErrorCode.Internal,
      `the gateway answered ${res.status} without a typed error`,
    );
  }
}

function withQuery(
  route: string,
  query: Record<string, string | number | undefined> | undefined,
): string {
  if (!query) return route;
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined) params.set(k, String(v));
  const qs = params.toString();
  return qs ? `${route}?${qs}` : route;
}
