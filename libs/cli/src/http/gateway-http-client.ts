import { ErrorCode, fromWireError, isWireError, ToolgateError } from '@toolgate/contracts';

/** The `fetch` the CLI uses; injectable so tests can point it at a real in-process gateway. */
export type FetchFn = typeof fetch;

/**
 * The gateway's HTTP API as the CLI sees it. Every failure is a `ToolgateError`: the gateway's
 * `{ error: { code, message, details } }` body rebuilt by `fromWireError`, or `unavailable` when
 * the gateway cannot be reached. The token goes in the `Authorization` header and nowhere else.
 */
export class GatewayHttpClient {
  constructor(
    private readonly baseUrl: string,
    private readonly token: string,
    private readonly fetchFn: FetchFn = fetch,
  ) {}

  get<T>(route: string, query?: Record<string, string | number | undefined>): Promise<T> {
    return this.request<T>('GET', withQuery(route, query));
  }

  post<T>(route: string, body: unknown): Promise<T> {
    return this.request<T>('POST', route, body);
  }

  put<T>(route: string, body: unknown): Promise<T> {
    return this.request<T>('PUT', route, body);
  }

  private async request<T>(method: string, route: string, body?: unknown): Promise<T> {
    const url = `${this.baseUrl.replace(/\/+$/, '')}${route}`;
    let res: Response;
    try {
      res = await this.fetchFn(url, {
        method,
        headers: {
          authorization: `Bearer ${this.token}`,
          accept: 'application/json',
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
