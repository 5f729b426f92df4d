import { signResolveLink, verifyResolveLink, type ResolveLinkClaims } from './approval-webhooks';

const SECRET = 'link-secret-for-tests-0123456789';
const NOW = 1_800_000_000;

const claimsFor = (n: number): ResolveLinkClaims => ({
  tenant: 'acme',
  runId: 'run-1',
  dispatchId: `d${n}`,
  approvalKey: n.toString(16).padStart(64, '0'),
  inputDigest: 'a'.repeat(64),
  decision: n % 2 ? 'allow' : 'deny',
  exp: NOW + 600,
});

it('accepts its own links until they expire', () => {
  const token = signResolveLink(SECRET, claimsFor(1));
  expect(verifyResolveLink(SECRET, token, NOW)).toMatchObject({ decision: 'allow' });
  expect(verifyResolveLink(SECRET, token, NOW + 601)).toBeNull();
  expect(verifyResolveLink('another-secret-0123456789abcdef', token, NOW)).toBeNull();
});

it('refuses every other spelling of a signature, the last character spare bits included', () => {
  // Over many links, every one-character change of the signature's last character is refused —
  // also those a base64 decoder maps to the same bytes.
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  for (let n = 0; n < 40; n++) {
    const token = signResolveLink(SECRET, claimsFor(n));
    const last = token.at(-1)!;
    for (const c of alphabet) {
      if (c === last) continue;
      expect(verifyResolveLink(SECRET, token.slice(0, -1) + c, NOW)).toBeNull();
    }
  }
});
