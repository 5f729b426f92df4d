import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ErrorCode, type Isolation } from '@toolgate/contracts';
import { runTool, type ToolDef } from '@toolgate/tools';
import { createBuiltinTools } from '../src/builtins/builtin-tools';
import type { ExecutionPolicyInput } from '../src/builtins/execution-policy';
import type { FileScopePool } from '../src/builtins/file-scope/file-scope-pool';
import { errorOf, ok, toolContext } from './tool-harness';

/**
 * The file builtins' behaviour, run once in process (`files` null) and once in the scope sandbox
 * (`file-tools-sandboxed.int.spec.ts`): the same results and error codes either way.
 */
export function fileToolCases(files: () => FileScopePool | null): void {
  function tools(policy: ExecutionPolicyInput): Map<string, ToolDef> {
    return new Map(
      createBuiltinTools({ policy, checkDomain: () => 'deny', sandbox: null, files: files() }).map(
        (t) => [t.contract.name, t],
      ),
    );
  }

  let base: string;
  let work: string;
  let outside: string;
  let builtins: Map<string, ToolDef>;
  const run = (name: string, input: unknown, cwd = work, isolation: Isolation = 'none') =>
    runTool(builtins.get(name)!, input, toolContext(cwd, { isolation }));

  beforeEach(async () => {
    base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-files-')));
    work = path.join(base, 'work');
    outside = path.join(base, 'outside');
    await fs.mkdir(path.join(work, 'src', 'deep'), { recursive: true });
    await fs.mkdir(path.join(work, '.git'));
    await fs.mkdir(outside);
    await fs.writeFile(path.join(work, 'notes.txt'), 'one\ntwo\nthree\nfour\nfive\n');
    await fs.writeFile(
      path.join(work, 'src', 'main.ts'),
      'const answer = 42;\nexport default answer;\n',
    );
    await fs.writeFile(path.join(work, 'src', 'deep', 'util.ts'), 'export const ANSWER = "42";\n');
    await fs.writeFile(path.join(work, '.git', 'HEAD'), 'answer 42 in git internals\n');
    await fs.writeFile(
      path.join(work, 'blob.bin'),
      Buffer.from([0x61, 0x6e, 0x73, 0x00, 0x34, 0x32]),
    );
    await fs.writeFile(path.join(outside, 'secret.txt'), 'answer 42 outside\n');
    builtins = tools({ cwd: work, maxOutputBytes: 1024 });
  });

  afterEach(async () => {
    await fs.rm(base, { recursive: true, force: true });
  });

  it('builds the six builtins with their declared risk', () => {
    expect([...builtins.values()].map((t) => [t.contract.name, t.policy.risk])).toEqual([
      ['read_file', 'read'],
      ['list_dir', 'read'],
      ['grep', 'read'],
      ['write_file', 'write'],
      ['shell', 'execute'],
      ['http_fetch', 'network'],
    ]);
  });

  describe('read_file', () => {
    it('reads a file relative to the pinned cwd', async () => {
      expect(ok(await run('read_file', { path: 'notes.txt' }))).toEqual({
        path: 'notes.txt',
        content: 'one\ntwo\nthree\nfour\nfive\n',
        startLine: 1,
        endLine: 5,
        truncated: false,
      });
    });

    it('returns a line range', async () => {
      expect(
        ok(await run('read_file', { path: 'notes.txt', startLine: 2, endLine: 3 })),
      ).toMatchObject({
        content: 'two\nthree\n',
        startLine: 2,
        endLine: 3,
        truncated: false,
      });
    });

    it('caps the bytes returned, at a character boundary', async () => {
      await fs.writeFile(path.join(work, 'big.txt'), 'é'.repeat(2000));
      const result = ok(await run('read_file', { path: 'big.txt' })) as {
        content: string;
        truncated: boolean;
      };
      expect(result.truncated).toBe(true);
      expect(Buffer.byteLength(result.content)).toBe(1024);
      expect(result.content).toBe('é'.repeat(512));
      const smaller = ok(await run('read_file', { path: 'big.txt', maxBytes: 5 })) as {
        content: string;
      };
      expect(smaller.content).toBe('éé');
    });

    it('refuses a binary file', async () => {
      expect(errorOf(await run('read_file', { path: 'blob.bin' }))).toMatchObject({
        code: ErrorCode.ToolFailed,
        message: 'blob.bin: binary file, not read',
      });
    });

    it('reports a missing file with the requested path only', async () => {
      expect(errorOf(await run('read_file', { path: 'nope.txt' }))).toMatchObject({
        code: ErrorCode.ToolFailed,
        message: 'nope.txt: no such file or directory',
      });
    });

    it('refuses paths outside the read scope: .., absolute, symlink', async () => {
      await fs.symlink(path.join(outside, 'secret.txt'), path.join(work, 'link.txt'));
      for (const p of ['../outside/secret.txt', path.join(outside, 'secret.txt'), 'link.txt']) {
        const error = errorOf(await run('read_file', { path: p }));
        expect(error.code).toBe(ErrorCode.PathOutsideScope);
        expect(error.message).toBe(`${p}: outside the read scope`);
      }
    });

    it('validates its arguments', async () => {
      expect(errorOf(await run('read_file', {})).code).toBe(ErrorCode.InvalidArguments);
      expect(errorOf(await run('read_file', { path: 'notes.txt', startLine: 0 })).code).toBe(
        ErrorCode.InvalidArguments,
      );
      expect(
        errorOf(await run('read_file', { path: 'notes.txt', startLine: 3, endLine: 2 })).code,
      ).toBe(ErrorCode.InvalidArguments);
      expect(errorOf(await run('read_file', { path: 'a\0b' })).code).toBe(
        ErrorCode.InvalidArguments,
      );
    });

    it('reads relative to ctx.cwd, and under worktree isolation only inside the worktree', async () => {
      const wt = path.join(base, 'wt');
      await fs.mkdir(wt);
      await fs.writeFile(path.join(wt, 'notes.txt'), 'worktree copy\n');
      expect(
        ok(await run('read_file', { path: 'notes.txt' }, wt, { kind: 'worktree' })),
      ).toMatchObject({
        content: 'worktree copy\n',
      });
      expect(
        errorOf(
          await run('read_file', { path: path.join(work, 'notes.txt') }, wt, { kind: 'worktree' }),
        ).code,
      ).toBe(ErrorCode.PathOutsideScope);
    });
  });

  describe('list_dir', () => {
    it('lists entries sorted by name with types, symlinks not followed', async () => {
      await fs.symlink(outside, path.join(work, 'zz-link'));
      expect(ok(await run('list_dir', {}))).toEqual({
        path: '.',
        entries: [
          { name: '.git', type: 'dir' },
          { name: 'blob.bin', type: 'file', size: 6 },
          { name: 'notes.txt', type: 'file', size: 24 },
          { name: 'src', type: 'dir' },
          { name: 'zz-link', type: 'symlink' },
        ],
        truncated: false,
      });
    });

    it('bounds the entries', async () => {
      const result = ok(await run('list_dir', { path: '.', maxEntries: 2 })) as {
        entries: unknown[];
        truncated: boolean;
      };
      expect(result.entries).toHaveLength(2);
      expect(result.truncated).toBe(true);
    });

    it('refuses a directory outside the scope, directly or through a symlink', async () => {
      await fs.symlink(outside, path.join(work, 'out'));
      expect(errorOf(await run('list_dir', { path: '..' })).code).toBe(ErrorCode.PathOutsideScope);
      expect(errorOf(await run('list_dir', { path: 'out' })).code).toBe(ErrorCode.PathOutsideScope);
    });

    it('validates its arguments', async () => {
      expect(errorOf(await run('list_dir', { path: 3 })).code).toBe(ErrorCode.InvalidArguments);
    });
  });

  describe('grep', () => {
    it('finds matching lines under a directory, skipping .git and binary files', async () => {
      expect(ok(await run('grep', { pattern: '42' }))).toEqual({
        // A directory's files come before its subdirectories, each level sorted by name.
        matches: [
          { file: path.join('src', 'main.ts'), line: 1, text: 'const answer = 42;' },
          {
            file: path.join('src', 'deep', 'util.ts'),
            line: 1,
            text: 'export const ANSWER = "42";',
          },
        ],
        filesScanned: 3,
        filesSkipped: 1,
        truncated: false,
      });
    });

    it('keeps the requested prefix, supports ignoreCase and a single file', async () => {
      const r = ok(await run('grep', { pattern: 'answer', path: 'src', ignoreCase: true })) as {
        matches: unknown[];
      };
      expect(r.matches).toEqual([
        { file: path.join('src', 'main.ts'), line: 1, text: 'const answer = 42;' },
        { file: path.join('src', 'main.ts'), line: 2, text: 'export default answer;' },
        { file: path.join('src', 'deep', 'util.ts'), line: 1, text: 'export const ANSWER = "42";' },
      ]);
      const one = ok(await run('grep', { pattern: '^t', path: 'notes.txt' })) as {
        matches: unknown[];
      };
      expect(one.matches).toEqual([
        { file: 'notes.txt', line: 2, text: 'two' },
        { file: 'notes.txt', line: 3, text: 'three' },
      ]);
    });

    it('bounds the results', async () => {
      const r = ok(await run('grep', { pattern: '.', maxResults: 2 })) as {
        matches: unknown[];
        truncated: boolean;
      };
      expect(r.matches).toHaveLength(2);
      expect(r.truncated).toBe(true);
    });

    it('does not follow a symlink out of the scope, and refuses an outside root', async () => {
      await fs.symlink(outside, path.join(work, 'src', 'escape'));
      const r = ok(await run('grep', { pattern: 'outside' })) as { matches: unknown[] };
      expect(r.matches).toEqual([]);
      expect(errorOf(await run('grep', { pattern: 'x', path: '../outside' })).code).toBe(
        ErrorCode.PathOutsideScope,
      );
    });

    it('refuses an invalid regular expression as invalid arguments', async () => {
      const error = errorOf(await run('grep', { pattern: '(unclosed' }));
      expect(error.code).toBe(ErrorCode.InvalidArguments);
      expect(error.message).toMatch(/pattern/);
    });

    it('stops a catastrophically backtracking pattern at the deadline', async () => {
      // 2^40 steps never finish; the budget only has to outlast a worker's start on a loaded
      // machine, for the second call below (300 ms did not, under a load average of 20).
      builtins = tools({ cwd: work, grep: { timeoutMs: 2_000 } });
      await fs.writeFile(path.join(work, 'evil.txt'), `${'a'.repeat(40)}!\n`);
      const error = errorOf(await run('grep', { pattern: '^(a+)+$', path: 'evil.txt' }));
      expect(error.code).toBe(ErrorCode.Timeout);
      // The service is still usable afterwards.
      expect(ok(await run('grep', { pattern: 'three', path: 'notes.txt' }))).toMatchObject({
        matches: [{ file: 'notes.txt', line: 3, text: 'three' }],
      });
    });
  });

  describe('write_file', () => {
    it('writes a file, creating missing directories inside the scope', async () => {
      expect(
        ok(await run('write_file', { path: 'src/new/dir/out.txt', content: 'hello' })),
      ).toEqual({
        path: 'src/new/dir/out.txt',
        bytesWritten: 5,
        created: true,
      });
      expect(await fs.readFile(path.join(work, 'src', 'new', 'dir', 'out.txt'), 'utf8')).toBe(
        'hello',
      );
    });

    it('overwrites, appends, and refuses to create over an existing file', async () => {
      ok(await run('write_file', { path: 'notes.txt', content: 'A' }));
      ok(await run('write_file', { path: 'notes.txt', content: 'B', mode: 'append' }));
      expect(await fs.readFile(path.join(work, 'notes.txt'), 'utf8')).toBe('AB');
      expect(
        errorOf(await run('write_file', { path: 'notes.txt', content: 'C', mode: 'create' })),
      ).toMatchObject({
        code: ErrorCode.ToolFailed,
        message: 'notes.txt: already exists',
      });
    });

    it('refuses writes outside the write scope, leaving nothing behind', async () => {
      for (const p of ['../outside/x.txt', path.join(outside, 'x.txt')]) {
        expect(errorOf(await run('write_file', { path: p, content: 'x' })).code).toBe(
          ErrorCode.PathOutsideScope,
        );
      }
      expect(await fs.readdir(outside)).toEqual(['secret.txt']);
    });

    it('refuses a new directory under a symlinked parent that points outside', async () => {
      await fs.symlink(outside, path.join(work, 'src', 'linked'));
      const error = errorOf(
        await run('write_file', { path: 'src/linked/new-dir/f.txt', content: 'x' }),
      );
      expect(error).toEqual({
        code: ErrorCode.PathOutsideScope,
        message: 'src/linked/new-dir/f.txt: outside the write scope',
        details: { path: 'src/linked/new-dir/f.txt', access: 'write' },
      });
      expect(await fs.readdir(outside)).toEqual(['secret.txt']);
    });

    it('writes through a symlinked parent that stays inside the scope', async () => {
      await fs.symlink(path.join(work, 'src'), path.join(work, 'alias'));
      ok(await run('write_file', { path: 'alias/made/f.txt', content: 'in' }));
      expect(await fs.readFile(path.join(work, 'src', 'made', 'f.txt'), 'utf8')).toBe('in');
    });

    it('honours a narrower write scope and readonly isolation', async () => {
      builtins = tools({ cwd: work, writePaths: ['src'] });
      expect(errorOf(await run('write_file', { path: 'top.txt', content: 'x' })).code).toBe(
        ErrorCode.PathOutsideScope,
      );
      ok(await run('write_file', { path: 'src/ok.txt', content: 'x' }));
      expect(
        errorOf(await run('write_file', { path: 'src/ro.txt', content: 'x' }, work, 'readonly'))
          .code,
      ).toBe(ErrorCode.PathOutsideScope);
    });

    it('refuses content over the write cap', async () => {
      builtins = tools({ cwd: work, maxWriteBytes: 4 });
      expect(errorOf(await run('write_file', { path: 'x.txt', content: '12345' })).code).toBe(
        ErrorCode.ToolFailed,
      );
      await expect(fs.access(path.join(work, 'x.txt'))).rejects.toThrow();
    });

    it('validates its arguments', async () => {
      expect(errorOf(await run('write_file', { path: 'x.txt' })).code).toBe(
        ErrorCode.InvalidArguments,
      );
      expect(
        errorOf(await run('write_file', { path: 'x.txt', content: 'x', mode: 'truncate' })).code,
      ).toBe(ErrorCode.InvalidArguments);
    });
  });
}
