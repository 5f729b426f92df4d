import path from 'node:path';
import { runCli } from '@toolgate/cli';
import type { ImportMcpToolsResponse } from '@toolgate/contracts';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

const REPO = path.resolve(__dirname, '../../..');
const FIXTURES = path.join(REPO, 'test/src/mcp/fixtures');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

describe('toolgate mcp import', () => {
  let stack: TestStack;
  const printed: string[] = [];

  const cli = async (argv: string[], token: string = TOKENS.acmeAdmin): Promise<Run> => {
    let stdout = '';
    let stderr = '';
    const code = await runCli(argv, {
      env: { TOOLGATE_URL: stack.all.gateway.url, TOOLGATE_TOKEN: token },
      stdout: { write: (t: string) => (stdout += t) },
      stderr: { write: (t: string) => (stderr += t) },
    });
    printed.push(stdout, stderr);
    return { code, stdout, stderr };
  };

  beforeAll(async () => {
    stack = await startTestStack('mcpcli', {
      TOOLGATE_MCP_UPSTREAMS: JSON.stringify([
        {
          name: 'local',
          command: { argv: ['node', path.join(FIXTURES, 'stdio-upstream.mjs')] },
          tenants: ['acme'],
        },
      ]),
      EXECUTOR_SANDBOX_READ_PATHS: `${FIXTURES},${path.join(REPO, 'node_modules')}`,
    });
  });
  afterAll(() => stack.stop());

  it('imports the chosen tools with their risk and approval, as JSON and as a table', async () => {
    const json = await cli([
      'mcp',
      'import',
      'local',
      '--tool',
      'add',
      '--tool',
      'whoami',
      '--tool',
      'gone',
      '--risk',
      'add=write',
      '--ask',
      'add',
      '--timeout',
      '30s',
      '--json',
    ]);
    expect(json).toMatchObject({ code: 0, stderr: '' });
    const res = JSON.parse(json.stdout) as ImportMcpToolsResponse;
    expect(res.imported.map((t) => t.name).sort()).toEqual(['local__add', 'local__whoami']);
    expect(res.skipped).toEqual([{ tool: 'gone', reason: 'not served' }]);
    const tools = await stack.http('GET', '/v1/tools', TOKENS.acmeAgent);
    const add = tools.body.tools.find((t: { name: string }) => t.name === 'local__add');
    expect(add.policy).toMatchObject({
      executor: 'mcp',
      risk: 'write',
      needsApproval: true,
      timeoutMs: 30_000,
    });
    expect(add.contractHash).toBe(res.imported.find((t) => t.tool === 'add')!.contractHash);

    const table = await cli(['mcp', 'import', 'local', '--tool', 'add', '--risk', 'add=write']);
    expect(table.code).toBe(0);
    const [header, row] = table.stdout.split('\n');
    expect(header).toMatch(/^TOOL\s+UPSTREAM\s+CONTRACT/);
    expect(row).toMatch(/^local__add\s+add\s+[0-9a-f]{16}/);
    expect(table.stdout).toContain('imported 1 tool(s) from local');
  });

  it('exits 2 on bad input before any request, naming the problem', async () => {
    for (const [argv, message] of [
      [['mcp', 'import', 'local', '--risk', 'add'], /--risk must be <tool>=</],
      [['mcp', 'import', 'local', '--risk', 'add=yolo'], /--risk must be <tool>=/],
      [['mcp', 'import', 'no.such'], /server name must be/],
      [['mcp', 'import', 'local', '--timeout', 'soon'], /--timeout must be a duration/],
    ] as const) {
      const run = await cli([...argv]);
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(message);
    }
    expect((await cli(['mcp', 'import'])).code).toBe(2);
  });

  it('exits 1 with the API’s typed error: not an admin, not this tenant’s server', async () => {
    const agent = await cli(['mcp', 'import', 'local'], TOKENS.acmeAgent);
    expect(agent.code).toBe(1);
    expect(agent.stderr).toMatch(/^forbidden: /);
    const foreign = await cli(['mcp', 'import', 'local'], TOKENS.globexAdmin);
    expect(foreign.code).toBe(1);
    expect(foreign.stderr).toMatch(/^not-found: /);
    const missing = await cli(['mcp', 'import', 'elsewhere']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^not-found: /);
  });

  it('never printed a token', () => {
    const all = printed.join('');
    for (const token of Object.values(TOKENS)) expect(all).not.toContain(token);
  });
});
