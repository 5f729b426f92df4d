import { parseApprovalKey, parseDuration, parseJsonFlag, UsageError } from './cli-input';

describe('CLI input parsing', () => {
  it.each([
    ['500ms', 500],
    ['30s', 30_000],
    ['10m', 600_000],
    ['2h', 7_200_000],
    ['1d', 86_400_000],
    ['250', 250],
  ])('parses the duration %s', (text, ms) => expect(parseDuration('--min-age', text)).toBe(ms));

  it.each(['', '10 minutes', '-5m', '1.5h', 'm'])(
    'refuses the duration %j as a usage error naming the flag',
    (text) => {
      expect(() => parseDuration('--min-age', text)).toThrow(UsageError);
      expect(() => parseDuration('--min-age', text)).toThrow(/--min-age/);
    },
  );

  it('names the flag when JSON does not parse', () => {
    expect(parseJsonFlag('--input', '{"a":1}')).toEqual({ a: 1 });
    expect(() => parseJsonFlag('--input', '{a:1}')).toThrow(/^--input is not valid JSON/);
  });

  it('accepts sha256 keys only (case-insensitive)', () => {
    expect(parseApprovalKey('AB'.repeat(32))).toBe('ab'.repeat(32));
    expect(() => parseApprovalKey('ab'.repeat(31))).toThrow(UsageError);
  });
});
