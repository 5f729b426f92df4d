import { parseBinaryPaths, parseRawDiff } from './patch-collector';

describe('parseRawDiff', () => {
  it('reads modifications, additions, deletions, renames and modes from -z output', () => {
    const z = [
      ':100644 100644 aaaa bbbb M',
      'src/a.ts',
      ':000000 100644 0000 cccc A',
      'name with\ttab.md',
      ':100644 000000 dddd 0000 D',
      'gone.txt',
      ':100644 100644 eeee eeee R100',
      'old/path.ts',
      'new/path.ts',
      ':000000 160000 0000 ffff A',
      'vendor/lib',
      '',
    ].join('\0');
    expect(parseRawDiff(z)).toEqual([
      { srcMode: '100644', dstMode: '100644', status: 'M', path: 'src/a.ts' },
      { srcMode: '000000', dstMode: '100644', status: 'A', path: 'name with\ttab.md' },
      { srcMode: '100644', dstMode: '000000', status: 'D', path: 'gone.txt' },
      {
        srcMode: '100644',
        dstMode: '100644',
        status: 'R',
        path: 'new/path.ts',
        from: 'old/path.ts',
      },
      { srcMode: '000000', dstMode: '160000', status: 'A', path: 'vendor/lib' },
    ]);
  });

  it('is empty for no changes', () => {
    expect(parseRawDiff('')).toEqual([]);
  });
});

describe('parseBinaryPaths', () => {
  it('picks the destinations numstat marks binary, including renamed ones', () => {
    const z = [
      '3\t1\tsrc/a.ts',
      '-\t-\tlogo.bin',
      '-\t-\t',
      'old.bin',
      'new.bin',
      '0\t0\t',
      'old.ts',
      'new.ts',
      '',
    ].join('\0');
    expect([...parseBinaryPaths(z)].sort()).toEqual(['logo.bin', 'new.bin']);
  });
});
