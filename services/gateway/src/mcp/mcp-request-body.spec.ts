import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { DEFAULT_MAX_REQUEST_BODY_SIZE } from '@modelcontextprotocol/server';
import { readMcpBody } from './mcp-request-body';

function request(method: string, body: string, headers: Record<string, string> = {}) {
  const stream = Readable.from([Buffer.from(body)]) as Readable & Partial<IncomingMessage>;
  stream.method = method;
  stream.headers = { 'content-length': String(Buffer.byteLength(body)), ...headers };
  return stream as unknown as IncomingMessage;
}

describe('readMcpBody', () => {
  it('parses a POST body within the SDK bound once', async () => {
    const call = {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'é', arguments: {} },
    };
    const req = request('POST', JSON.stringify(call));
    expect(await readMcpBody(req)).toEqual(call);
    expect(req.readableEnded).toBe(true);
  });

  it('leaves to the SDK adapter what it must bound or refuse itself: not a POST, no or a false length, too large', async () => {
    for (const req of [
      request('GET', ''),
      request('POST', '{}', { 'content-length': '' }),
      request('POST', '{}', { 'content-length': 'x' }),
      request('POST', '{}', { 'content-length': String(DEFAULT_MAX_REQUEST_BODY_SIZE + 1) }),
    ]) {
      expect(await readMcpBody(req)).toBeUndefined();
      // Unread: the adapter reads (and bounds) it.
      expect(req.readableEnded).toBe(false);
    }
  });

  it('answers undefined for a body that is not JSON (the adapter then sees an empty body)', async () => {
    const req = request('POST', '{"jsonrpc":');
    expect(await readMcpBody(req)).toBeUndefined();
    expect(req.readableEnded).toBe(true);
  });
});
