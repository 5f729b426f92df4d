import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Sandbox } from '@toolgate/sandbox';
import { runTool, type ToolDef, type ToolRunOutcome } from '@toolgate/tools';
import { toolContext } from '../../test/tool-harness';
import { createBuiltinTools } from './builtin-tools';
import { FileScopePool } from './file-scope/file-scope-pool';

/**
 * Issue 23's first finding, run for real: a tenant's `shell` call (in its sandbox, allowed by
 * default, writable cwd) swaps a directory with a symlink to the keyring's directory — and another
 * with a symlink to `/proc/self` — in a tight loop (renameat2 RENAME_EXCHANGE), while the same
 * tenant's read_file, list_dir, grep and write_file race it. In the executor's process the path
 * check and the open are two steps, and the race walks between them. In the scope's sandbox the
 * keyring and the executor's /proc do not exist, so no interleaving can reach them.
 */

// renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) on x86_64, as fast as perl can loop.
const RACER =
  'perl -e \'my @p = (["d", "l"], ["e", "q"]); for (;;) { for (@p) { my ($a, $b) = @$_; syscall(316, -100, $a, -100, $b, 2) } }\'';

let sandbox: Sandbox;
let files: FileScopePool;
let base: string;
let work: string;
let keyring: string;
const PLANTED = `PLANTED-KEY-${randomBytes(12).toString('hex')}`;
const ENV_MARKER = `TG_RACE_ENV_${randomBytes(8).toString('hex')}`;

beforeAll(async () => {
  sandbox = await Sandbox.open();
  files = new FileScopePool(sandbox);
  // The executor's own environment holds a secret; its /proc/self/environ must never come back.
  process.env.TG_RACE_SECRET = ENV_MARKER;
});

afterAll(async () => {
  delete process.env.TG_RACE_SECRET;
  await files.close();
});

beforeEach(async () => {
  base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-race-')));
  work = path.join(base, 'work');
  keyring = path.join(base, 'keyring');
  await fs.mkdir(path.join(work, 'd'), { recursive: true });
  await fs.mkdir(path.join(work, 'e'));
  await fs.mkdir(keyring, { mode: 0o700 });
  await fs.writeFile(path.join(keyring, 'keys.json'), `{"privateKey":"${PLANTED}"}\n`, {
    mode: 0o600,
  });
  await fs.writeFile(path.join(keyring, 'only-in-the-keyring'), 'x\n');
  await fs.writeFile(path.join(work, 'd', 'keys.json'), 'harmless\n');
  await fs.writeFile(path.join(work, 'e', 'status'), 'harmless\n');
  await fs.writeFile(path.join(work, 'e', 'environ'), 'harmless\n');
  await fs.symlink(keyring, path.join(work, 'l'));
  await fs.symlink('/proc/self', path.join(work, 'q'));
});

afterEach(async () => {
  await fs.rm(base, { recursive: true, force: true });
});

interface Leaks {
  key: number;
  keyringListed: number;
  procStatus: number;
  procEnviron: number;
  calls: number;
}

/**
 * Races the file builtins (`files` null: in process) against the swapping shell until `stopAt`,
 * or until the first leak when `untilLeak`. Returns what leaked.
 */
async function race(
  pool: FileScopePool | null,
  opts: { calls: number; untilLeak?: boolean; lanes?: number },
): Promise<Leaks> {
  const tools = new Map<string, ToolDef>(
    createBuiltinTools({
      policy: { cwd: work },
      checkDomain: () => 'deny',
      sandbox,
      files: pool,
    }).map((t) => [t.contract.name, t]),
  );
  const run = (name: string, input: unknown): Promise<ToolRunOutcome> =>
    runTool(tools.get(name)!, input, toolContext(work));
  const stopRacer = new AbortController();
  const racer = runTool(
    tools.get('shell')!,
    { command: RACER, timeoutMs: 60_000 },
    toolContext(work, { signal: stopRacer.signal }),
  );
  const leaks: Leaks = { key: 0, keyringListed: 0, procStatus: 0, procEnviron: 0, calls: 0 };
  const ownStatus = `\nPid:\t${process.pid}\n`;
  try {
    // The racer runs: the directory has been seen as a symlink.
    for (let seen = false; !seen;) {
      seen =
        (await fs.lstat(path.join(work, 'd')).catch(() => undefined))?.isSymbolicLink() ?? false;
      if (!seen) await new Promise((r) => setTimeout(r, 5));
    }
    const text = (o: ToolRunOutcome) => (o.ok ? JSON.stringify(o.result) : '');
    const probes: (() => Promise<void>)[] = [
      async () => {
        if (text(await run('read_file', { path: 'd/keys.json' })).includes(PLANTED)) leaks.key += 1;
      },
      async () => {
        if (text(await run('read_file', { path: 'd/keys.json' })).includes(PLANTED)) leaks.key += 1;
      },
      async () => {
        if (text(await run('list_dir', { path: 'd' })).includes('only-in-the-keyring'))
          leaks.keyringListed += 1;
      },
      async () => {
        if (text(await run('grep', { pattern: 'PLANTED', path: 'd' })).includes(PLANTED))
          leaks.key += 1;
      },
      async () => {
        await run('write_file', { path: 'd/written.txt', content: 'from the race\n' });
      },
      async () => {
        if (text(await run('read_file', { path: 'e/status' })).includes(ownStatus))
          leaks.procStatus += 1;
      },
      async () => {
        if (text(await run('read_file', { path: 'e/environ' })).includes(ENV_MARKER))
          leaks.procEnviron += 1;
      },
    ];
    const leaked = () => leaks.key + leaks.keyringListed + leaks.procStatus + leaks.procEnviron > 0;
    let next = 0;
    const lane = async () => {
      while (next < opts.calls && !(opts.untilLeak && leaked())) {
        const probe = probes[next % probes.length]!;
        next += 1;
        await probe();
        leaks.calls += 1;
      }
    };
    await Promise.all(Array.from({ length: opts.lanes ?? 4 }, lane));
  } finally {
    stopRacer.abort();
    await racer;
  }
  return leaks;
}

it('the attack is real: in the executor process the race reads the planted key or the executor /proc', async () => {
  const leaks = await race(null, { calls: 20_000, untilLeak: true });
  expect(leaks.key + leaks.keyringListed + leaks.procStatus).toBeGreaterThan(0);
}, 60_000);

it('in the scope sandbox thousands of racing calls never reach the keyring, its files or the executor /proc', async () => {
  const before = await fs.readdir(keyring);
  const leaks = await race(files, { calls: 3_000 });
  expect(leaks).toEqual({ key: 0, keyringListed: 0, procStatus: 0, procEnviron: 0, calls: 3_000 });
  // Nothing was written outside the scope: the keyring holds what it held, unchanged.
  expect((await fs.readdir(keyring)).sort()).toEqual(before.sort());
  expect(await fs.readFile(path.join(keyring, 'keys.json'), 'utf8')).toBe(
    `{"privateKey":"${PLANTED}"}\n`,
  );
}, 60_000);
