import { performance } from 'node:perf_hooks';
import {
  compilePermissionChain,
  evaluatePermission,
  matchShellCommand,
  type PermissionTool,
  type ShellPatternTables,
} from '@toolgate/permissions';

/**
 * Permission-chain throughput on one thread: decisions per second through a realistic chain
 * (24 rules incl. argv, domain and CEL rules, the standard preset, one async hook, the taint gate),
 * and shell commands matched per second against allow/ask/deny tables.
 */
export async function benchPermissions(opts: { quick: boolean }): Promise<{ decisionsPerSec: number; shellMatchesPerSec: number }> {
  const chain = compilePermissionChain(
    {
      hooks: [
        {
          name: 'audit-tag',
          run: async (toolName, input) => {
            if (toolName !== 'http_fetch') return undefined;
            const { url } = input as { url: string };
            return url.startsWith('https://') ? undefined : 'deny';
          },
        },
      ],
      deny: [
        { risk: 'destructive' },
        { tool: 'shell', argv: ['rm -rf **', 'git push --force **', 'sudo **', 'dd **', 'mkfs **'] },
        { domains: ['evil.example', '*.pastebin.example'] },
        { tool: ['drop_database', 'delete_bucket'] },
        { tool: 'shell', argv: ['wget **', 'nc **'] },
        { tool: 'shell', argv: ['chmod 777 **', 'chown **'] },
        { tool: 'send_email', risk: 'network' },
        { tool: 'kubectl', risk: 'execute' },
      ],
      ask: [
        { tool: ['deploy_service', 'create_release'] },
        { tool: 'shell', argv: ['npm publish **', 'git push **', 'docker **'] },
        { domains: ['*.internal.example'] },
        { risk: 'undeclared' },
        { tool: 'write_file', risk: 'write' },
        { tool: 'mcp__github__merge_pr' },
        { tool: 'shell', argv: 'kubectl apply **' },
        { tool: 'db_query', risk: 'write' },
      ],
      expressions: [
        { when: 'tool == "transfer" && input.amount > 1000', effect: 'deny' },
        { when: 'agent.agentType == "intern" && risk == "write"', effect: 'ask' },
        { when: 'tool == "http_fetch" && taint == "private"', effect: 'ask' },
      ],
      taint: { allowlist: [{ tool: 'http_fetch', target: '*.corp.example', taint: 'private' }] },
    },
    {
      preset: 'standard',
      riskOverrides: { mcp__github__create_issue: 'write' },
      deny: [{ tool: 'shell', argv: 'git reset --hard **' }],
      ask: [{ tool: 'write_file', risk: 'destructive' }],
    },
    { profileName: 'operator' },
  );

  const calls: [PermissionTool, unknown][] = [
    [{ name: 'read_file', risk: 'read' }, { path: 'src/index.ts' }],
    [{ name: 'shell', risk: 'execute' }, { command: 'npm test -- --watch=false' }],
    [{ name: 'shell', risk: 'execute' }, { command: 'git status && git diff --stat' }],
    [{ name: 'shell', risk: 'execute' }, { command: 'rm -rf build' }],
    [{ name: 'http_fetch', risk: 'network' }, { url: 'https://docs.example/api' }],
    [{ name: 'write_file', risk: 'write' }, { path: 'a.txt', content: 'x' }],
    [{ name: 'mcp__github__create_issue' }, { title: 'bug' }],
    [{ name: 'deploy_service', risk: 'execute', needsApproval: true }, { service: 'api' }],
    [{ name: 'list_files', risk: 'read' }, { dir: '.' }],
    [{ name: 'transfer', risk: 'write' }, { amount: 50 }],
  ];
  const decisions = opts.quick ? 60_000 : 400_000;
  for (let i = 0; i < 5_000; i++) {
    const [tool, input] = calls[i % calls.length]!;
    await evaluatePermission(chain, tool, input);
  }
  let t0 = performance.now();
  for (let i = 0; i < decisions; i++) {
    const [tool, input] = calls[i % calls.length]!;
    await evaluatePermission(chain, tool, input, { agent: { agentType: 'coder' } });
  }
  const decisionsPerSec = Math.round(decisions / ((performance.now() - t0) / 1000));

  const tables: ShellPatternTables = {
    allow: ['npm test **', 'npm run *', 'git status', 'git diff **', 'git log **', 'ls **', 'cat *', 'grep **', 'node *', 'tsc **'],
    ask: ['git push **', 'npm publish **'],
    deny: ['rm -rf **', 'sudo **', 'git push --force **', 'curl **'],
  };
  const commands = [
    'npm test',
    'npm run build',
    'git status && git diff --stat',
    'ls -la src | grep spec',
    "git log --oneline -n 20 --format='%h %s'",
    'cat package.json',
    'rm -rf node_modules',
    'echo $(whoami)',
    'sudo apt-get install -y jq',
    'tsc -p tsconfig.json --noEmit 2>&1 | head -50',
  ];
  const matches = opts.quick ? 100_000 : 600_000;
  let sink = 0;
  for (let i = 0; i < 10_000; i++) sink += matchShellCommand(commands[i % commands.length]!, tables).length;
  t0 = performance.now();
  for (let i = 0; i < matches; i++) sink += matchShellCommand(commands[i % commands.length]!, tables).length;
  const shellMatchesPerSec = Math.round(matches / ((performance.now() - t0) / 1000));
  if (sink < 0) throw new Error('unreachable');
  return { decisionsPerSec, shellMatchesPerSec };
}
