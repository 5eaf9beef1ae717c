/**
 * XXH3-64 with a full 64-bit seed, in plain TypeScript, bit-identical to xxhash-rust's
 * `xxh3_64_with_seed` (which Dynamo uses). No pure-JS XXH3-64 exists on npm, and the pure-JS
 * backend must produce the same block hashes as the native one.
 *
 * Speed matters here (every request is hashed), so the code trades elegance for V8-friendliness:
 * every 64-bit quantity is a (hi, lo) pair of u32 numbers,  32×32-bit products use a double product
 * corrected by an exact low half, intermediate results live in module-level variables
 * instead of returned objects, the secret is pre-combined with the seed once per seed, and aligned
 * input is read as 32-bit words. Hot module state is declared with `var`, which spares V8 the
 * temporal-dead-zone checks it emits for `let` (about 5% here). The result of {@link xxh3} /
 * {@link xxh3Words} lands in `r`.
 * @internal
 * @module
 */

import { r, readLE32 } from './u64.js';
import { DEFAULT_SECRET, DEFAULT_WORDS, keysForSeed, longSecret, SECRET_SIZE, type SeedKeys } from './xxh3-secret.js';

const STRIPE_LEN = 64;
const STRIPES_PER_BLOCK = (SECRET_SIZE - STRIPE_LEN) / 8;
const BLOCK_LEN = STRIPE_LEN * STRIPES_PER_BLOCK;
/** Where the 129..240-byte path reads the secret for its last 16 bytes (136 - 17). */
const MIDSIZE_LAST_SECRET_OFFSET = 119;
const INV_2_32 = 2 ** -32;
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

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

// ---- 64-bit helpers writing to module registers -------------------------------------------

/** Product registers of {@link mul32}. */
var PH = 0;
var PL = 0;

/**
 * (PH, PL) = a * b for u32 a and b, exactly. The low half comes from `Math.imul`; the high half
 * from the double product, whose rounding error (at most 2^12 near 2^64) vanishes when the exact
 * multiple of 2^32 it approximates is scaled down and rounded. Rounding is `(v + 0.5) >>> 0`:
 * v lies within 2^-20 of an integer in [0, 2^32), so truncating v + 0.5 rounds it, and is
 * cheaper than `Math.round`.
 */
function mul32(a: number, b: number): void {
  const lo = Math.imul(a, b) >>> 0;
  PL = lo;
  PH = ((a * b - lo) * INV_2_32 + 0.5) >>> 0;
}

/** r = (a * b) mod 2^64. */
function mul64(ah: number, al: number, bh: number, bl: number): void {
  mul32(al, bl);
  r.lo = PL;
  r.hi = (PH + Math.imul(ah, bl) + Math.imul(al, bh)) >>> 0;
}

/** Fold registers of {@link mulFold64}. */
var FH = 0;
var FL = 0;

/**
 * (FH, FL) = low 64 bits XOR high 64 bits of the 128-bit product a * b (XXH3's mul128_fold64).
 * The four 32×32 products are inlined: this is the hottest function of block hashing.
 */
function mulFold64(ah: number, al: number, bh: number, bl: number): void {
  const p0l = Math.imul(al, bl) >>> 0;
  const p0h = ((al * bl - p0l) * INV_2_32 + 0.5) >>> 0;
  const p1l = Math.imul(al, bh) >>> 0;
  const p1h = ((al * bh - p1l) * INV_2_32 + 0.5) >>> 0;
  const p2l = Math.imul(ah, bl) >>> 0;
  const p2h = ((ah * bl - p2l) * INV_2_32 + 0.5) >>> 0;
  const p3l = Math.imul(ah, bh) >>> 0;
  const p3h = ((ah * bh - p3l) * INV_2_32 + 0.5) >>> 0;
  const w1 = p0h + p1l + p2l;
  const r1 = w1 >>> 0;
  const w2 = p1h + p2h + p3l + (w1 - r1) * INV_2_32;
  const r2 = w2 >>> 0;
  const r3 = (p3h + (w2 - r2) * INV_2_32) >>> 0;
  FH = (r1 ^ r3) >>> 0;
  FL = (p0l ^ r2) >>> 0;
}

function bswap32(x: number): number {
  return ((x >>> 24) | ((x >>> 8) & 0xff00) | ((x & 0xff00) << 8) | (x << 24)) >>> 0;
}

// ---- input ---------------------------------------------------------------------------------

const EMPTY8 = new Uint8Array(0);
const EMPTY32 = new Uint32Array(0);
/** The input being hashed: 32-bit words when aligned (`useWords`), else bytes; from `base`. */
var W: Uint32Array = EMPTY32;
var B: Uint8Array = EMPTY8;
var useWords = false;
var base = 0;

/** Little-endian u32 at input offset `o`. */
function rd(o: number): number {
  const p = base + o;
  return useWords ? W[p >>> 2] : (B[p] | (B[p + 1] << 8) | (B[p + 2] << 16) | (B[p + 3] << 24)) >>> 0;
}

// ---- seed keys (see xxh3-secret.ts) -----------------------------------------------------------

const SH = DEFAULT_WORDS.hi;
const SL = DEFAULT_WORDS.lo;
/** The keys of the seed being hashed with. */
var K: SeedKeys = keysForSeed(0, 0);

function useSeed(seedH: number, seedL: number): void {
  if (K.seedH !== seedH || K.seedL !== seedL) K = keysForSeed(seedH, seedL);
}

// ---- final mixes ---------------------------------------------------------------------------

/** XXH3's final mix for inputs of 9 bytes and more. */
function avalanche(h: number, l: number): void {
  mul64(h, (l ^ (h >>> 5)) >>> 0, MX1_H, MX1_L);
  r.lo = (r.lo ^ r.hi) >>> 0;
}

/** XXH64's final mix, which XXH3 uses for inputs of 0 to 3 bytes. */
function avalancheXxh64(h: number, l: number): void {
  mul64(h, (l ^ (h >>> 1)) >>> 0, P64_2_H, P64_2_L);
  const nl = (r.lo ^ ((r.lo >>> 29) | (r.hi << 3))) >>> 0;
  const nh = (r.hi ^ (r.hi >>> 29)) >>> 0;
  mul64(nh, nl, P64_3_H, P64_3_L);
  r.lo = (r.lo ^ r.hi) >>> 0;
}

// ---- short inputs --------------------------------------------------------------------------

function hash0(seedH: number, seedL: number): void {
  avalancheXxh64((seedH ^ SH[56] ^ SH[64]) >>> 0, (seedL ^ SL[56] ^ SL[64]) >>> 0);
}

function hash1to3(len: number, seedH: number, seedL: number): void {
  const p = base;
  const combined = ((B[p] << 16) | (B[p + (len >>> 1)] << 24) | B[p + len - 1] | (len << 8)) >>> 0;
  const flip = (readLE32(DEFAULT_SECRET, 0) ^ readLE32(DEFAULT_SECRET, 4)) >>> 0;
  const lo = seedL + flip;
  const hi = (seedH + (lo > 0xffffffff ? 1 : 0)) >>> 0;
  avalancheXxh64(hi, ((lo >>> 0) ^ combined) >>> 0);
}

function hash4to8(len: number, seedH: number, seedL: number): void {
  const sh = (seedH ^ bswap32(seedL)) >>> 0;
  // bitflip = (secret[8..] ^ secret[16..]) - seed
  const fl = ((SL[8] ^ SL[16]) >>> 0) - seedL;
  const fh = ((SH[8] ^ SH[16]) >>> 0) - sh - (fl < 0 ? 1 : 0);
  let h = (rd(0) ^ fh) >>> 0;
  let l = (rd(len - 4) ^ fl) >>> 0;
  // rrmxmx: h ^= rotl(h, 49) ^ rotl(h, 24); h *= MX2; h ^= (h >> 35) + len; h *= MX2; h ^= h >> 28
  const nh = (h ^ ((l << 17) | (h >>> 15)) ^ ((h << 24) | (l >>> 8))) >>> 0;
  const nl = (l ^ ((h << 17) | (l >>> 15)) ^ ((l << 24) | (h >>> 8))) >>> 0;
  mul64(nh, nl, MX2_H, MX2_L);
  mul64(r.hi, (r.lo ^ ((r.hi >>> 3) + len)) >>> 0, MX2_H, MX2_L);
  h = r.hi;
  l = r.lo;
  r.lo = (l ^ ((l >>> 28) | (h << 4))) >>> 0;
  r.hi = (h ^ (h >>> 28)) >>> 0;
}

function hash9to16(len: number): void {
  // input_lo ^ ((secret[24] ^ secret[32]) + seed), input_hi ^ ((secret[40] ^ secret[48]) - seed)
  const l1 = ((SL[24] ^ SL[32]) >>> 0) + K.seedL;
  const loH = (rd(4) ^ (((SH[24] ^ SH[32]) >>> 0) + K.seedH + (l1 > 0xffffffff ? 1 : 0))) >>> 0;
  const loL = (rd(0) ^ l1) >>> 0;
  const l2 = ((SL[40] ^ SL[48]) >>> 0) - K.seedL;
  const hiH = (rd(len - 4) ^ (((SH[40] ^ SH[48]) >>> 0) - K.seedH - (l2 < 0 ? 1 : 0))) >>> 0;
  const hiL = (rd(len - 8) ^ l2) >>> 0;
  mulFold64(loH, loL, hiH, hiL);
  // acc = len + bswap64(input_lo) + input_hi + fold
  const a = FL + len + bswap32(loH) + hiL;
  const accL = a >>> 0;
  const accH = (FH + bswap32(loL) + hiH + (a - accL) * INV_2_32) >>> 0;
  avalanche(accH, accL);
}

// ---- 17..240 bytes -------------------------------------------------------------------------

var accH = 0;
var accL = 0;

/** acc += mul128_fold64(in[o..] ^ (secret[s..] + seed), in[o+8..] ^ (secret[s+8..] - seed)). */
function mix16(o: number, s: number): void {
  let i0: number;
  let i1: number;
  let i2: number;
  let i3: number;
  if (useWords) {
    const p = (base + o) >>> 2;
    i0 = W[p];
    i1 = W[p + 1];
    i2 = W[p + 2];
    i3 = W[p + 3];
  } else {
    i0 = rd(o);
    i1 = rd(o + 4);
    i2 = rd(o + 8);
    i3 = rd(o + 12);
  }
  const k = K;
  mulFold64((i1 ^ k.plusH[s]) >>> 0, (i0 ^ k.plusL[s]) >>> 0, (i3 ^ k.minusH[s]) >>> 0, (i2 ^ k.minusL[s]) >>> 0);
  const lo = accL + FL;
  accL = lo >>> 0;
  accH = (accH + FH + (lo > 0xffffffff ? 1 : 0)) >>> 0;
}

function startAcc(len: number): void {
  mul64(0, len, P64_1_H, P64_1_L);
  accH = r.hi;
  accL = r.lo;
}

function hash17to128(len: number): void {
  startAcc(len);
  if (len > 32) {
    if (len > 64) {
      if (len > 96) {
        mix16(48, 96);
        mix16(len - 64, 112);
      }
      mix16(32, 64);
      mix16(len - 48, 80);
    }
    mix16(16, 32);
    mix16(len - 32, 48);
  }
  mix16(0, 0);
  mix16(len - 16, 16);
  avalanche(accH, accL);
}

/** The (input offset, secret offset) pairs hash17to128 mixes, in its order, per input length. */
const schedules: Int32Array[] = [];

function schedule(len: number): Int32Array {
  let pairs = schedules[len];
  if (pairs) return pairs;
  const out: number[] = [];
  if (len > 32) {
    if (len > 64) {
      if (len > 96) out.push(48, 96, len - 64, 112);
      out.push(32, 64, len - 48, 80);
    }
    out.push(16, 32, len - 32, 48);
  }
  out.push(0, 0, len - 16, 16);
  pairs = Int32Array.from(out);
  schedules[len] = pairs;
  return pairs;
}

/**
 * hash17to128 for aligned word input (token blocks of up to 32 tokens: the hot path), with the
 * accumulator in locals and the mix order from a per-length schedule.
 */
function hashWords17to128(len: number): void {
  const pairs = schedule(len);
  const k = K;
  const w = W;
  const b = base >>> 2;
  mul64(0, len, P64_1_H, P64_1_L);
  let sumL = r.lo;
  let sumH = r.hi;
  for (let i = 0; i < pairs.length; i += 2) {
    const p = b + (pairs[i] >>> 2);
    const sec = pairs[i + 1];
    mulFold64(
      (w[p + 1] ^ k.plusH[sec]) >>> 0,
      (w[p] ^ k.plusL[sec]) >>> 0,
      (w[p + 3] ^ k.minusH[sec]) >>> 0,
      (w[p + 2] ^ k.minusL[sec]) >>> 0,
    );
    // Sums of at most 8 u32 terms stay exact in a double; carries are settled once at the end.
    sumL += FL;
    sumH += FH;
  }
  const lo = sumL >>> 0;
  avalanche((sumH + (sumL - lo) * INV_2_32) >>> 0, lo);
}

function hash129to240(len: number): void {
  startAcc(len);
  const rounds = len >>> 4;
  for (let i = 0; i < 8; i++) mix16(16 * i, 16 * i);
  avalanche(accH, accL);
  accH = r.hi;
  accL = r.lo;
  for (let i = 8; i < rounds; i++) mix16(16 * i, 16 * (i - 8) + 3);
  mix16(len - 16, MIDSIZE_LAST_SECRET_OFFSET);
  avalanche(accH, accL);
}

// ---- over 240 bytes ------------------------------------------------------------------------

const ACC_H = new Uint32Array(8);
const ACC_L = new Uint32Array(8);

function accumulate512(o: number, kh: Uint32Array, kl: Uint32Array, s: number): void {
  for (let i = 0; i < 8; i++) {
    const dl = rd(o + 8 * i);
    const dh = rd(o + 8 * i + 4);
    const j = i ^ 1;
    // acc[i ^ 1] += data
    const lo = ACC_L[j] + dl;
    ACC_L[j] = lo;
    ACC_H[j] = ACC_H[j] + dh + (lo > 0xffffffff ? 1 : 0);
    // acc[i] += lo32(key) * hi32(key), a full 64-bit product
    mul32((dl ^ kl[s + 8 * i]) >>> 0, (dh ^ kh[s + 8 * i]) >>> 0);
    const lo2 = ACC_L[i] + PL;
    ACC_L[i] = lo2;
    ACC_H[i] = ACC_H[i] + PH + (lo2 > 0xffffffff ? 1 : 0);
  }
}

function scramble(kh: Uint32Array, kl: Uint32Array, s: number): void {
  for (let i = 0; i < 8; i++) {
    const h = ACC_H[i];
    mul64((h ^ kh[s + 8 * i]) >>> 0, (ACC_L[i] ^ (h >>> 15) ^ kl[s + 8 * i]) >>> 0, 0, P32_1);
    ACC_H[i] = r.hi;
    ACC_L[i] = r.lo;
  }
}

function hashLong(len: number): void {
  const { hi: kh, lo: kl } = longSecret(K);
  ACC_H[0] = 0;
  ACC_L[0] = P32_3;
  ACC_H[1] = P64_1_H;
  ACC_L[1] = P64_1_L;
  ACC_H[2] = P64_2_H;
  ACC_L[2] = P64_2_L;
  ACC_H[3] = P64_3_H;
  ACC_L[3] = P64_3_L;
  ACC_H[4] = P64_4_H;
  ACC_L[4] = P64_4_L;
  ACC_H[5] = 0;
  ACC_L[5] = P32_2;
  ACC_H[6] = P64_5_H;
  ACC_L[6] = P64_5_L;
  ACC_H[7] = 0;
  ACC_L[7] = P32_1;
  const blocks = Math.floor((len - 1) / BLOCK_LEN);
  for (let n = 0; n < blocks; n++) {
    for (let s = 0; s < STRIPES_PER_BLOCK; s++) accumulate512(n * BLOCK_LEN + s * STRIPE_LEN, kh, kl, s * 8);
    scramble(kh, kl, SECRET_SIZE - STRIPE_LEN);
  }
  const stripes = Math.floor((len - 1 - BLOCK_LEN * blocks) / STRIPE_LEN);
  for (let s = 0; s < stripes; s++) accumulate512(blocks * BLOCK_LEN + s * STRIPE_LEN, kh, kl, s * 8);
  accumulate512(len - STRIPE_LEN, kh, kl, SECRET_SIZE - STRIPE_LEN - 7);
  startAcc(len);
  for (let i = 0; i < 4; i++) {
    const s = 11 + 16 * i;
    mulFold64(
      (ACC_H[2 * i] ^ kh[s]) >>> 0,
      (ACC_L[2 * i] ^ kl[s]) >>> 0,
      (ACC_H[2 * i + 1] ^ kh[s + 8]) >>> 0,
      (ACC_L[2 * i + 1] ^ kl[s + 8]) >>> 0,
    );
    const lo = accL + FL;
    accL = lo >>> 0;
    accH = (accH + FH + (lo > 0xffffffff ? 1 : 0)) >>> 0;
  }
  avalanche(accH, accL);
}

// ---- entry points --------------------------------------------------------------------------

function dispatch(len: number, seedH: number, seedL: number): void {
  useSeed(seedH, seedL);
  if (len <= 16) {
    if (len > 8) hash9to16(len);
    else if (len >= 4) hash4to8(len, seedH, seedL);
    else if (len > 0) hash1to3(len, seedH, seedL);
    else hash0(seedH, seedL);
  } else if (len <= 128) {
    if (useWords) hashWords17to128(len);
    else hash17to128(len);
  } else if (len <= 240) hash129to240(len);
  else hashLong(len);
}

/**
 * XXH3-64 of `len` bytes of `b` from offset `o`, seeded with (seedH, seedL).
 * The hash lands in `r.hi` / `r.lo`.
 */
export function xxh3(b: Uint8Array, o: number, len: number, seedH: number, seedL: number): void {
  B = b;
  useWords = false;
  base = o;
  dispatch(len, seedH, seedL);
}

/**
 * XXH3-64 of `len` bytes (a multiple of 4) starting at word `wordOffset` of `w`, whose words are
 * the input's little-endian u32s. Only valid on little-endian hosts ({@link canHashWords}).
 */
export function xxh3Words(w: Uint32Array, wordOffset: number, len: number, seedH: number, seedL: number): void {
  W = w;
  useWords = true;
  base = wordOffset * 4;
  dispatch(len, seedH, seedL);
}

/**
 * The batch loop for 64-byte windows (16-token blocks, vLLM's default block size): the four
 * mixes of the 17..128-byte path unrolled, with the 16 seed-keyed secret words held in locals
 * for the whole batch. Same result as the generic path.
 */
function hashBatch64(w: Uint32Array, strideWords: number, count: number, out: Uint32Array): void {
  const k = K;
  // mix order for 64 bytes: (in 16, secret 32), (32, 48), (0, 0), (48, 16)
  const a0h = k.plusH[32];
  const a0l = k.plusL[32];
  const b0h = k.minusH[32];
  const b0l = k.minusL[32];
  const a1h = k.plusH[48];
  const a1l = k.plusL[48];
  const b1h = k.minusH[48];
  const b1l = k.minusL[48];
  const a2h = k.plusH[0];
  const a2l = k.plusL[0];
  const b2h = k.minusH[0];
  const b2l = k.minusL[0];
  const a3h = k.plusH[16];
  const a3l = k.plusL[16];
  const b3h = k.minusH[16];
  const b3l = k.minusL[16];
  mul64(0, 64, P64_1_H, P64_1_L);
  const startH = r.hi;
  const startL = r.lo;
  for (let i = 0; i < count; i++) {
    const p = i * strideWords;
    let sumL = startL;
    let sumH = startH;
    mulFold64((w[p + 5] ^ a0h) >>> 0, (w[p + 4] ^ a0l) >>> 0, (w[p + 7] ^ b0h) >>> 0, (w[p + 6] ^ b0l) >>> 0);
    sumL += FL;
    sumH += FH;
    mulFold64((w[p + 9] ^ a1h) >>> 0, (w[p + 8] ^ a1l) >>> 0, (w[p + 11] ^ b1h) >>> 0, (w[p + 10] ^ b1l) >>> 0);
    sumL += FL;
    sumH += FH;
    mulFold64((w[p + 1] ^ a2h) >>> 0, (w[p] ^ a2l) >>> 0, (w[p + 3] ^ b2h) >>> 0, (w[p + 2] ^ b2l) >>> 0);
    sumL += FL;
    sumH += FH;
    mulFold64((w[p + 13] ^ a3h) >>> 0, (w[p + 12] ^ a3l) >>> 0, (w[p + 15] ^ b3h) >>> 0, (w[p + 14] ^ b3l) >>> 0);
    sumL += FL;
    sumH += FH;
    const lo = sumL >>> 0;
    avalanche((sumH + (sumL - lo) * INV_2_32) >>> 0, lo);
    out[2 * i] = r.lo;
    out[2 * i + 1] = r.hi;
  }
}

/**
 * Hashes `count` windows of `windowBytes` bytes (a multiple of 4), window i starting at word
 * `i * strideWords` of `w`, writing each hash as (lo, hi) into `out[2i]`, `out[2i + 1]`: the block
 * hashes of a request in one call, with the seed and length dispatch done once.
 */
export function xxh3WordsBatch(
  w: Uint32Array,
  strideWords: number,
  count: number,
  windowBytes: number,
  seedH: number,
  seedL: number,
  out: Uint32Array,
): void {
  W = w;
  useWords = true;
  useSeed(seedH, seedL);
  if (windowBytes === 64) {
    hashBatch64(w, strideWords, count, out);
    return;
  }
  const fast = windowBytes > 16 && windowBytes <= 128;
  for (let i = 0; i < count; i++) {
    base = i * strideWords * 4;
    if (fast) hashWords17to128(windowBytes);
    else dispatch(windowBytes, seedH, seedL);
    out[2 * i] = r.lo;
    out[2 * i + 1] = r.hi;
  }
}

/** Whether {@link xxh3Words} may be used: typed-array words are little-endian on this host. */
export const canHashWords = LITTLE_ENDIAN;
