/**
 * XXH3-64 with a full 64-bit seed, in plain TypeScript, bit-identical to xxhash-rust's
 * `xxh3_64_with_seed` (which Dynamo uses). No pure-JS XXH3-64 exists on npm, and the pure-JS
 * backend must produce the same block hashes as the native one.
 *
 * Every 64-bit quantity is a (hi, lo) pair of u32 numbers (see `u64.ts`); the result of
 * {@link xxh3} lands in `r.hi` / `r.lo`.
 * @internal
 * @module
 */

import { add64, bswap32, mul64, mulFold64, mulHi32, r, readLE32, sub64 } from './u64.js';

/** XXH3's 192-byte default secret (a constant of the XXH3 specification). */
// biome-ignore format: a 16-byte-per-line table is easier to check against the specification.
const DEFAULT_SECRET = new Uint8Array([
  0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
  0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
  0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
  0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
  0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
  0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
  0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
  0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
  0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
  0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
  0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
  0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
]);
const SECRET_SIZE = 192;
const STRIPE_LEN = 64;
const STRIPES_PER_BLOCK = (SECRET_SIZE - STRIPE_LEN) / 8;
const BLOCK_LEN = STRIPE_LEN * STRIPES_PER_BLOCK;
/** Where the 129..240-byte path reads the secret for its last 16 bytes (136 - 17). */
const MIDSIZE_LAST_SECRET_OFFSET = 119;

// Primes as (hi, lo) halves.
const P32_1 = 0x9e3779b1;
const P32_2 = 0x85ebca77;
const P32_3 = 0xc2b2ae3d;
const P64_1_H = 0x9e3779b1;
const P64_1_L = 0x85ebca87;
const P64_2_H = 0xc2b2ae3d;
const P64_2_L = 0x27d4eb4f;
const P64_3_H = 0x165667b1;
const P64_3_L = 0x9e3779f9;
const P64_4_H = 0x85ebca77;
const P64_4_L = 0xc2b2ae63;
const P64_5_H = 0x27d4eb2f;
const P64_5_L = 0x165667c5;
const MX1_H = 0x16566791;
const MX1_L = 0x9e3779f9;
const MX2_H = 0x9fb21c65;
const MX2_L = 0x1e98df25;

/**
 * The secret's little-endian u64 at every byte offset, precomputed because the short paths read
 * the secret at unaligned offsets (3, 7, 11, 119 ...).
 */
function secretWords(secret: Uint8Array): { hi: Uint32Array; lo: Uint32Array } {
  const n = secret.length - 7;
  const hi = new Uint32Array(n);
  const lo = new Uint32Array(n);
  for (let o = 0; o < n; o++) {
    lo[o] = readLE32(secret, o);
    hi[o] = readLE32(secret, o + 4);
  }
  return { hi, lo };
}

const DEFAULT_WORDS = secretWords(DEFAULT_SECRET);
const SH = DEFAULT_WORDS.hi;
const SL = DEFAULT_WORDS.lo;

/** XXH3's final mix for inputs of 9 bytes and more. */
function avalanche(h: number, l: number): void {
  l = (l ^ (h >>> 5)) >>> 0;
  mul64(h, l, MX1_H, MX1_L);
  r.lo = (r.lo ^ r.hi) >>> 0;
}

/** XXH64's final mix, which XXH3 uses for inputs of 0 to 3 bytes. */
function avalancheXxh64(h: number, l: number): void {
  l = (l ^ (h >>> 1)) >>> 0;
  mul64(h, l, P64_2_H, P64_2_L);
  h = r.hi;
  l = (r.lo ^ ((r.lo >>> 29) | (r.hi << 3))) >>> 0;
  h = (h ^ (h >>> 29)) >>> 0;
  mul64(h, l, P64_3_H, P64_3_L);
  r.lo = (r.lo ^ r.hi) >>> 0;
}

function hash0(seedH: number, seedL: number): void {
  avalancheXxh64((seedH ^ SH[56] ^ SH[64]) >>> 0, (seedL ^ SL[56] ^ SL[64]) >>> 0);
}

function hash1to3(b: Uint8Array, o: number, len: number, seedH: number, seedL: number): void {
  const combined = ((b[o] << 16) | (b[o + (len >>> 1)] << 24) | b[o + len - 1] | (len << 8)) >>> 0;
  add64(seedH, seedL, 0, (readLE32(DEFAULT_SECRET, 0) ^ readLE32(DEFAULT_SECRET, 4)) >>> 0);
  avalancheXxh64(r.hi, (r.lo ^ combined) >>> 0);
}

function hash4to8(b: Uint8Array, o: number, len: number, seedH: number, seedL: number): void {
  seedH = (seedH ^ bswap32(seedL)) >>> 0;
  const in1 = readLE32(b, o);
  const in2 = readLE32(b, o + len - 4);
  sub64((SH[8] ^ SH[16]) >>> 0, (SL[8] ^ SL[16]) >>> 0, seedH, seedL);
  let h = (in1 ^ r.hi) >>> 0;
  let l = (in2 ^ r.lo) >>> 0;
  // rrmxmx: h ^= rotl(h, 49) ^ rotl(h, 24)
  const nh = (h ^ ((l << 17) | (h >>> 15)) ^ ((h << 24) | (l >>> 8))) >>> 0;
  const nl = (l ^ ((h << 17) | (l >>> 15)) ^ ((l << 24) | (h >>> 8))) >>> 0;
  mul64(nh, nl, MX2_H, MX2_L);
  h = r.hi;
  l = (r.lo ^ ((r.hi >>> 3) + len)) >>> 0;
  mul64(h, l, MX2_H, MX2_L);
  h = r.hi;
  l = r.lo;
  r.lo = (l ^ ((l >>> 28) | (h << 4))) >>> 0;
  r.hi = (h ^ (h >>> 28)) >>> 0;
}

function hash9to16(b: Uint8Array, o: number, len: number, seedH: number, seedL: number): void {
  add64((SH[24] ^ SH[32]) >>> 0, (SL[24] ^ SL[32]) >>> 0, seedH, seedL);
  const loH = (readLE32(b, o + 4) ^ r.hi) >>> 0;
  const loL = (readLE32(b, o) ^ r.lo) >>> 0;
  sub64((SH[40] ^ SH[48]) >>> 0, (SL[40] ^ SL[48]) >>> 0, seedH, seedL);
  const hiH = (readLE32(b, o + len - 4) ^ r.hi) >>> 0;
  const hiL = (readLE32(b, o + len - 8) ^ r.lo) >>> 0;
  mulFold64(loH, loL, hiH, hiL);
  let accH = r.hi;
  let accL = r.lo;
  add64(accH, accL, 0, len);
  add64(r.hi, r.lo, bswap32(loL), bswap32(loH));
  add64(r.hi, r.lo, hiH, hiL);
  accH = r.hi;
  accL = r.lo;
  avalanche(accH, accL);
}

// Accumulator of the 17..240 byte paths, kept in module state to avoid returning pairs.
let accH = 0;
let accL = 0;

/** acc += mul128_fold64(in[o..] ^ (secret[s..] + seed), in[o+8..] ^ (secret[s+8..] - seed)). */
function mix16(b: Uint8Array, o: number, s: number, seedH: number, seedL: number): void {
  add64(SH[s], SL[s], seedH, seedL);
  const aH = (readLE32(b, o + 4) ^ r.hi) >>> 0;
  const aL = (readLE32(b, o) ^ r.lo) >>> 0;
  sub64(SH[s + 8], SL[s + 8], seedH, seedL);
  const bH = (readLE32(b, o + 12) ^ r.hi) >>> 0;
  const bL = (readLE32(b, o + 8) ^ r.lo) >>> 0;
  mulFold64(aH, aL, bH, bL);
  add64(accH, accL, r.hi, r.lo);
  accH = r.hi;
  accL = r.lo;
}

function hash17to128(b: Uint8Array, o: number, len: number, seedH: number, seedL: number): void {
  mul64(0, len, P64_1_H, P64_1_L);
  accH = r.hi;
  accL = r.lo;
  if (len > 32) {
    if (len > 64) {
      if (len > 96) {
        mix16(b, o + 48, 96, seedH, seedL);
        mix16(b, o + len - 64, 112, seedH, seedL);
      }
      mix16(b, o + 32, 64, seedH, seedL);
      mix16(b, o + len - 48, 80, seedH, seedL);
    }
    mix16(b, o + 16, 32, seedH, seedL);
    mix16(b, o + len - 32, 48, seedH, seedL);
  }
  mix16(b, o, 0, seedH, seedL);
  mix16(b, o + len - 16, 16, seedH, seedL);
  avalanche(accH, accL);
}

function hash129to240(b: Uint8Array, o: number, len: number, seedH: number, seedL: number): void {
  mul64(0, len, P64_1_H, P64_1_L);
  accH = r.hi;
  accL = r.lo;
  const rounds = len >>> 4;
  for (let i = 0; i < 8; i++) mix16(b, o + 16 * i, 16 * i, seedH, seedL);
  avalanche(accH, accL);
  accH = r.hi;
  accL = r.lo;
  for (let i = 8; i < rounds; i++) mix16(b, o + 16 * i, 16 * (i - 8) + 3, seedH, seedL);
  mix16(b, o + len - 16, MIDSIZE_LAST_SECRET_OFFSET, seedH, seedL);
  avalanche(accH, accL);
}

// The long path derives a secret from the seed; cache the last one, since a workload hashes
// with one or two seeds (the salt, and 1337 for sequence hashes).
let longSeedH = 0;
let longSeedL = 0;
let longWords = DEFAULT_WORDS;

function secretForSeed(seedH: number, seedL: number): { hi: Uint32Array; lo: Uint32Array } {
  if (seedH === 0 && seedL === 0) return DEFAULT_WORDS;
  if (seedH === longSeedH && seedL === longSeedL && longWords !== DEFAULT_WORDS) return longWords;
  const secret = new Uint8Array(SECRET_SIZE);
  const view = new DataView(secret.buffer);
  for (let i = 0; i < SECRET_SIZE; i += 16) {
    add64(SH[i], SL[i], seedH, seedL);
    view.setUint32(i, r.lo, true);
    view.setUint32(i + 4, r.hi, true);
    sub64(SH[i + 8], SL[i + 8], seedH, seedL);
    view.setUint32(i + 8, r.lo, true);
    view.setUint32(i + 12, r.hi, true);
  }
  longSeedH = seedH;
  longSeedL = seedL;
  longWords = secretWords(secret);
  return longWords;
}

const ACC_H = new Uint32Array(8);
const ACC_L = new Uint32Array(8);

function accumulate512(b: Uint8Array, o: number, kh: Uint32Array, kl: Uint32Array, s: number): void {
  for (let i = 0; i < 8; i++) {
    const dl = readLE32(b, o + 8 * i);
    const dh = readLE32(b, o + 8 * i + 4);
    const keyL = (dl ^ kl[s + 8 * i]) >>> 0;
    const keyH = (dh ^ kh[s + 8 * i]) >>> 0;
    const j = i ^ 1;
    add64(ACC_H[j], ACC_L[j], dh, dl);
    ACC_H[j] = r.hi;
    ACC_L[j] = r.lo;
    // acc[i] += lo32(key) * hi32(key), a full 64-bit product
    add64(ACC_H[i], ACC_L[i], mulHi32(keyL, keyH), Math.imul(keyL, keyH) >>> 0);
    ACC_H[i] = r.hi;
    ACC_L[i] = r.lo;
  }
}

function scramble(kh: Uint32Array, kl: Uint32Array, s: number): void {
  for (let i = 0; i < 8; i++) {
    const h = ACC_H[i];
    const l = (ACC_L[i] ^ (h >>> 15) ^ kl[s + 8 * i]) >>> 0;
    mul64((h ^ kh[s + 8 * i]) >>> 0, l, 0, P32_1);
    ACC_H[i] = r.hi;
    ACC_L[i] = r.lo;
  }
}

function hashLong(b: Uint8Array, o: number, len: number, seedH: number, seedL: number): void {
  const { hi: kh, lo: kl } = secretForSeed(seedH, seedL);
  ACC_H.set([0, P64_1_H, P64_2_H, P64_3_H, P64_4_H, 0, P64_5_H, 0]);
  ACC_L.set([P32_3, P64_1_L, P64_2_L, P64_3_L, P64_4_L, P32_2, P64_5_L, P32_1]);
  const blocks = Math.floor((len - 1) / BLOCK_LEN);
  for (let n = 0; n < blocks; n++) {
    for (let s = 0; s < STRIPES_PER_BLOCK; s++) accumulate512(b, o + n * BLOCK_LEN + s * STRIPE_LEN, kh, kl, s * 8);
    scramble(kh, kl, SECRET_SIZE - STRIPE_LEN);
  }
  const stripes = Math.floor((len - 1 - BLOCK_LEN * blocks) / STRIPE_LEN);
  for (let s = 0; s < stripes; s++) accumulate512(b, o + blocks * BLOCK_LEN + s * STRIPE_LEN, kh, kl, s * 8);
  accumulate512(b, o + len - STRIPE_LEN, kh, kl, SECRET_SIZE - STRIPE_LEN - 7);
  mul64(0, len, P64_1_H, P64_1_L);
  accH = r.hi;
  accL = r.lo;
  for (let i = 0; i < 4; i++) {
    const s = 11 + 16 * i;
    mulFold64(
      (ACC_H[2 * i] ^ kh[s]) >>> 0,
      (ACC_L[2 * i] ^ kl[s]) >>> 0,
      (ACC_H[2 * i + 1] ^ kh[s + 8]) >>> 0,
      (ACC_L[2 * i + 1] ^ kl[s + 8]) >>> 0,
    );
    add64(accH, accL, r.hi, r.lo);
    accH = r.hi;
    accL = r.lo;
  }
  avalanche(accH, accL);
}

/**
 * XXH3-64 of `len` bytes of `b` from offset `o`, seeded with (seedH, seedL).
 * The hash lands in `r.hi` / `r.lo`.
 */
export function xxh3(b: Uint8Array, o: number, len: number, seedH: number, seedL: number): void {
  if (len <= 16) {
    if (len > 8) hash9to16(b, o, len, seedH, seedL);
    else if (len >= 4) hash4to8(b, o, len, seedH, seedL);
    else if (len > 0) hash1to3(b, o, len, seedH, seedL);
    else hash0(seedH, seedL);
  } else if (len <= 128) hash17to128(b, o, len, seedH, seedL);
  else if (len <= 240) hash129to240(b, o, len, seedH, seedL);
  else hashLong(b, o, len, seedH, seedL);
}
