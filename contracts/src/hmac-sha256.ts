import { hash } from 'node:crypto';

/**
 * HMAC-SHA256 (RFC 2104, FIPS 180-4) in plain JavaScript, for short messages under a key used many
 * times: the key's inner and outer pad blocks are compressed once, when the key is made, so a MAC
 * of a message of up to 55 bytes is two SHA-256 compressions and no call into native code. Node's
 * `createHmac` costs 3–5 µs a call whatever the length (object set-up and the native boundary);
 * this costs under a microsecond for a 35-byte message. Why it exists: a journal event is signed
 * once per reader (see `signing.ts`), and signing v2 MACs the event's 32-byte digest.
 *
 * Exact HMAC-SHA256 for any key and message (checked against RFC 4231 and against `createHmac`
 * over random keys and messages in `hmac-sha256.spec.ts`); longer messages take one compression
 * per 64 bytes, slower than native past a few hundred bytes. Not constant-time in the message
 * length (nothing secret depends on it); no branch or table index depends on the key or the data.
 */
export class HmacSha256Key {
  /** The SHA-256 state after the block `key ⊕ ipad`. */
  private readonly inner = new Int32Array(8);
  /** The SHA-256 state after the block `key ⊕ opad`. */
  private readonly outer = new Int32Array(8);

  constructor(key: Uint8Array) {
    // A key longer than a block is hashed first (RFC 2104); a shorter one is zero-padded.
    const k = key.length > BLOCK ? hash('sha256', key, 'buffer') : key;
    const pad = new Uint8Array(BLOCK);
    for (let i = 0; i < BLOCK; i++) pad[i] = (k[i] ?? 0) ^ 0x36;
    this.inner.set(IV);
    absorb(this.inner, pad, 0);
    for (let i = 0; i < BLOCK; i++) pad[i] = (k[i] ?? 0) ^ 0x5c;
    this.outer.set(IV);
    absorb(this.outer, pad, 0);
  }

  /** HMAC-SHA256(key, message): 32 bytes. */
  mac(message: Uint8Array): Buffer {
    const s = STATE;
    s.set(this.inner);
    const length = message.length;
    const whole = length - (length % BLOCK);
    for (let off = 0; off < whole; off += BLOCK) absorb(s, message, off);
    // The rest, the 0x80 byte and the 64-bit length in bits (the pad block counted) fit in one
    // block, or need a second (FIPS 180-4 §5.1.1).
    const rest = length - whole;
    const tail = rest + 9 <= BLOCK ? BLOCK : 2 * BLOCK;
    for (let i = 0; i < rest; i++) TAIL[i] = message[whole + i]!;
    TAIL[rest] = 0x80;
    TAIL.fill(0, rest + 1, tail - 8);
    const bits = (BLOCK + length) * 8;
    writeWord(TAIL, tail - 8, Math.floor(bits / 0x1_0000_0000));
    writeWord(TAIL, tail - 4, bits >>> 0);
    absorb(s, TAIL, 0);
    if (tail > BLOCK) absorb(s, TAIL, BLOCK);
    // The outer hash: the pad block, then the inner digest (32 bytes) padded, as words.
    for (let i = 0; i < 8; i++) W[i] = s[i]!;
    W[8] = 0x80000000 | 0;
    for (let i = 9; i < 15; i++) W[i] = 0;
    W[15] = (BLOCK + 32) * 8;
    s.set(this.outer);
    compress(s);
    const out = Buffer.allocUnsafe(32);
    for (let i = 0; i < 8; i++) writeWord(out, 4 * i, s[i]!);
    return out;
  }
}

const BLOCK = 64;

/** FIPS 180-4 §4.2.2: the first 32 bits of the fractional parts of the cube roots of the first 64 primes. */
const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

/** FIPS 180-4 §5.3.3: the initial hash value. */
const IV = new Int32Array([
  0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
]);

// Scratch, reused: JavaScript runs one call at a time and nothing here awaits.
const W = new Int32Array(64);
const STATE = new Int32Array(8);
const TAIL = new Uint8Array(2 * BLOCK);

/** One block of `bytes` at `off` into the state `s`. */
function absorb(s: Int32Array, bytes: Uint8Array, off: number): void {
  for (let i = 0; i < 16; i++) {
    const o = off + 4 * i;
    W[i] = (bytes[o]! << 24) | (bytes[o + 1]! << 16) | (bytes[o + 2]! << 8) | bytes[o + 3]!;
  }
  compress(s);
}

/** FIPS 180-4 §6.2.2: the block whose 16 words are in `W[0..15]` into the state `s`. */
function compress(s: Int32Array): void {
  const w = W;
  for (let i = 16; i < 64; i++) {
    const w15 = w[i - 15]!;
    const w2 = w[i - 2]!;
    const s0 = ((w15 >>> 7) | (w15 << 25)) ^ ((w15 >>> 18) | (w15 << 14)) ^ (w15 >>> 3);
    const s1 = ((w2 >>> 17) | (w2 << 15)) ^ ((w2 >>> 19) | (w2 << 13)) ^ (w2 >>> 10);
    w[i] = (w[i - 16]! + s0 + w[i - 7]! + s1) | 0;
  }
  let a = s[0]!;
  let b = s[1]!;
  let c = s[2]!;
  let d = s[3]!;
  let e = s[4]!;
  let f = s[5]!;
  let g = s[6]!;
  let h = s[7]!;
  for (let i = 0; i < 64; i++) {
    const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const ch = (e & f) ^ (~e & g);
    const t1 = (h + S1 + ch + K[i]! + w[i]!) | 0;
    const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const maj = (a & b) ^ (a & c) ^ (b & c);
    h = g;
    g = f;
    f = e;
    e = (d + t1) | 0;
    d = c;
    c = b;
    b = a;
    a = (t1 + S0 + maj) | 0;
  }
  s[0] = (s[0]! + a) | 0;
  s[1] = (s[1]! + b) | 0;
  s[2] = (s[2]! + c) | 0;
  s[3] = (s[3]! + d) | 0;
  s[4] = (s[4]! + e) | 0;
  s[5] = (s[5]! + f) | 0;
  s[6] = (s[6]! + g) | 0;
  s[7] = (s[7]! + h) | 0;
}

function writeWord(out: Uint8Array, off: number, word: number): void {
  out[off] = word >>> 24;
  out[off + 1] = (word >>> 16) & 0xff;
  out[off + 2] = (word >>> 8) & 0xff;
  out[off + 3] = word & 0xff;
}
