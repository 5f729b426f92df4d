import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

/**
 * The gateway reads an MCP POST's body once and hands it to the SDK parsed; what it does not read
 * (or cannot parse) the SDK still answers as it always did.
 */
describe('/mcp request bodies', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack('mcpbody');
  });
  afterAll(() => stack?.stop());

  const post = (body: string | Uint8Array, headers: Record<string, string> = {}) =>
    fetch(`${stack.all.gateway.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${TOKENS.acmeAgent}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...headers,
      },
      body,
    });

  it('answers a body that is not JSON with the JSON-RPC parse error, and a listing as before', async () => {
    const bad = await post('{"jsonrpc": "2.0", "id": 1, "method": ');
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: number } }).error.code).toBe(-32700);
    const list = await post(
      JSON.stringify({
        jsonrpc: '2.0',
        id: 2,
        method: 'tools/list',
        params: {
          _meta: {
            'io.modelcontextprotocol/protocolVersion': '2026-07-28',
            'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
            'io.modelcontextprotocol/clientCapabilities': {},
          },
        },
      }),
      { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/list' },
    );
    expect(list.status).toBe(200);
    const body = (await list.json()) as { result: { tools: { name: string }[] } };
    expect(body.result.tools.map((t) => t.name)).toContain('read_file');
  });

  const modern = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
    'io.modelcontextprotocol/clientCapabilities': {},
  };
  const rpc = (id: number, method: string, params: unknown) =>
    JSON.stringify({ jsonrpc: '2.0', id, method, params });
  const eraHeaders = (era: 'modern' | 'legacy', method: string): Record<string, string> =>
    era === 'modern'
      ? { 'mcp-protocol-version': '2026-07-28', 'mcp-method': method }
      : { 'mcp-protocol-version': '2025-11-25' };

  it('answers a body nested too deep for the SDK as an invalid request, on either era', async () => {
    const deep = `${'['.repeat(5_000)}${']'.repeat(5_000)}`;
    for (const era of ['modern', 'legacy'] as const) {
      const body = rpc(3, 'tools/list', { _meta: modern, y: 0 }).replace('"y":0', `"y":${deep}`);
      const res = await post(body, eraHeaders(era, 'tools/list'));
      expect({ era, status: res.status, body: await res.json() }).toEqual({
        era,
        status: 400,
        body: {
          jsonrpc: '2.0',
          id: 3,
          error: expect.objectContaining({
            code: -32600,
            data: expect.objectContaining({ code: 'invalid-request' }),
          }),
        },
      });
    }
  });

  it('answers params the SDK’s schema refuses as invalid params naming them, not an internal error', async () => {
    const answers = [
      await post(
        rpc(4, 'tools/list', { _meta: modern, cursor: 5 }),
        eraHeaders('modern', 'tools/list'),
      ),
      await post(rpc(5, 'tools/list', { cursor: 5 }), eraHeaders('legacy', 'tools/list')),
      await post(
        rpc(6, 'initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: 'x' }),
        eraHeaders('legacy', 'initialize'),
      ),
    ];
    for (const res of answers) {
      // The 2025-11-25 era answers as a server-sent event.
      const text = await res.text();
      const json = text.startsWith('event:')
        ? text
            .split('\n')
            .find((l) => l.startsWith('data: '))!
            .slice(6)
        : text;
      const body = JSON.parse(json) as { error?: { code: number; data?: { code?: string } } };
      expect(body.error).toMatchObject({ code: -32602, data: { code: 'invalid-request' } });
    }
  });

  it('refuses a body over the SDK’s bound with 413, unread', async () => {
    const big = new Uint8Array(4 * 1024 * 1024 + 16).fill(0x20);
    const res = await post(big);
    expect(res.status).toBe(413);
  });
});
