import { performance } from 'node:perf_hooks';
import {
  compilePermissionChain,
  evaluatePermission,
  matchShellCommand,
  type PermissionTool,
  type ShellPatternTables,
} from '@toolgate/permissions';
import { median } from './stats';

/**
 * Permission-chain throughput on one thread: decisions per second through a realistic chain
 * (24 rules incl. argv, domain and CEL rules, the standard preset, one async hook, the taint gate),
 * and shell commands matched per second against allow/ask/deny tables.
 */
export async function benchPermissions(opts: {
  quick: boolean;
}): Promise<{ decisionsPerSec: number; shellMatchesPerSec: number }> {
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
        {
          tool: 'shell',
          argv: ['rm -rf **', 'git push --force **', 'sudo **', 'dd **', 'mkfs **'],
        },
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
    [
      { name: 'write_file', risk: 'write' },
      { path: 'a.txt', content: 'x' },
    ],
    [{ name: 'mcp__github__create_issue' }, { title: 'bug' }],
    [{ name: 'deploy_service', risk: 'execute', needsApproval: true }, { service: 'api' }],
    [{ name: 'list_files', risk: 'read' }, { dir: '.' }],
    [{ name: 'transfer', risk: 'write' }, { amount: 50 }],
  ];
  // Measured as the median of several rounds, each a single-threaded loop awaiting one decision at
  // a time (the hook's promise is a real one: an async function). The warm-up runs the same calls
  // with the same (per-call) context as the measured loop, so the loop starts on optimised code.
  const decisions = opts.quick ? 50_000 : 200_000;
  const rounds = opts.quick ? 3 : 5;
  for (let i = 0; i < 20_000; i++) {
    const [tool, input] = calls[i % calls.length]!;
    await evaluatePermission(chain, tool, input, { agent: { agentType: 'coder' } });
  }
  const decisionRates: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const t0 = performance.now();
    for (let i = 0; i < decisions; i++) {
      const [tool, input] = calls[i % calls.length]!;
      await evaluatePermission(chain, tool, input, { agent: { agentType: 'coder' } });
    }
    decisionRates.push(decisions / ((performance.now() - t0) / 1000));
  }
  const decisionsPerSec = Math.round(median(decisionRates));

  const tables: ShellPatternTables = {
    allow: [
      'npm test **',
      'npm run *',
      'git status',
      'git diff **',
      'git log **',
      'ls **',
      'cat *',
      'grep **',
      'node *',
      'tsc **',
    ],
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
  const matches = opts.quick ? 50_000 : 200_000;
  let sink = 0;
  for (let i = 0; i < 20_000; i++)
    sink += matchShellCommand(commands[i % commands.length]!, tables).length;
  const matchRates: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const t0 = performance.now();
    for (let i = 0; i < matches; i++)
      sink += matchShellCommand(commands[i % commands.length]!, tables).length;
    matchRates.push(matches / ((performance.now() - t0) / 1000));
  }
  const shellMatchesPerSec = Math.round(median(matchRates));
  if (sink < 0) throw new Error('unreachable');
  return { decisionsPerSec, shellMatchesPerSec };
}
