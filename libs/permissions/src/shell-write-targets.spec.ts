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
    expect(shellWriteTargets('cmd < in 2>&1 >&2 <<< text')).toEqual({
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
});
