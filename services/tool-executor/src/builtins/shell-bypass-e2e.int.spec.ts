// End to end through the `shell` builtin: a sample of the permission corpus
// (libs/permissions/src/shell-hazard-corpus.spec.ts, where each case cites its public source) run
// against a scratch git repository. Each attack first runs unguarded, to prove its payload really
// deletes the victim file or writes the marker on this machine; then it goes through the
// permission chain the way a dispatch does (evaluatePermission, and the builtin only on allow),
// and the victim must still be there and the marker absent. Benign commands go through the same
// gate and must run.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { compilePermissionChain, evaluatePermission } from '@toolgate/permissions';
import { runTool, type ToolDef } from '@toolgate/tools';
import { builtin, ok, toolContext } from '../../test/tool-harness';
import type { ShellResult } from './shell-tool';

/** The deny-list of the probes: deleting and touching files is denied. */
const chain = compilePermissionChain({
  deny: [{ tool: 'shell', argv: ['rm **', 'touch **'] }],
});

interface Attack {
  readonly command: string;
  /** What the payload does: deletes `victim`, or writes the file `marker` names. */
  readonly effect: { readonly deletes: 'victim' } | { readonly writes: string };
  readonly verdict: 'ask' | 'deny';
  /**
   * The unguarded proof, when it differs: the same option aimed at an unprotected file, because a
   * sandbox around the builtin may refuse the protected one on its own (`.git` is read-only there).
   */
  readonly proof?: { readonly command: string; readonly writes: string };
}

/** An attack whose payload deletes `victim`. */
const deletes = (command: string, verdict: Attack['verdict']): Attack => ({
  command,
  effect: { deletes: 'victim' },
  verdict,
});

const attacks: Attack[] = [
  // Shell wrappers with extra arguments.
  deletes("sh -c -- 'rm victim'", 'deny'),
  deletes("bash -o errexit -c 'rm victim'", 'deny'),
  deletes("script -qc 'rm victim' /dev/null", 'deny'),
  deletes("flock victim.lock -c 'rm victim'", 'deny'),
  // Options that run a command.
  deletes("git -c alias.x='!rm victim' x", 'deny'),
  deletes("sed -n '1e rm victim' notes.txt", 'deny'),
  deletes('find . -name notes.txt -exec rm victim \\;', 'deny'),
  deletes("tar -cf out.tar --checkpoint=1 --checkpoint-action=exec='rm victim' notes.txt", 'deny'),
  // Options that write a file (a protected one).
  {
    command: "sed -n 'w .git/hooks/pre-commit' notes.txt",
    effect: { writes: '.git/hooks/pre-commit' },
    verdict: 'ask',
    proof: { command: "sed -n 'w written.txt' notes.txt", writes: 'written.txt' },
  },
  {
    command: 'git log --output=.git/hooks/post-checkout -1',
    effect: { writes: '.git/hooks/post-checkout' },
    verdict: 'ask',
    proof: { command: 'git log --output=written.txt -1', writes: 'written.txt' },
  },
  // Wrappers hiding their program's options.
  deletes("env X=1 nice git -c alias.x='!rm victim' x", 'deny'),
  deletes("timeout 5 sed -n '1e rm victim' notes.txt", 'deny'),
  // Code fed to a shell on stdin.
  deletes("bash <<< 'rm victim'", 'deny'),
  deletes("source /dev/stdin <<< 'rm victim'", 'deny'),
  deletes("echo 'rm victim' | sh", 'ask'),
  // Inline code the matcher cannot read.
  deletes('python3 -c \'import os; os.remove("victim")\'', 'ask'),
  deletes("perl -e 'unlink q(victim)'", 'ask'),
  deletes('node -e \'require("fs").rmSync("victim")\'', 'ask'),
  deletes('awk \'BEGIN { system("rm victim") }\'', 'ask'),
  deletes('bash ./cleanup.sh', 'ask'),
  // Issue 23: wrappers the table did not know, and code the matcher cannot read.
  deletes('/lib64/ld-linux-x86-64.so.2 /bin/rm victim', 'deny'),
  deletes("socat - EXEC:'rm victim' < /dev/null", 'deny'),
  deletes('setarch x86_64 -R rm victim', 'deny'),
  deletes('linux64 rm victim', 'deny'),
  deletes("capsh -- -c 'rm victim'", 'deny'),
  deletes('valgrind -q rm victim', 'deny'),
  deletes('ssh-agent rm victim', 'deny'),
  deletes("printf '!rm victim\\nq\\n' | ed -s notes.txt", 'ask'),
  deletes(
    "mkdir parts && printf '#!/bin/sh\\nrm victim\\n' > parts/x && chmod +x parts/x && run-parts parts",
    'ask',
  ),
  deletes('cp /bin/rm x; ./x victim', 'ask'),
  deletes('ln -s /bin/rm x && ./x victim', 'ask'),
  deletes('printf \'import os\\nos.remove("victim")\\n\' > f.py && python3 f.py', 'ask'),
  deletes("python3 - <<'EOF'\nimport os\nos.remove('victim')\nEOF", 'ask'),
  deletes("printf 'all:\\n\\trm victim\\n' > Makefile && make -s", 'ask'),
  deletes("printf 'unlink q(victim);' > f.pl && perl f.pl", 'ask'),
  // `cd` is followed: the write lands on a protected path.
  {
    command: 'mkdir -p .vscode && cd .vscode && printf x > settings.json',
    effect: { writes: '.vscode/settings.json' },
    verdict: 'ask',
  },
];

/** Benign commands: allowed by the same chain, and they run. */
const benign: [command: string, stdout: RegExp][] = [
  ['git status --short', /^$/],
  ['git log --oneline -1', /first/],
  ['sed -n 1p notes.txt', /^alpha\n$/],
  ['sort notes.txt', /^alpha\nbeta\n$/],
  ['find . -name notes.txt', /\.\/notes\.txt/],
  ["awk '{print $1}' notes.txt", /^alpha\nbeta\n$/],
  ['tar -cf out.tar notes.txt && tar -tf out.tar', /^notes\.txt\n$/],
  ["bash -c 'echo ok'", /^ok\n$/],
];

const SHELL = { name: 'shell', risk: 'execute' } as const;
let work: string;

/** A new temporary directory (its real path). */
async function tempDir(): Promise<string> {
  return fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-shell-bypass-')));
}

/**
 * The scratch repository, made once per file: one commit, a victim file, a file to read and a
 * script that deletes. Each test copies it (two copies for an attack), which spares three `git`
 * processes per copy.
 */
let template: string;

async function makeTemplate(): Promise<string> {
  const dir = await tempDir();
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], {
      cwd: dir,
      stdio: 'ignore',
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir },
    });
  git('init', '-q');
  await fs.writeFile(path.join(dir, 'notes.txt'), 'alpha\nbeta\n');
  await fs.writeFile(path.join(dir, 'cleanup.sh'), 'rm victim\n');
  await fs.writeFile(path.join(dir, 'victim'), 'keep me\n');
  git('add', 'notes.txt', 'cleanup.sh', 'victim');
  git('commit', '-q', '-m', 'first');
  return dir;
}

/** A scratch repository of its own: a copy of the template (history, index, modes as they are). */
async function scratch(): Promise<string> {
  const dir = await tempDir();
  await fs.cp(template, dir, { recursive: true, verbatimSymlinks: true });
  return dir;
}

function shellIn(dir: string): ToolDef {
  return builtin('shell', {
    policy: { cwd: dir, shell: { path: '/bin/bash', timeoutMs: 20_000 } },
    checkDomain: () => 'deny',
    hostEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir },
  });
}

async function run(dir: string, command: string): Promise<ShellResult> {
  return ok<ShellResult>(await runTool(shellIn(dir), { command }, toolContext(dir)));
}

/** Evaluates the call, and runs the builtin only when the chain allows it. */
async function dispatch(dir: string, command: string) {
  const decision = await evaluatePermission(chain, SHELL, { command });
  const result = decision.verdict === 'allow' ? await run(dir, command) : undefined;
  return { decision, result };
}

function happened(dir: string, effect: Attack['effect']): boolean {
  return 'deletes' in effect
    ? !existsSync(path.join(dir, effect.deletes))
    : existsSync(path.join(dir, effect.writes));
}

beforeAll(async () => {
  template = await makeTemplate();
});

afterAll(async () => {
  if (template) await fs.rm(template, { recursive: true, force: true });
});

beforeEach(async () => {
  work = await scratch();
});

afterEach(async () => {
  await fs.rm(work, { recursive: true, force: true });
});

describe('attacks from the corpus, through the shell builtin', () => {
  it.each(attacks.map((a) => [a.command, a] as const))('%s', async (_command, attack) => {
    // Unguarded, the payload works here: the case is a real attack, not a no-op.
    const proof = await scratch();
    try {
      await run(proof, attack.proof?.command ?? attack.command);
      const effect = attack.proof === undefined ? attack.effect : { writes: attack.proof.writes };
      expect(happened(proof, effect)).toBe(true);
    } finally {
      await fs.rm(proof, { recursive: true, force: true });
    }
    // Through the chain, it is not allowed, so it never reaches the builtin.
    const { decision, result } = await dispatch(work, attack.command);
    expect(decision.verdict).toBe(attack.verdict);
    expect(result).toBeUndefined();
    expect(happened(work, attack.effect)).toBe(false);
  });
});

describe('benign commands, through the same gate', () => {
  it.each(benign)('%s runs', async (command, stdout) => {
    const { decision, result } = await dispatch(work, command);
    expect(decision.verdict).toBe('allow');
    expect(result).toMatchObject({ exitCode: 0 });
    expect(result!.stdout).toMatch(stdout);
    expect(existsSync(path.join(work, 'victim'))).toBe(true);
  });
});
