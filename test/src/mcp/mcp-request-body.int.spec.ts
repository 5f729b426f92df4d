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

  it('refuses a body over the SDK’s bound with 413, unread', async () => {
    const big = new Uint8Array(4 * 1024 * 1024 + 16).fill(0x20);
    const res = await post(big);
    expect(res.status).toBe(413);
  });
});
