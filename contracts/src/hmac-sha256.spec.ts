import { createHmac, randomBytes } from 'node:crypto';
import { HmacSha256Key } from './hmac-sha256';

const text = (s: string) => Buffer.from(s);
const mac = (key: Uint8Array, message: Uint8Array) => new HmacSha256Key(key).mac(message);
const native = (key: Uint8Array, message: Uint8Array) =>
  createHmac('sha256', key).update(message).digest();

describe('HmacSha256Key', () => {
  it('gives the HMAC-SHA-256 of RFC 4231, test cases 1–7', () => {
    const cases: [Uint8Array, Uint8Array, string][] = [
      [
        Buffer.alloc(20, 0x0b),
        text('Hi There'),
        'b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7',
      ],
      [
        text('Jefe'),
        text('what do ya want for nothing?'),
        '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843',
      ],
      [
        Buffer.alloc(20, 0xaa),
        Buffer.alloc(50, 0xdd),
        '773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe',
      ],
      [
        Buffer.from(Array.from({ length: 25 }, (_, i) => i + 1)),
        Buffer.alloc(50, 0xcd),
        '82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b',
      ],
      // Test case 5 truncates the output to 128 bits.
      [Buffer.alloc(20, 0x0c), text('Test With Truncation'), 'a3b6167473100ee06e0c796c2955552b'],
      [
        Buffer.alloc(131, 0xaa),
        text('Test Using Larger Than Block-Size Key - Hash Key First'),
        '60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54',
      ],
      [
        Buffer.alloc(131, 0xaa),
        text(
          'This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm.',
        ),
        '9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2',
      ],
    ];
    for (const [key, message, expected] of cases)
      expect(mac(key, message).toString('hex').slice(0, expected.length)).toBe(expected);
  });

  it("equals node:crypto's HMAC for random keys and messages of every padding case", () => {
    // Message lengths around each padding boundary (55/56 bytes: one tail block or two; 64: a whole
    // block), the 35 bytes signing uses, and key lengths around the block size (64; longer ones
    // are hashed first).
    const messageLengths = [0, 1, 31, 32, 35, 54, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129];
    const keyLengths = [0, 1, 16, 32, 63, 64, 65, 100, 131];
    for (const keyLength of keyLengths)
      for (const messageLength of messageLengths)
        for (let i = 0; i < 5; i++) {
          const key = randomBytes(keyLength);
          const message = randomBytes(messageLength);
          expect(mac(key, message).toString('hex')).toBe(native(key, message).toString('hex'));
        }
    for (let i = 0; i < 2000; i++) {
      const key = randomBytes(32);
      const hmacKey = new HmacSha256Key(key);
      const message = randomBytes(Math.floor(Math.random() * 300));
      expect(hmacKey.mac(message).equals(native(key, message))).toBe(true);
    }
  });

  it('a key gives the same MAC every time and a fresh buffer each call', () => {
    const key = new HmacSha256Key(randomBytes(32));
    const message = randomBytes(35);
    const first = key.mac(message);
    const other = key.mac(randomBytes(35));
    expect(key.mac(message).equals(first)).toBe(true);
    expect(other.equals(first)).toBe(false);
  });
});
