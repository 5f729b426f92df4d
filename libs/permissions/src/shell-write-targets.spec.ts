import { shellWriteTargets } from './index';

describe('shellWriteTargets', () => {
  it('lists every redirection that opens a file for writing, with its operator', () => {
    expect(
      shellWriteTargets('echo a > out.txt; cat x >> log 2> err &> both 3<> rw; sort < in'),
    ).toEqual({
      targets: [
        { path: 'out.txt', via: '>', dynamic: false },
        { path: 'log', via: '>>', dynamic: false },
        { path: 'err', via: '2>', dynamic: false },
        { path: 'both', via: '&>', dynamic: false },
        { path: 'rw', via: '3<>', dynamic: false },
      ],
      complete: true,
    });
  });

  it('skips reads and descriptor duplications', () => {
    expect(shellWriteTargets('cat < in 2>&1 >&2 <<< text')).toEqual({
      targets: [],
      complete: true,
    });
  });

  it('marks targets the shell may still change as dynamic', () => {
    const { targets } = shellWriteTargets('echo > "$OUT" > ~/.bashrc > *.log > .git/config');
    expect(targets.map((t) => [t.path, t.dynamic])).toEqual([
      ['$OUT', true],
      ['~/.bashrc', true],
      ['*.log', true],
      ['.git/config', false],
    ]);
  });

  it('is incomplete when a segment cannot be analysed', () => {
    expect(shellWriteTargets('echo $(id) > x')).toEqual({
      targets: [{ path: 'x', via: '>', dynamic: false }],
      complete: false,
    });
    expect(shellWriteTargets(42 as unknown as string)).toEqual({ targets: [], complete: false });
  });

  it('is incomplete when a segment runs code the matcher cannot see', () => {
    for (const command of ['make > log', './build.sh', 'python3 gen.py', 'mytool x', 'npm test'])
      expect(shellWriteTargets(command).complete).toBe(false);
    expect(shellWriteTargets('cat a > b').complete).toBe(true);
  });

  it('resolves targets against the directory earlier cd and pushd segments moved to', () => {
    const paths = (command: string) =>
      shellWriteTargets(command).targets.map((t) => [t.path, t.dynamic]);
    expect(paths('cd .vscode && printf x > settings.json')).toEqual([
      ['.vscode/settings.json', false],
    ]);
    expect(paths('cd a; cd b/c; echo > x; cd /etc; echo > y; cd ..; echo > z')).toEqual([
      ['a/b/c/x', false],
      ['/etc/y', false],
      ['/etc/../z', false],
    ]);
    expect(paths('pushd .git && pushd hooks && popd && echo > config')).toEqual([
      ['.git/config', false],
    ]);
    expect(paths("cd src && sh -c 'cd .. && echo > .git/config'")).toEqual([
      ['src/../.git/config', false],
    ]);
    // A directory that is not a literal: every target after it is unknown.
    for (const command of [
      'cd "$D" && echo > x',
      'cd && echo > x',
      'cd - && echo > x',
      'cd ~/w && echo > x',
      '(cd a && echo > x)',
    ])
      expect(paths(command)).toEqual([['x', true]]);
  });
});
