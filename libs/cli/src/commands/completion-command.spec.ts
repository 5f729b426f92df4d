import { execFileSync } from 'node:child_process';
import { runCli } from '../run-cli';

async function script(): Promise<string> {
  let out = '';
  const code = await runCli(['completion', 'bash'], {
    env: {},
    stdout: { write: (t: string) => (out += t) },
    stderr: { write: () => undefined },
  });
  expect(code).toBe(0);
  return out;
}

/** What bash completes for `words` (the last one is the word being typed), with the real bash. */
function complete(source: string, words: string[]): string[] {
  const array = words.map((w) => `'${w}'`).join(' ');
  const out = execFileSync(
    'bash',
    [
      '-c',
      `${source}\nCOMP_WORDS=(${array}); COMP_CWORD=${words.length - 1}; _toolgate_complete; printf '%s\\n' "\${COMPREPLY[@]}"`,
    ],
    { encoding: 'utf8' },
  );
  return out.split('\n').filter(Boolean);
}

describe('toolgate completion bash', () => {
  it('completes commands, subcommands and options from the command tree', async () => {
    const source = await script();
    expect(complete(source, ['toolgate', 'po'])).toEqual(['policy']);
    expect(complete(source, ['toolgate', 'policy', 'w'])).toEqual(['whatif']);
    expect(complete(source, ['toolgate', 'policy', 'whatif', '--c'])).toEqual(['--candidate']);
    expect(complete(source, ['toolgate', 'journal', ''])).toEqual([
      'tail',
      'stats',
      'rebuild',
      '--help',
    ]);
    // Options and their values before the command are passed over.
    expect(complete(source, ['toolgate', '--url', 'http://x', 'jour'])).toEqual(['journal']);
    expect(complete(source, ['toolgate', 'approvals', 'list', '--run', 'r1', '--st'])).toEqual([
      '--status',
    ]);
  });

  it('refuses a shell it does not generate for', async () => {
    let err = '';
    const code = await runCli(['completion', 'fish'], {
      env: {},
      stdout: { write: () => undefined },
      stderr: { write: (t: string) => (err += t) },
    });
    expect(code).toBe(2);
    expect(err).toBe('error: only bash completion is generated, not "fish"\n');
  });
});
