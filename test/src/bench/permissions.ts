import { performance } from 'node:perf_hooks';
import {
  compilePermissionChain,
  evaluatePermission,
  matchShellCommand,
  type ExpressionRule,
  type PermissionChain,
  type PermissionRule,
  type PermissionTool,
  type ShellPatternTables,
} from '@toolgate/permissions';
import { median } from './stats';

/**
 * Permission-chain throughput on one thread: decisions per second through a realistic chain
 * (24 rules incl. argv, domain and CEL rules, the standard preset, one async hook, the taint gate),
 * the same calls through that chain with 980 more rules in front of its own (`decisionsPerSec1kRules`:
 * what indexing the rules by tool and the shell rules by program is for), and shell commands
 * matched per second against allow/ask/deny tables.
 */
export async function benchPermissions(opts: { quick: boolean }): Promise<{
  decisionsPerSec: number;
  decisionsPerSec1kRules: number;
  policyRules1k: number;
  shellMatchesPerSec: number;
}> {
  const chain = realisticChain(NO_EXTRA_RULES);
  const extra = generatedRules();
  const chain1k = realisticChain(extra);
  const policyRules1k = chain1k.deny.length + chain1k.ask.length;
  const calls = CALLS;
  // Measured as the median of several rounds, each a single-threaded loop awaiting one decision at
  // a time (the hook's promise is a real one: an async function). The warm-up runs the same calls
  // with the same (per-call) context as the measured loop, so the loop starts on optimised code.
  // Quick: rounds of 25,000 (~0.1 s each here), after the same warm-up.
  const decisions = opts.quick ? 25_000 : 200_000;
  const rounds = opts.quick ? 3 : 5;
  const decide = async (c: PermissionChain): Promise<number> => {
    for (let i = 0; i < 20_000; i++) {
      const [tool, input] = calls[i % calls.length]!;
      await evaluatePermission(c, tool, input, { agent: { agentType: 'coder' } });
    }
    const decisionRates: number[] = [];
    for (let round = 0; round < rounds; round++) {
      const t0 = performance.now();
      for (let i = 0; i < decisions; i++) {
        const [tool, input] = calls[i % calls.length]!;
        await evaluatePermission(c, tool, input, { agent: { agentType: 'coder' } });
      }
      decisionRates.push(decisions / ((performance.now() - t0) / 1000));
    }
    return Math.round(median(decisionRates));
  };
  const decisionsPerSec = await decide(chain);
  const decisionsPerSec1kRules = await decide(chain1k);

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
  const matches = opts.quick ? 25_000 : 200_000;
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
  return { decisionsPerSec, decisionsPerSec1kRules, policyRules1k, shellMatchesPerSec };
}

interface ExtraRules {
  deny: PermissionRule[];
  ask: PermissionRule[];
  expressions: ExpressionRule[];
}
const NO_EXTRA_RULES: ExtraRules = { deny: [], ask: [], expressions: [] };

/** The realistic chain, with `extra` rules ahead of its own in each layer. */
function realisticChain(extra: ExtraRules): PermissionChain {
  return compilePermissionChain(
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
        ...extra.deny,
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
        ...extra.ask,
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
        ...extra.expressions,
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
}

/**
 * 980 rules the way a large organisation's policy grows: tools of many services named one by one
 * (some with a risk), shell rules for many programs (and many subcommands of a few), blocked
 * hosts, and CEL rules guarded by a tool name. None of them matches the benchmark's calls, so each
 * call still reaches the rule it met in the 24-rule chain, after every one of these.
 */
function generatedRules(): ExtraRules {
  const extra: ExtraRules = { deny: [], ask: [], expressions: [] };
  for (let i = 0; i < 300; i++) extra.deny.push({ tool: [`svc${i}_drop`, `svc${i}_purge`] });
  for (let i = 0; i < 200; i++) extra.ask.push({ tool: `svc${i}_write`, risk: 'write' });
  for (let i = 0; i < 100; i++)
    extra.deny.push({ tool: 'shell', argv: [`tool${i} **`, `tool${i}-admin --force **`] });
  for (let i = 0; i < 100; i++)
    extra.ask.push({ tool: 'shell', argv: [`kubectl delete ns-${i} **`, `git push origin r${i}`] });
  for (let i = 0; i < 100; i++) extra.ask.push({ tool: 'shell', argv: `deploy${i} *` });
  for (let i = 0; i < 100; i++) extra.deny.push({ domains: [`h${i}.blocked.example`] });
  for (let i = 0; i < 80; i++)
    extra.expressions.push({
      when: `tool == "svc${i}_pay" && input.amount > ${i * 10}`,
      effect: i % 2 === 0 ? 'deny' : 'ask',
    });
  return extra;
}

const CALLS: [PermissionTool, unknown][] = [
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
