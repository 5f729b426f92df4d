import { appendFileSync, writeFileSync } from 'node:fs';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

const OUT = '/tmp/rt/http.log';
type Probe = { name: string; method: string; path: string; headers?: Record<string, string>; body?: string | Uint8Array; token?: string | null };

describe('redteam http', () => {
  let stack: TestStack;
  beforeAll(async () => {
    writeFileSync(OUT, '');
    stack = await startTestStack('rt-http');
  }, 60_000);
  afterAll(() => stack?.stop(), 60_000);

  async function probe(p: Probe) {
    const t0 = Date.now();
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), 15_000);
    let line: string;
    try {
      const token = p.token === undefined ? TOKENS.acmeAdmin : p.token;
      const res = await fetch(`${stack.all.gateway.url}${p.path}`, {
        method: p.method,
        headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(p.headers ?? {}) },
        ...(p.body !== undefined ? { body: p.body } : {}),
        signal: ac.signal,
      });
      const text = await res.text();
      const flag = res.status >= 500 || text.length > 500_000 || Date.now() - t0 > 10_000 ? '!!' : '  ';
      line = `${flag} ${p.name} | ${p.method} ${p.path.slice(0, 120)} -> ${res.status} (${text.length}B, ${Date.now() - t0}ms) ${text.slice(0, 300).replace(/\n/g, '\\n')}`;
    } catch (err) {
      line = `!! ${p.name} | ${p.method} ${p.path.slice(0, 120)} -> THREW ${(err as Error).name} ${(err as Error).message} (${Date.now() - t0}ms)`;
    } finally {
      clearTimeout(timer);
    }
    appendFileSync(OUT, line + '\n');
  }

  it('probes', async () => {
    const json = { 'content-type': 'application/json' };
    const submit = (extra: object = {}) => JSON.stringify({ runId: 'rt1', callId: 'c', agent: { agentType: 'a' }, tool: 'list_dir', input: {}, ...extra });
    const probes: Probe[] = [
      { name: 'bad pct path dispatch', method: 'GET', path: '/v1/dispatches/%ff' },
      { name: 'bad pct path run', method: 'GET', path: '/v1/runs/%E0%A4%A' },
      { name: 'bad pct approval', method: 'GET', path: '/v1/approvals/%c0%80' },
      { name: 'bad pct resolve', method: 'POST', path: '/v1/approvals/%ff/resolve', headers: json, body: '{}' },
      { name: 'bad pct script', method: 'PUT', path: '/v1/tools/scripts/%ff', headers: json, body: '{"source":"x"}' },
      { name: 'bad pct import', method: 'POST', path: '/v1/mcp/servers/%ff/import', headers: json, body: '{}' },
      { name: 'bad pct link', method: 'GET', path: '/v1/approvals/link/%ff' },
      { name: 'bad pct console', method: 'GET', path: '/console/%ff' },
      { name: 'bad pct values', method: 'GET', path: '/v1/dispatches/x/values/%ff' },
      { name: 'bad pct outcome', method: 'GET', path: '/v1/runs/%ff/dispatches/x/outcome' },
      { name: 'bad pct errorcap', method: 'POST', path: '/v1/runs/%ff/error-cap/reset', headers: json, body: '{}' },
      { name: 'query bad pct', method: 'GET', path: '/v1/approvals?runId=%ff' },
      { name: 'query nested', method: 'GET', path: '/v1/approvals?limit[a]=1&runId[b][c]=2' },
      { name: 'query array', method: 'GET', path: '/v1/approvals?limit=1&limit=2' },
      { name: 'query huge num', method: 'GET', path: '/v1/approvals?limit=99999999999999999999999' },
      { name: 'query huge minAge', method: 'GET', path: '/v1/approvals?minAgeMs=99999999999999999999999' },
      { name: 'query proto', method: 'GET', path: '/v1/approvals?__proto__=1&constructor[prototype][x]=1' },
      { name: 'query toString', method: 'GET', path: '/v1/approvals?toString=1&hasOwnProperty=1' },
      { name: 'query cursor junk', method: 'GET', path: '/v1/approvals?cursor=' + 'A'.repeat(5000) },
      { name: 'query cursor b64', method: 'GET', path: '/v1/approvals?cursor=eyJhIjoxfQ' },
      { name: 'query since junk', method: 'GET', path: '/v1/approvals?since=9999-99-99&until=x' },
      { name: 'query since far', method: 'GET', path: '/v1/approvals?since=%2B275760-09-13T00:00:00.000Z' },
      { name: 'query many params', method: 'GET', path: '/v1/approvals?' + Array.from({ length: 3000 }, (_, i) => `k${i}=1`).join('&') },
      { name: 'getApproval query junk', method: 'GET', path: '/v1/approvals/abc?dispatchId[a]=1&runId=x' },
      { name: 'getApproval query arr', method: 'GET', path: '/v1/approvals/abc?dispatchId=a&dispatchId=b&runId=x' },
      { name: 'getApproval sha', method: 'GET', path: '/v1/approvals/' + 'a'.repeat(64) + '?runId=r&dispatchId=d' },
      { name: 'run cursor junk', method: 'GET', path: '/v1/runs/abc?cursor=zzz&limit=0' },
      { name: 'run limit big', method: 'GET', path: '/v1/runs/abc?limit=99999999999' },
      { name: 'run long id', method: 'GET', path: '/v1/runs/' + 'a'.repeat(10000) },
      { name: 'dispatch long id', method: 'GET', path: '/v1/dispatches/' + 'a'.repeat(10000) },
      { name: 'value offset huge', method: 'GET', path: '/v1/dispatches/abc/values/input?offset=99999999999999999999' },
      { name: 'value offset neg', method: 'GET', path: '/v1/dispatches/abc/values/input?offset=-1' },
      { name: 'outcome wait huge', method: 'GET', path: '/v1/runs/r/dispatches/d/outcome?wait=99999999999999999999' },
      { name: 'outcome wait arr', method: 'GET', path: '/v1/runs/r/dispatches/d/outcome?wait=1&wait=2' },
      { name: 'dispatch id dots', method: 'GET', path: '/v1/dispatches/a.b.c' },
      { name: 'dispatch id star', method: 'GET', path: '/v1/dispatches/*' },
      { name: 'dispatch id gt', method: 'GET', path: '/v1/dispatches/%3E' },
      { name: 'run id gt', method: 'GET', path: '/v1/runs/%3E' },
      { name: 'run id star', method: 'GET', path: '/v1/runs/a*' },
      { name: 'values part weird', method: 'GET', path: '/v1/dispatches/a/values/__proto__' },
      { name: 'gzip bad', method: 'POST', path: '/v1/dispatches', headers: { ...json, 'content-encoding': 'gzip' }, body: 'notgzip' },
      { name: 'br', method: 'POST', path: '/v1/dispatches', headers: { ...json, 'content-encoding': 'br' }, body: 'x' },
      { name: 'enc junk', method: 'POST', path: '/v1/dispatches', headers: { ...json, 'content-encoding': 'x-weird' }, body: submit() },
      { name: 'charset latin1', method: 'POST', path: '/v1/dispatches', headers: { 'content-type': 'application/json; charset=latin1' }, body: submit() },
      { name: 'charset junk', method: 'POST', path: '/v1/dispatches', headers: { 'content-type': 'application/json; charset=x-foo' }, body: submit() },
      { name: 'ct vnd+json', method: 'POST', path: '/v1/dispatches', headers: { 'content-type': 'application/vnd.api+json' }, body: submit() },
      { name: 'ct malformed', method: 'POST', path: '/v1/dispatches', headers: { 'content-type': 'application/json;;;=' }, body: submit() },
      { name: 'ct multipart', method: 'POST', path: '/v1/dispatches', headers: { 'content-type': 'multipart/form-data; boundary=x' }, body: '--x\r\n\r\n--x--' },
      { name: 'urlencoded', method: 'POST', path: '/v1/dispatches', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'runId=a&callId=b' },
      { name: 'body null', method: 'POST', path: '/v1/dispatches', headers: json, body: 'null' },
      { name: 'body num', method: 'POST', path: '/v1/dispatches', headers: json, body: '1' },
      { name: 'body str', method: 'POST', path: '/v1/dispatches', headers: json, body: '"x"' },
      { name: 'body bom', method: 'POST', path: '/v1/dispatches', headers: json, body: '\ufeff' + submit({ runId: 'rtbom' }) },
      { name: 'dup keys', method: 'POST', path: '/v1/dispatches', headers: json, body: '{"runId":"rt2","runId":"bad id!","callId":"c","agent":{"agentType":"a"},"tool":"list_dir","input":{}}' },
      { name: 'proto key', method: 'POST', path: '/v1/dispatches', headers: json, body: '{"__proto__":{"runId":"x"},"runId":"rt3","callId":"c","agent":{"agentType":"a"},"tool":"list_dir","input":{"__proto__":{"a":1}}}' },
      { name: 'lone surrogate callId', method: 'POST', path: '/v1/dispatches', headers: json, body: submit({ runId: 'rt4', callId: '\ud800' }) },
      { name: 'lone surrogate input', method: 'POST', path: '/v1/dispatches', headers: json, body: submit({ runId: 'rt5', input: { path: '\udfff' } }) },
      { name: 'lone surrogate key', method: 'POST', path: '/v1/dispatches', headers: json, body: '{"runId":"rt6","callId":"c","agent":{"agentType":"\\ud800"},"tool":"list_dir","input":{"\\ud800":1}}' },
      { name: 'nul callId', method: 'POST', path: '/v1/dispatches', headers: json, body: submit({ runId: 'rt7', callId: '\u0000\u0000' }) },
      { name: 'big number input', method: 'POST', path: '/v1/dispatches', headers: json, body: '{"runId":"rt8","callId":"c","agent":{"agentType":"a"},"tool":"list_dir","input":{"n":1e400,"m":-1e400,"k":123456789012345678901234567890}}' },
      { name: 'wait float', method: 'POST', path: '/v1/dispatches', headers: json, body: submit({ runId: 'rt9', wait: 1e-300 }) },
      { name: 'wait neg zero', method: 'POST', path: '/v1/dispatches', headers: json, body: submit({ runId: 'rt10', wait: -0 }) },
      { name: 'wait 1e21', method: 'POST', path: '/v1/dispatches', headers: json, body: '{"runId":"rt11","callId":"c","agent":{"agentType":"a"},"tool":"list_dir","input":{},"wait":1e21}' },
      { name: 'deep 99', method: 'POST', path: '/v1/dispatches', headers: json, body: submit({ runId: 'rt12', input: JSON.parse('['.repeat(99) + ']'.repeat(99)) }) },
      { name: 'wide input', method: 'POST', path: '/v1/dispatches', headers: json, body: submit({ runId: 'rt13', input: Object.fromEntries(Array.from({ length: 8000 }, (_, i) => [`k${i}`, i])) }) },
      { name: 'many short strings', method: 'POST', path: '/v1/dispatches', headers: json, body: submit({ runId: 'rt14', input: Array.from({ length: 30000 }, () => 0) }) },
      { name: 'traceparent junk', method: 'POST', path: '/v1/dispatches', headers: { ...json, traceparent: '00-' + 'z'.repeat(32) + '-' + '0'.repeat(16) + '-01', tracestate: 'a'.repeat(5000) }, body: submit({ runId: 'rt15' }) },
      { name: 'traceparent zeros', method: 'POST', path: '/v1/dispatches', headers: { ...json, traceparent: '00-00000000000000000000000000000000-0000000000000000-01' }, body: submit({ runId: 'rt16' }) },
      { name: 'baggage huge', method: 'POST', path: '/v1/dispatches', headers: { ...json, baggage: 'k=' + 'v'.repeat(7000) }, body: submit({ runId: 'rt17' }) },
      { name: 'auth lowercase bearer', method: 'GET', path: '/v1/whoami', token: null, headers: { authorization: 'bearer ' + TOKENS.acmeAdmin } },
      { name: 'auth basic', method: 'GET', path: '/v1/whoami', token: null, headers: { authorization: 'Basic eDp5' } },
      { name: 'auth double space', method: 'GET', path: '/v1/whoami', token: null, headers: { authorization: 'Bearer  ' + TOKENS.acmeAdmin } },
      { name: 'auth huge', method: 'GET', path: '/v1/whoami', token: null, headers: { authorization: 'Bearer ' + 'x'.repeat(12000) } },
      { name: 'auth latin1', method: 'GET', path: '/v1/whoami', token: null, headers: { authorization: 'Bearer \u00e9\u00ff' } },
      { name: 'HEAD tools', method: 'HEAD', path: '/v1/tools' },
      { name: 'OPTIONS tools', method: 'OPTIONS', path: '/v1/tools' },
      { name: 'TRACE', method: 'PATCH', path: '/v1/policy', headers: json, body: '{}' },
      { name: 'whatif ndjson bad', method: 'POST', path: '/v1/policy/whatif', headers: { ...json, accept: 'application/x-ndjson' }, body: '{"candidate":{"engine":{"deny":[{"tool":"shell"}]}},"runId":"zz","since":"junk"}' },
      { name: 'whatif no runId', method: 'POST', path: '/v1/policy/whatif', headers: { ...json }, body: '{"candidate":{}}' },
      { name: 'whatif limit big', method: 'POST', path: '/v1/policy/whatif', headers: { ...json }, body: '{"candidate":{},"limit":1e9}' },
      { name: 'whatif since future', method: 'POST', path: '/v1/policy/whatif', headers: { ...json }, body: '{"candidate":{},"since":"+275760-09-13T00:00:00.000Z"}' },
      { name: 'whatif since epoch', method: 'POST', path: '/v1/policy/whatif', headers: { ...json }, body: '{"candidate":{},"since":"1970-01-01T00:00:00.000Z"}' },
      { name: 'evaluate deep', method: 'POST', path: '/v1/policy/evaluate', headers: json, body: JSON.stringify({ tool: 'shell', input: { command: 'ls ' + '$('.repeat(5000) + ')'.repeat(5000) } }) },
      { name: 'evaluate argv long', method: 'POST', path: '/v1/policy/evaluate', headers: json, body: JSON.stringify({ tool: 'shell', input: { command: Array.from({ length: 20000 }, () => 'a').join(' && ') } }) },
      { name: 'evaluate shell heredoc', method: 'POST', path: '/v1/policy/evaluate', headers: json, body: JSON.stringify({ tool: 'shell', input: { command: 'cat <<EOF\n' + 'x\n'.repeat(100) } }) },
      { name: 'evaluate shell weird', method: 'POST', path: '/v1/policy/evaluate', headers: json, body: JSON.stringify({ tool: 'shell', input: { command: '"unterminated ${ `' } }) },
      { name: 'evaluate shell non-string', method: 'POST', path: '/v1/policy/evaluate', headers: json, body: JSON.stringify({ tool: 'shell', input: { command: { a: 1 } } }) },
      { name: 'evaluate path weird', method: 'POST', path: '/v1/policy/evaluate', headers: json, body: JSON.stringify({ tool: 'read_file', input: { path: '\u0000/../../etc/passwd' } }) },
      { name: 'evaluate fetch url', method: 'POST', path: '/v1/policy/evaluate', headers: json, body: JSON.stringify({ tool: 'http_fetch', input: { url: 'http://[::1' } }) },
      { name: 'evaluate fetch url2', method: 'POST', path: '/v1/policy/evaluate', headers: json, body: JSON.stringify({ tool: 'http_fetch', input: { url: 'http://' + 'a.'.repeat(2000) + 'com' } }) },
      { name: 'evaluate fetch obj', method: 'POST', path: '/v1/policy/evaluate', headers: json, body: JSON.stringify({ tool: 'http_fetch', input: { url: ['x'] } }) },
      { name: 'put policy regex', method: 'PUT', path: '/v1/policy', headers: json, body: JSON.stringify({ document: { engine: { deny: [{ tool: 'shell', argv: '(a+)+$' }] } } }) },
      { name: 'register weird schema', method: 'POST', path: '/v1/tools', headers: json, body: JSON.stringify({ tool: { name: 'rt_a', description: 'd', parameters: { type: 'object', properties: { a: { $ref: '#/definitions/x' } } } } }) },
      { name: 'register recursive ref', method: 'POST', path: '/v1/tools', headers: json, body: JSON.stringify({ tool: { name: 'rt_b', description: 'd', parameters: { $ref: '#' } } }) },
      { name: 'register pattern bad', method: 'POST', path: '/v1/tools', headers: json, body: JSON.stringify({ tool: { name: 'rt_c', description: 'd', parameters: { type: 'object', properties: { a: { type: 'string', pattern: '(' } } } } }) },
      { name: 'register remote $id', method: 'POST', path: '/v1/tools', headers: json, body: JSON.stringify({ tool: { name: 'rt_d', description: 'd', parameters: { $schema: 'http://example.com/x', type: 'object' } } }) },
      { name: 'register format unknown', method: 'POST', path: '/v1/tools', headers: json, body: JSON.stringify({ tool: { name: 'rt_e', description: 'd', parameters: { type: 'object', properties: { a: { type: 'string', format: 'zzz' } } } } }) },
      { name: 'register bad keyword', method: 'POST', path: '/v1/tools', headers: json, body: JSON.stringify({ tool: { name: 'rt_f', description: 'd', parameters: { type: 'object', minProperties: 'x' } } }) },
      { name: 'register type array', method: 'POST', path: '/v1/tools', headers: json, body: JSON.stringify({ tool: { name: 'rt_g', description: 'd', parameters: { type: ['object', 'null'] } } }) },
      { name: 'register ref to nowhere', method: 'POST', path: '/v1/tools', headers: json, body: JSON.stringify({ tool: { name: 'rt_h', description: 'd', parameters: { $ref: 'http://127.0.0.1:1/x.json' } } }) },
      { name: 'register huge desc', method: 'POST', path: '/v1/tools', headers: json, body: JSON.stringify({ tool: { name: 'rt_i', description: 'd'.repeat(90000), parameters: { type: 'object' } } }) },
      { name: 'register executor subprocess', method: 'POST', path: '/v1/tools', headers: json, body: JSON.stringify({ tool: { name: 'rt_j', description: 'd', parameters: { type: 'object' }, policy: { executor: 'subprocess', command: { argv: [] } } } }) },
      { name: 'register executor container', method: 'POST', path: '/v1/tools', headers: json, body: JSON.stringify({ tool: { name: 'rt_k', description: 'd', parameters: { type: 'object' }, policy: { executor: 'container', container: {} } } }) },
      { name: 'register executor mcp', method: 'POST', path: '/v1/tools', headers: json, body: JSON.stringify({ tool: { name: 'rt_l', description: 'd', parameters: { type: 'object' }, policy: { executor: 'mcp' } } }) },
      { name: 'register timeout huge', method: 'POST', path: '/v1/tools', headers: json, body: JSON.stringify({ tool: { name: 'rt_m', description: 'd', parameters: { type: 'object' }, policy: { executor: 'remote', timeoutMs: 1e308 } } }) },
      { name: 'script weird src', method: 'PUT', path: '/v1/tools/scripts/rt_s', headers: json, body: JSON.stringify({ source: 'while(true){}' }) },
      { name: 'script import', method: 'PUT', path: '/v1/tools/scripts/rt_s2', headers: json, body: JSON.stringify({ source: 'import x from "fs"; export default function run(){}' }) },
      { name: 'script syntax', method: 'PUT', path: '/v1/tools/scripts/rt_s3', headers: json, body: JSON.stringify({ source: '}}}{{{', sidecar: { parameters: { $ref: '#' } } }) },
      { name: 'script name dots', method: 'PUT', path: '/v1/tools/scripts/..%2f..%2fetc', headers: json, body: JSON.stringify({ source: 'export default function run(){}' }) },
      { name: 'script sidecar junk', method: 'PUT', path: '/v1/tools/scripts/rt_s4', headers: json, body: JSON.stringify({ source: 'export default function run(){}', sidecar: { description: 1, parameters: 'x', policy: { risk: 7 } } }) },
      { name: 'script big', method: 'PUT', path: '/v1/tools/scripts/rt_s5', headers: json, body: JSON.stringify({ source: '//' + 'x'.repeat(400000) }) },
      { name: 'import unknown server', method: 'POST', path: '/v1/mcp/servers/nope/import', headers: json, body: '{}' },
      { name: 'import body array', method: 'POST', path: '/v1/mcp/servers/nope/import', headers: json, body: '[]' },
      { name: 'import server proto', method: 'POST', path: '/v1/mcp/servers/__proto__/import', headers: json, body: '{}' },
      { name: 'import server ctor', method: 'POST', path: '/v1/mcp/servers/constructor/import', headers: json, body: '{}' },
      { name: 'import server toString', method: 'POST', path: '/v1/mcp/servers/toString/import', headers: json, body: '{}' },
      { name: 'import server hasOwnProperty', method: 'POST', path: '/v1/mcp/servers/hasOwnProperty/import', headers: json, body: '{}' },
      { name: 'approvals proto key', method: 'GET', path: '/v1/approvals/__proto__?runId=a&dispatchId=b' },
      { name: 'resolve proto key', method: 'POST', path: '/v1/approvals/__proto__/resolve', headers: json, body: '{"decision":"allow","dispatchId":"x","runId":"y"}' },
      { name: 'resolve decision obj', method: 'POST', path: '/v1/approvals/abc/resolve', headers: json, body: '{"decision":{"toString":1},"dispatchId":"x","runId":"y"}' },
      { name: 'resolve reason huge', method: 'POST', path: '/v1/approvals/abc/resolve', headers: json, body: JSON.stringify({ decision: 'allow', dispatchId: 'x', runId: 'y', reason: 'r'.repeat(90000) }) },
      { name: 'link token junk', method: 'GET', path: '/v1/approvals/link/' + 'a.'.repeat(3000) },
      { name: 'link post junk', method: 'POST', path: '/v1/approvals/link/abc', token: null },
      { name: 'console traversal', method: 'GET', path: '/console/..%2f..%2fpackage.json' },
      { name: 'console dotfile', method: 'GET', path: '/console/.env' },
      { name: 'console proto', method: 'GET', path: '/console/__proto__' },
      { name: 'openapi', method: 'GET', path: '/v1/openapi.json' },
      { name: 'metrics', method: 'GET', path: '/metrics' },
      { name: 'errorcap body arr', method: 'POST', path: '/v1/runs/abc/error-cap/reset', headers: json, body: '[1,2]' },
      { name: 'errorcap reason huge', method: 'POST', path: '/v1/runs/abc/error-cap/reset', headers: json, body: JSON.stringify({ reason: 'r'.repeat(99000) }) },
      { name: 'errorcap run gt', method: 'POST', path: '/v1/runs/%3E/error-cap/reset', headers: json, body: '{}' },
      { name: 'double slash', method: 'GET', path: '//v1//tools' },
      { name: 'trailing slash', method: 'GET', path: '/v1/tools/' },
      { name: 'encoded slash dispatch', method: 'GET', path: '/v1/dispatches/a%2Fb' },
      { name: 'absolute-form url', method: 'GET', path: '/v1/whoami?x=%' },
    ];
    for (const p of probes) await probe(p);
    // health check at the end
    await probe({ name: 'after: whoami', method: 'GET', path: '/v1/whoami' });
    for (const s of [stack.all.gateway, stack.all.evaluator, stack.all.journal]) {
      const r = await fetch(`${s.url}/readyz`);
      appendFileSync(OUT, `ready ${s.name} ${r.status}\n`);
    }
  }, 600_000);
});
