// @ts-check
/**
 * The gateway's HTTP API as the console uses it. The token travels in the `Authorization` header
 * only: never in a URL (so never in logs, history or a referrer), including for the event stream,
 * which is read with a streaming `fetch` because `EventSource` cannot send a header.
 */

/** The API's root, relative to the page (`/console/` → `/v1/`), so a path prefix still works. */
const API_ROOT = new URL('../v1/', document.baseURI);

/** A typed failure: the gateway's `{ error: { code, message, details } }`, or the network's. */
export class ApiError extends Error {
  /**
   * @param {number} status HTTP status (0: no answer)
   * @param {string} code
   * @param {string} message
   * @param {Record<string, unknown>} [details]
   */
  constructor(status, code, message, details = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

export class Api {
  /** @param {string} token */
  constructor(token) {
    this.token = token;
  }

  /**
   * @param {string} path relative to `/v1/`
   * @param {Record<string, string | number | undefined>} [query]
   */
  get(path, query) {
    const url = new URL(path, API_ROOT);
    for (const [k, v] of Object.entries(query ?? {})) {
      if (v !== undefined && v !== '') url.searchParams.set(k, String(v));
    }
    return this.request('GET', url);
  }

  /**
   * @param {string} path relative to `/v1/`
   * @param {unknown} body
   */
  post(path, body) {
    return this.request('POST', new URL(path, API_ROOT), body);
  }

  /**
   * @param {string} method
   * @param {URL} url
   * @param {unknown} [body]
   * @returns {Promise<any>}
   */
  async request(method, url, body) {
    /** @type {Response} */
    let res;
    try {
      res = await fetch(url, {
        method,
        headers: {
          authorization: `Bearer ${this.token}`,
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        cache: 'no-store',
        credentials: 'omit',
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch {
      throw new ApiError(0, 'unavailable', 'the gateway does not answer');
    }
    return readBody(res);
  }

  /**
   * Follows the tenant's approval events (`GET /v1/approvals/events`, server-sent events) until
   * `signal` aborts or the stream ends; `onOpen` runs once the gateway accepted the stream.
   * @param {{ onOpen(): void, onEvent(type: string, data: string): void, signal: AbortSignal }} handlers
   */
  async followEvents({ onOpen, onEvent, signal }) {
    const res = await fetch(new URL('approvals/events', API_ROOT), {
      headers: { authorization: `Bearer ${this.token}`, accept: 'text/event-stream' },
      cache: 'no-store',
      credentials: 'omit',
      signal,
    });
    if (!res.ok || !res.body) await readBody(res);
    onOpen();
    const parser = new SseParser(onEvent);
    // (The DOM typings of pipeThrough and TextDecoderStream disagree on the chunk type.)
    const reader = /** @type {ReadableStream<any>} */ (res.body)
      .pipeThrough(new TextDecoderStream())
      .getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      parser.push(value);
    }
  }
}

/**
 * The JSON of a response, or its typed error.
 * @param {Response} res
 */
async function readBody(res) {
  const text = await res.text();
  /** @type {any} */
  let parsed;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    throw new ApiError(res.status, 'internal', `the gateway answered ${res.status} without JSON`);
  }
  if (res.ok) return parsed;
  const err = parsed?.error;
  if (err && typeof err.code === 'string' && typeof err.message === 'string') {
    throw new ApiError(res.status, err.code, err.message, err.details ?? {});
  }
  throw new ApiError(res.status, 'internal', `the gateway answered ${res.status}`);
}

/**
 * The `text/event-stream` format (the HTML standard's parsing rules): lines end in CR, LF or CRLF;
 * a blank line dispatches the event; `data` lines join with LF; a line starting with `:` is a
 * comment; one space after the colon is dropped.
 */
export class SseParser {
  /** @param {(type: string, data: string) => void} onEvent */
  constructor(onEvent) {
    this.onEvent = onEvent;
    this.buffer = '';
    this.type = '';
    /** @type {string[]} */
    this.data = [];
  }

  /** @param {string} chunk */
  push(chunk) {
    this.buffer += chunk;
    for (;;) {
      const match = /\r\n|\r|\n/.exec(this.buffer);
      // A lone CR at the end may be the first half of a CRLF: wait for the next chunk.
      if (!match || (match[0] === '\r' && match.index === this.buffer.length - 1)) return;
      const line = this.buffer.slice(0, match.index);
      this.buffer = this.buffer.slice(match.index + match[0].length);
      this.line(line);
    }
  }

  /** @param {string} line */
  line(line) {
    if (line === '') {
      if (this.data.length > 0) this.onEvent(this.type || 'message', this.data.join('\n'));
      this.type = '';
      this.data = [];
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.type = value;
    else if (field === 'data') this.data.push(value);
  }
}
