import { hiddenFindings, hiddenWarning, revealPieces, revealText } from './visible-text';

describe('revealing what changes how a text reads', () => {
  it('escapes a right-to-left override, so a command reads in the order it runs', () => {
    expect(revealText('echo ok # \u202E; rm -rf ~')).toBe('echo ok # \\u202E; rm -rf ~');
    expect(revealText('invoice\u202Egpj.exe')).toBe('invoice\\u202Egpj.exe');
    expect(revealPieces('a\u202Eb')).toEqual([
      { text: 'a' },
      {
        hidden: {
          codePoint: 0x202e,
          kind: 'bidi',
          name: 'right-to-left override',
          escape: '\\u202E',
        },
      },
      { text: 'b' },
    ]);
  });

  it('escapes every bidirectional control, zero-width and invisible character', () => {
    const bidi = [
      0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069, 0x200e, 0x200f,
      0x061c,
    ];
    const invisible = [0x200b, 0x200c, 0x200d, 0x2060, 0xfeff, 0x00ad, 0xe0041];
    for (const cp of [...bidi, ...invisible]) {
      const text = `rm${String.fromCodePoint(cp)}x`;
      expect(revealText(text)).not.toBe(text);
      expect(revealText(text)).toMatch(/^rm\\u(\{E0041\}|[0-9A-F]{4})x$/);
    }
  });

  it('marks look-alikes in a Latin word, a space that is not one, full-width forms; leaves plain text and other scripts alone', () => {
    expect(revealText('p\u0430ypal.com')).toBe('p\\u0430ypal.com');
    expect(revealText('rm\u00a0-rf')).toBe('rm\\u00A0-rf');
    expect(revealText('\uff0fetc\uff0fpasswd')).toBe('\\uFF0Fetc\\uFF0Fpasswd');
    for (const plain of [
      'привет мир',
      'καλημέρα',
      'ls -la ~/src',
      'naïve café',
      '日本語',
      'emoji ❤️',
    ])
      expect(revealText(plain)).toBe(plain);
  });

  it('counts findings through keys and nested values, and words a warning', () => {
    const findings = hiddenFindings({ ['k\u200b']: ['a\u202Eb', { c: 'x\u202Ey' }], n: 1 });
    expect(findings).toEqual([
      { codePoint: 'U+200B', name: 'zero width space', kind: 'invisible', count: 1 },
      { codePoint: 'U+202E', name: 'right-to-left override', kind: 'bidi', count: 2 },
    ]);
    expect(hiddenWarning(findings)).toBe(
      'the input has characters that change how it reads, shown escaped: U+200B zero width space, U+202E right-to-left override ×2',
    );
    expect(hiddenWarning(hiddenFindings({ command: 'ls' }))).toBeNull();
  });
});
