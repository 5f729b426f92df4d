import {
  canonicalHost,
  checkFetchHost,
  compileHostPattern,
  compilePermissionChain,
  evaluatePermission,
  matchHost,
} from './index';
import { configError } from '../test/config-error';

describe('canonicalHost', () => {
  it.each([
    ['127.0.0.1', '127.0.0.1'],
    ['127.0.0.1.', '127.0.0.1'],
    ['2130706433', '127.0.0.1'],
    ['0177.0.0.1', '127.0.0.1'],
    ['0x7f.1', '127.0.0.1'],
    ['0x7F000001', '127.0.0.1'],
    ['127.1', '127.0.0.1'],
    ['127%2e0.0.1', '127.0.0.1'],
    ['127\u30020\u30020\u30021', '127.0.0.1'],
    ['[::ffff:127.0.0.1]', '127.0.0.1'],
    ['::ffff:7f00:1', '127.0.0.1'],
    ['[0:0:0:0:0:FFFF:7F00:0001]', '127.0.0.1'],
    ['[::127.0.0.1]', '127.0.0.1'],
    ['::ffff:0:127.0.0.1', '127.0.0.1'],
    ['64:ff9b::a9fe:a9fe', '169.254.169.254'],
    ['::1', '::1'],
    ['[0:0:0:0:0:0:0:1]', '::1'],
    ['::', '::'],
    ['[FD00::AB]', 'fd00::ab'],
    ['Example.COM.', 'example.com'],
    ['EXAMPLE.com..', 'example.com'],
    ['bücher.DE', 'xn--bcher-kva.de'],
    ['xn--bcher-kva.de', 'xn--bcher-kva.de'],
    ['\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25.com', 'example.com'],
    ['0xdeadbeef.com', '0xdeadbeef.com'],
  ])('%j is %s', (raw, canonical) => {
    expect(canonicalHost(raw)).toBe(canonical);
  });

  it.each([
    '',
    'fe80::1%eth0',
    'a b',
    'allowed.com@127.0.0.1',
    '127.0.0.1:80',
    '[::1]:80',
    'host/path',
    '1.2.3.4.5',
    '0x100000000',
  ])('%j is not a host', (raw) => {
    expect(canonicalHost(raw)).toBeUndefined();
  });
});

describe('host patterns', () => {
  const match = (pattern: string, host: string) =>
    matchHost([compileHostPattern(pattern)], canonicalHost(host)!) !== undefined;

  it('an address rule in any spelling meets the address in any spelling', () => {
    for (const rule of ['127.0.0.1', '2130706433', '[::ffff:7f00:1]', '::ffff:127.0.0.1']) {
      for (const host of ['127.0.0.1', '0x7f.1', '[::ffff:127.0.0.1]', '127.0.0.1.']) {
        expect({ rule, host, match: match(rule, host) }).toEqual({ rule, host, match: true });
      }
    }
    expect(match('[::1]', '0:0:0:0:0:0:0:1')).toBe(true);
    expect(match('127.0.0.1', '127.0.0.2')).toBe(false);
  });

  it('a range holds every address in it', () => {
    expect(match('127.0.0.0/8', '127.1.2.3')).toBe(true);
    expect(match('127.0.0.0/8', '[::ffff:127.9.9.9]')).toBe(true);
    expect(match('169.254.0.0/16', '[64:ff9b::a9fe:a9fe]')).toBe(true);
    expect(match('fd00::/8', 'fd12::1')).toBe(true);
    expect(match('10.0.0.0/8', '11.0.0.1')).toBe(false);
    expect(match('10.0.0.0/8', 'example.com')).toBe(false);
  });

  it('names match case-insensitively, without the trailing dot, as punycode', () => {
    expect(match('bücher.de', 'XN--BCHER-KVA.DE.')).toBe(true);
    expect(match('*.example.com', 'API.Example.com.')).toBe(true);
    expect(match('*.example.com', 'example.com')).toBe(false);
  });

  it.each(['*.127.0.0.1', '10.0.0.0/33', '::1/129', 'a/b', 'user@host', 'host:80', ''])(
    'refuses %j',
    (pattern) => {
      expect(configError(() => compileHostPattern(pattern))).toBe(true);
    },
  );
});

describe('domain decisions use the canonical host', () => {
  const chain = compilePermissionChain({
    deny: [{ tool: 'http_fetch', domains: ['127.0.0.1'] }],
    ask: [{ domains: ['169.254.169.254'] }],
  });

  it('the connect-time check', () => {
    for (const host of ['127.0.0.1', '::ffff:7f00:1', '[::127.0.0.1]', '0177.0.0.1'])
      expect(checkFetchHost(chain, host).verdict).toBe('deny');
    expect(checkFetchHost(chain, 'not a host').verdict).toBe('deny');
    expect(checkFetchHost(chain, '127.0.0.2').verdict).toBe('allow');
  });

  it('advisory matches for other tools', async () => {
    const d = await evaluatePermission(
      chain,
      { name: 'shell', risk: 'execute' },
      { command: 'curl http://[::ffff:a9fe:a9fe]/latest/meta-data/' },
    );
    expect(d.advisory).toEqual([
      expect.objectContaining({ layer: 'ask', host: '169.254.169.254' }),
    ]);
  });
});
