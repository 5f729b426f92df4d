import { appendFileSync, writeFileSync } from 'node:fs';
import { gzipSync, deflateSync } from 'node:zlib';
import { headers as natsHeaders } from '@nats-io/transport-node';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

const OUT = '/tmp/rt/mcp.log';
const enc = new TextEncoder();
const dec = new TextDecoder();
const log = (s: string) => appendFileSync(OUT, s + '\n');

describe('redteam mcp/bus', () => {
  let stack: TestStack;
  beforeAll(async () => {
    writeFileSync(OUT, '');
    stack = await startTestStack('rt-mcp');
  }, 60_000);
  afterAll(() => stack?.stop(), 60_000);

  async function raw(name: string, method: string, path: string, headers: Record<string, string>, body?: string | Uint8Array) {
    const t0 = Date.now();
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), 15_000);
    try {
      const res = await fetch(`${stack.all.gateway.url}${path}`, { method, headers, ...(body !== undefined ? { body } : {}), signal: ac.signal });
      const text = await res.text();
      const flag = res.status >= 500 || text.length > 500_000 || Date.now() - t0 > 10_000 || /"code":-32603|internal/.test(text) ? '!!' : '  ';
      log(`${flag} ${name} | ${method} ${path.slice(0, 80)} -> ${res.status} (${text.length}B, ${Date.now() - t0}ms) ${text.slice(0, 400).replace(/\n/g, '\\n')}`);
    } catch (err) {
      log(`!! ${name} | ${method} ${path.slice(0, 80)} -> THREW ${(err as Error).name} ${(err as Error).message} (${Date.now() - t0}ms)`);
    } finally {
      clearTimeout(timer);
    }
  }

  const META = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
    'io.modelcontextprotocol/clientCapabilities': {},
  };
  const mh = (method: string, extra: Record<string, string> = {}) => ({
    authorization: `Bearer ${TOKENS.acmeAdmin}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2026-07-28',
    'mcp-method': method,
    ...extra,
  });
  const mcp = (name: string, method: string, params: unknown, extraHeaders: Record<string, string> = {}, id: unknown = 1) =>
    raw(name, 'POST', '/mcp', mh(method, extraHeaders), JSON.stringify({ jsonrpc: '2.0', id, method, params }));
  const mp = (p: Record<string, unknown> = {}) => ({ ...p, _meta: { ...META, ...((p._meta as object) ?? {}) } });

  it('http follow-ups', async () => {
    const json = { authorization: `Bearer ${TOKENS.acmeAdmin}`, 'content-type': 'application/json' };
    const submit = (runId: string) => JSON.stringify({ runId, callId: 'c', agent: { agentType: 'a' }, tool: 'list_dir', input: {} });
    await raw('gzip good', 'POST', '/v1/dispatches', { ...json, 'content-encoding': 'gzip' }, gzipSync(submit('rtgz1')));
    await raw('gzip truncated', 'POST', '/v1/dispatches', { ...json, 'content-encoding': 'gzip' }, gzipSync(submit('rtgz2')).subarray(0, 20));
    await raw('gzip garbage', 'POST', '/v1/dispatches', { ...json, 'content-encoding': 'gzip' }, 'notgzip');
    await raw('deflate garbage', 'POST', '/v1/dispatches', { ...json, 'content-encoding': 'deflate' }, 'notdeflate');
    await raw('br garbage', 'POST', '/v1/dispatches', { ...json, 'content-encoding': 'br' }, 'x');
    await raw('gzip garbage policy', 'PUT', '/v1/policy', { ...json, 'content-encoding': 'gzip' }, 'x');
    await raw('gzip garbage script', 'PUT', '/v1/tools/scripts/rt_x', { ...json, 'content-encoding': 'gzip' }, 'x');
    await raw('gzip bomb', 'POST', '/v1/dispatches', { ...json, 'content-encoding': 'gzip' }, gzipSync(Buffer.alloc(50_000_000, 0x20)));
    await raw('deflate good', 'POST', '/v1/dispatches', { ...json, 'content-encoding': 'deflate' }, deflateSync(submit('rtgz3')));
    await raw('gzip garbage mcp', 'POST', '/mcp', { ...mh('tools/list'), 'content-encoding': 'gzip' }, 'x');
    await raw('big num input', 'POST', '/v1/dispatches', json, '{"runId":"rtbn","callId":"c","agent":{"agentType":"a"},"tool":"list_dir","input":{"n":1e400}}');
    await raw('big num evaluate', 'POST', '/v1/policy/evaluate', json, '{"tool":"list_dir","input":{"n":1e400}}');
    await raw('big num policy', 'PUT', '/v1/policy', json, '{"document":{"engine":{"deny":[{"tool":"shell","x":1e400}]}}}');
    await raw('big num register', 'POST', '/v1/tools', json, '{"tool":{"name":"rt_bn","description":"d","parameters":{"type":"object","maxProperties":1e400}}}');
    await raw('run rtbn', 'GET', '/v1/runs/rtbn', json);
    await raw('content-length lie', 'POST', '/v1/dispatches', { ...json }, '{"a":');
    // lone surrogate read-back
    const r = await fetch(`${stack.all.gateway.url}/v1/dispatches`, { method: 'POST', headers: json, body: JSON.stringify({ runId: 'rtls', callId: '\ud800', agent: { agentType: '\udc00x', label: '\ud800' }, tool: 'list_dir', input: { path: '\ud800' }, wait: 5000 }) });
    const b = (await r.json()) as { dispatchId: string };
    log(`lone surrogate submit ${r.status} ${JSON.stringify(b).slice(0, 300)}`);
    await raw('lone surrogate get', 'GET', `/v1/dispatches/${b.dispatchId}`, json);
    await raw('lone surrogate run', 'GET', `/v1/runs/rtls`, json);
    await raw('lone surrogate value', 'GET', `/v1/dispatches/${b.dispatchId}/values/input`, json);
  }, 300_000);

  it('mcp probes', async () => {
    await mcp('list ok', 'tools/list', mp());
    await raw('batch', 'POST', '/mcp', mh('tools/list'), JSON.stringify([{ jsonrpc: '2.0', id: 1, method: 'tools/list', params: mp() }, { jsonrpc: '2.0', id: 2, method: 'tools/list', params: mp() }]));
    await raw('batch empty', 'POST', '/mcp', mh('tools/list'), '[]');
    await raw('batch 1000 pings', 'POST', '/mcp', mh('ping'), JSON.stringify(Array.from({ length: 1000 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'ping', params: mp() }))));
    await raw('body null', 'POST', '/mcp', mh('tools/list'), 'null');
    await raw('body number', 'POST', '/mcp', mh('tools/list'), '42');
    await raw('body string', 'POST', '/mcp', mh('tools/list'), '"x"');
    await raw('jsonrpc 1.0', 'POST', '/mcp', mh('tools/list'), JSON.stringify({ jsonrpc: '1.0', id: 1, method: 'tools/list', params: mp() }));
    await raw('no id (notification)', 'POST', '/mcp', mh('tools/list'), JSON.stringify({ jsonrpc: '2.0', method: 'tools/list', params: mp() }));
    await mcp('id object', 'tools/list', mp(), {}, { a: 1 });
    await mcp('id null', 'tools/list', mp(), {}, null);
    await mcp('id huge string', 'tools/list', mp(), {}, 'x'.repeat(200_000));
    await mcp('id float', 'tools/list', mp(), {}, 1.5e308);
    await mcp('params array', 'tools/list', [1, 2]);
    await mcp('params string', 'tools/list', 'x');
    await mcp('unknown method', 'foo/bar', mp());
    await mcp('proto method', '__proto__', mp());
    await mcp('constructor method', 'constructor', mp());
    await mcp('toString method', 'toString', mp());
    await mcp('resources/list', 'resources/list', mp());
    await mcp('prompts/list', 'prompts/list', mp());
    await mcp('completion', 'completion/complete', mp({ ref: { type: 'ref/prompt', name: 'x' }, argument: { name: 'a', value: 'b' } }));
    await mcp('logging', 'logging/setLevel', mp({ level: 'debug' }));
    await mcp('ping', 'ping', mp());
    await mcp('discover', 'server/discover', mp());
    await mcp('initialize modern', 'initialize', mp({ protocolVersion: '2026-07-28', capabilities: {}, clientInfo: { name: 'x', version: '1' } }));
    await mcp('notif initialized', 'notifications/initialized', mp());
    await mcp('notif cancelled junk', 'notifications/cancelled', mp({ requestId: { a: 1 } }));
    await mcp('call no name', 'tools/call', mp({}));
    await mcp('call name num', 'tools/call', mp({ name: 5 }));
    await mcp('call name long', 'tools/call', mp({ name: 'x'.repeat(100_000) }));
    await mcp('call unknown', 'tools/call', mp({ name: 'nope', arguments: {} }));
    await mcp('call args array', 'tools/call', mp({ name: 'list_dir', arguments: [1] }));
    await mcp('call args string', 'tools/call', mp({ name: 'list_dir', arguments: 'x' }));
    await mcp('call bad runId meta', 'tools/call', mp({ name: 'list_dir', arguments: {}, _meta: { 'io.toolgate/runId': 'bad id!' } }));
    await mcp('call runId meta num', 'tools/call', mp({ name: 'list_dir', arguments: {}, _meta: { 'io.toolgate/runId': 5 } }));
    await mcp('call callId long', 'tools/call', mp({ name: 'list_dir', arguments: {}, _meta: { 'io.toolgate/callId': 'x'.repeat(5000) } }));
    await mcp('call callId empty', 'tools/call', mp({ name: 'list_dir', arguments: {}, _meta: { 'io.toolgate/callId': '' } }));
    await mcp('call runId empty', 'tools/call', mp({ name: 'list_dir', arguments: {}, _meta: { 'io.toolgate/runId': '' } }));
    await mcp('call traceparent obj', 'tools/call', mp({ name: 'list_dir', arguments: {}, _meta: { traceparent: { a: 1 }, 'io.toolgate/runId': 'rtm1' } }));
    await mcp('call progressToken obj', 'tools/call', mp({ name: 'list_dir', arguments: {}, _meta: { progressToken: { a: 1 }, 'io.toolgate/runId': 'rtm2' } }));
    await mcp('call requestState junk', 'tools/call', { ...mp({ name: 'list_dir', arguments: {} }), requestState: 'junk' });
    await mcp('call requestState num', 'tools/call', { ...mp({ name: 'list_dir', arguments: {} }), requestState: 5 });
    await mcp('call requestState huge', 'tools/call', { ...mp({ name: 'list_dir', arguments: {} }), requestState: 'a.'.repeat(500_000) });
    await mcp('call input responses junk', 'tools/call', { ...mp({ name: 'list_dir', arguments: {} }), inputResponses: { a: 1 } });
    await mcp('call big num args', 'tools/call', mp({ name: 'list_dir', arguments: { n: 1 } }));
    await raw('call 1e400 args', 'POST', '/mcp', mh('tools/call'), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_dir","arguments":{"n":1e400},"_meta":${JSON.stringify(META)}}}`);
    await raw('call deep args', 'POST', '/mcp', mh('tools/call'), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_dir","arguments":{"n":${'['.repeat(5000)}${']'.repeat(5000)}},"_meta":${JSON.stringify(META)}}}`);
    await raw('call args 3MB', 'POST', '/mcp', mh('tools/call'), JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: mp({ name: 'list_dir', arguments: { x: 'y'.repeat(3_000_000) }, _meta: { 'io.toolgate/runId': 'rtm3' } }) }));
    await raw('call args lone surrogate', 'POST', '/mcp', mh('tools/call'), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_dir","arguments":{"path":"\\ud800"},"_meta":${JSON.stringify({ ...META, 'io.toolgate/runId': 'rtm4' })}}}`);
    await mcp('call task ext modern', 'tools/call', mp({ name: 'list_dir', arguments: {}, _meta: { 'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } } } }));
    await mcp('tasks/get junk', 'tasks/get', mp({ taskId: 'junk' }));
    await mcp('tasks/get num', 'tasks/get', mp({ taskId: 5 }));
    await mcp('tasks/get forged', 'tasks/get', mp({ taskId: 'tgt1.run.disp.' + 'A'.repeat(43) }));
    await mcp('tasks/result junk', 'tasks/result', mp({ taskId: 'tgt1.a.b.c' }));
    await mcp('tasks/cancel junk', 'tasks/cancel', mp({ taskId: 'x'.repeat(700) }));
    await mcp('tasks/list', 'tasks/list', mp({}));
    await mcp('tasks/list cursor junk', 'tasks/list', mp({ cursor: 'zzz' }));
    await mcp('tasks/list cursor long', 'tasks/list', mp({ cursor: 'z'.repeat(1024) }));
    await mcp('tasks/update', 'tasks/update', mp({ taskId: 'x' }));
    await mcp('header method mismatch', 'tools/list', mp(), { 'mcp-method': 'tools/call' });
    await mcp('header version junk', 'tools/list', mp(), { 'mcp-protocol-version': 'garbage' });
    await mcp('header version old', 'tools/list', mp(), { 'mcp-protocol-version': '2024-11-05' });
    await raw('no accept', 'POST', '/mcp', { ...mh('tools/list'), accept: '' }, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: mp() }));
    await raw('text/plain', 'POST', '/mcp', { ...mh('tools/list'), 'content-type': 'text/plain' }, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: mp() }));
    await raw('GET mcp', 'GET', '/mcp', mh('x'));
    await raw('DELETE mcp', 'DELETE', '/mcp', mh('x'));
    await raw('PUT mcp', 'PUT', '/mcp', mh('x'), '{}');
    await raw('OPTIONS mcp', 'OPTIONS', '/mcp', mh('x'));
    await raw('mcp trailing slash', 'POST', '/mcp/', mh('tools/list'), JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: mp() }));
    await raw('mcp query', 'POST', '/mcp?x=1', mh('tools/list'), JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: mp() }));
    await raw('PRM weird path', 'GET', '/.well-known/oauth-protected-resource/%ff/../x', {});
    await raw('PRM POST', 'POST', '/.well-known/oauth-protected-resource', {}, '{}');
    await raw('PRM host header', 'GET', '/.well-known/oauth-protected-resource', { host: 'evil"host' });
    await raw('origin null', 'POST', '/mcp', { ...mh('tools/list'), origin: 'null' }, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: mp() }));
    await raw('origin junk', 'POST', '/mcp', { ...mh('tools/list'), origin: '::::' }, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: mp() }));
    // legacy era
    const lh = (m: string) => ({ ...mh(m), 'mcp-protocol-version': '2025-11-25' });
    await raw('legacy initialize', 'POST', '/mcp', lh('initialize'), JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } } }));
    await raw('legacy initialize bad', 'POST', '/mcp', lh('initialize'), JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: 5, capabilities: 'x' } }));
    await raw('legacy list', 'POST', '/mcp', lh('tools/list'), JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }));
    await raw('legacy call task junk', 'POST', '/mcp', lh('tools/call'), JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_dir', arguments: {}, task: 'junk' } }));
    await raw('legacy call task ttl huge', 'POST', '/mcp', lh('tools/call'), JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_dir', arguments: {}, task: { ttl: 1e308 } } }));
    await raw('legacy batch', 'POST', '/mcp', lh('tools/list'), JSON.stringify([{ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, { jsonrpc: '2.0', id: 2, method: 'ping' }]));
    await raw('legacy tasks/list', 'POST', '/mcp', lh('tasks/list'), JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/list', params: { cursor: 'junk' } }));
    await raw('legacy tasks/result junk', 'POST', '/mcp', lh('tasks/result'), JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/result', params: { taskId: 'tgt1.a.b.c' } }));
    await raw('legacy response msg', 'POST', '/mcp', lh('x'), JSON.stringify({ jsonrpc: '2.0', id: 1, result: {} }));
    await raw('legacy error msg', 'POST', '/mcp', lh('x'), JSON.stringify({ jsonrpc: '2.0', id: 1, error: { code: 1, message: 'x' } }));
    await raw('no version no meta list', 'POST', '/mcp', { ...mh('tools/list'), 'mcp-protocol-version': '' }, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }));
    await raw('after list', 'POST', '/mcp', mh('tools/list'), JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: mp() }));
  }, 300_000);

  it('bus probes', async () => {
    const req = async (name: string, subject: string, data: Uint8Array | string, hdrs: [string, string][] = [['Authorization', `Bearer ${TOKENS.acmeAdmin}`]]) => {
      const t0 = Date.now();
      try {
        const h = natsHeaders();
        for (const [k, v] of hdrs) h.append(k, v);
        const reply = await stack.nats.nc.request(subject, typeof data === 'string' ? enc.encode(data) : data, { timeout: 15_000, headers: h });
        const text = dec.decode(reply.data);
        const flag = text.length > 500_000 || /"internal"/.test(text) || !/^\{"ok":/.test(text) || Date.now() - t0 > 10_000 ? '!!' : '  ';
        log(`${flag} BUS ${name} | ${subject.slice(0, 100)} -> (${text.length}B, ${Date.now() - t0}ms) hdr=${reply.headers ? JSON.stringify([...reply.headers.keys()].map(k=>[k, reply.headers!.get(k)])) : ''} ${text.slice(0, 400)}`);
      } catch (err) {
        log(`!! BUS ${name} | ${subject.slice(0, 100)} -> THREW ${(err as Error).name} ${(err as Error).message} (${Date.now() - t0}ms)`);
      }
    };
    const api = (op: string) => `${stack.nats.prefix}.api.${op}`;
    await req('whoami ok', api('whoami'), '{}');
    await req('empty op token', `${stack.nats.prefix}.api.`.slice(0, -1) + '.x.', '{}');
    await req('deep subject', api('a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p'), '{}');
    await req('long subject', api('x'.repeat(5000)), '{}');
    await req('unicode subject', api('wh\u00f6ami'), '{}');
    await req('proto op', api('__proto__'), '{}');
    await req('constructor op', api('constructor'), '{}');
    await req('toString op', api('toString'), '{}');
    await req('hasOwnProperty op', api('hasOwnProperty'), '{}');
    await req('op case', api('WHOAMI'), '{}');
    await req('dup auth headers', api('whoami'), '{}', [['Authorization', `Bearer ${TOKENS.acmeAgent}`], ['Authorization', `Bearer ${TOKENS.globexAdmin}`]]);
    await req('dup auth case', api('whoami'), '{}', [['authorization', `Bearer ${TOKENS.globexAdmin}`], ['Authorization', `Bearer ${TOKENS.acmeAgent}`]]);
    await req('dup auth bad first', api('whoami'), '{}', [['Authorization', 'Bearer nope'], ['Authorization', `Bearer ${TOKENS.acmeAgent}`]]);
    await req('no auth', api('whoami'), '{}', []);
    await req('empty auth', api('whoami'), '{}', [['Authorization', '']]);
    await req('auth huge', api('whoami'), '{}', [['Authorization', 'Bearer ' + 'x'.repeat(50_000)]]);
    await req('traceparent junk', api('whoami'), '{}', [['Authorization', `Bearer ${TOKENS.acmeAdmin}`], ['traceparent', 'junk'], ['traceparent', '00-zz-zz-zz']]);
    await req('body bom', api('whoami'), '\ufeff{}');
    await req('body utf16', api('whoami'), new Uint8Array([0xff, 0xfe, 0x7b, 0x00, 0x7d, 0x00]));
    await req('body invalid utf8', api('dispatch.submit'), new Uint8Array([...enc.encode('{"runId":"rtb1","callId":"'), 0xff, 0xfe, ...enc.encode('","agent":{"agentType":"a"},"tool":"list_dir","input":{}}')]));
    await req('dup keys', api('dispatch.submit'), '{"runId":"rtb2","callId":"c","agent":{"agentType":"a"},"tool":"list_dir","input":{},"tool":"shell"}');
    await req('proto body', api('dispatch.submit'), '{"__proto__":{"tool":"shell"},"runId":"rtb3","callId":"c","agent":{"agentType":"a"},"input":{}}');
    await req('1e400 submit', api('dispatch.submit'), '{"runId":"rtb4","callId":"c","agent":{"agentType":"a"},"tool":"list_dir","input":{"n":1e400}}');
    await req('1e400 policy put', api('policy.put'), '{"document":{"engine":{"deny":[{"tool":"shell"}]}},"expectedRevision":1e400}');
    await req('policy put rev float', api('policy.put'), '{"document":{"engine":{"deny":[{"tool":"shell"}]}},"expectedRevision":1.5}');
    await req('deep 1000 body', api('policy.evaluate'), `{"tool":"list_dir","input":${'['.repeat(1000)}${']'.repeat(1000)}}`);
    await req('deep 100000 body', api('policy.evaluate'), `{"tool":"list_dir","input":${'['.repeat(100000)}${']'.repeat(100000)}}`);
    await req('deep obj 50000 submit', api('dispatch.submit'), `{"runId":"rtb5","callId":"c","agent":{"agentType":"a"},"tool":"list_dir","input":${'{"a":'.repeat(50000)}1${'}'.repeat(50000)}}`);
    await req('run.get limit big', api('run.get'), '{"runId":"rtb2","limit":1000}');
    await req('run.get cursor junk', api('run.get'), '{"runId":"rtb2","cursor":"xyz"}');
    await req('approvals list cursor obj', api('approvals.list'), '{"cursor":{"a":1}}');
    await req('approvals list key', api('approvals.list'), '{"key":"' + 'a'.repeat(64) + '","resolvedBy":"' + 'x'.repeat(5000) + '"}');
    await req('dispatch.value offset', api('dispatch.value'), '{"dispatchId":"abc","part":"input","offset":2147483646}');
    await req('await wait 300000 bad id', api('dispatch.await'), '{"runId":"rtb9","dispatchId":"nope","wait":300000}');
    await req('whatif limit 10000', api('policy.whatif'), '{"candidate":{"engine":{"deny":[{"tool":"shell"}]}},"limit":10000}');
    await req('whatif candidate deep', api('policy.whatif'), `{"candidate":{"engine":${'{"x":'.repeat(5000)}1${'}'.repeat(5000)}}}`);
    await req('import server', api('mcp.servers.import'), '{"server":"x","tools":["' + 'a'.repeat(100000) + '"]}');
    await req('scripts install big', api('tools.scripts.install'), JSON.stringify({ name: 'rt_bs', source: '// @tool rt_bs\n' + 'x'.repeat(600_000) }));
    await req('register 700k', api('tools.register'), JSON.stringify({ tool: { name: 'rt_big', description: 'd', parameters: { type: 'object', properties: Object.fromEntries(Array.from({ length: 20000 }, (_, i) => [`p${i}`, { type: 'string' }])) } } }));
    await req('whoami after', api('whoami'), '{}');
  }, 300_000);
});
