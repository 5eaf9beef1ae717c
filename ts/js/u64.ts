/**
 * 64-bit unsigned arithmetic on pairs of u32 numbers, for the pure-JS XXH3.
 *
 * BigInt arithmetic allocates on every operation and is ~50x slower than number math in V8, so
 * every 64-bit value is carried as (hi, lo) uint32 numbers. Functions that produce a 64-bit value
 * write it to the shared result registers `r.hi` / `r.lo` instead of returning an object: the
 * callers read them immediately, and no allocation happens on the hot path.
 * @internal
 * @module
 */

/** Result registers of the 64-bit helpers. Read them right after the call that wrote them. */
export const r = { hi: 0, lo: 0 };

const TWO_32 = 4294967296;

/** High 32 bits of the 64-bit product of two u32 values (all intermediates stay below 2^53). */
export function mulHi32(a: number, b: number): number {
  const x = a * (b & 0xffff);
  const y = a * (b >>> 16);
  const t = x + (y % 65536) * 65536;
  return (Math.floor(y / 65536) + Math.floor(t / TWO_32)) >>> 0;
}

/** r = (a * b) mod 2^64. */
export function mul64(ah: number, al: number, bh: number, bl: number): void {
  r.lo = Math.imul(al, bl) >>> 0;
  r.hi = (mulHi32(al, bl) + Math.imul(ah, bl) + Math.imul(al, bh)) >>> 0;
}

/** r = low 64 bits XOR high 64 bits of the 128-bit product a * b (XXH3's mul128_fold64). */
export function mulFold64(ah: number, al: number, bh: number, bl: number): void {
  const p0l = Math.imul(al, bl) >>> 0;
  const p0h = mulHi32(al, bl);
  const p1l = Math.imul(al, bh) >>> 0;
  const p1h = mulHi32(al, bh);
  const p2l = Math.imul(ah, bl) >>> 0;
  const p2h = mulHi32(ah, bl);
  const p3l = Math.imul(ah, bh) >>> 0;
  const p3h = mulHi32(ah, bh);
  const w1 = p0h + p1l + p2l;
  const w2 = p1h + p2h + p3l + Math.floor(w1 / TWO_32);
  const w3 = p3h + Math.floor(w2 / TWO_32);
  // product = w3 : w2 : w1 : p0l (32-bit limbs); fold = (w1:p0l) ^ (w3:w2)
  r.hi = ((w1 >>> 0) ^ (w3 >>> 0)) >>> 0;
  r.lo = (p0l ^ (w2 >>> 0)) >>> 0;
}

/** r = (a + b) mod 2^64. */
export function add64(ah: number, al: number, bh: number, bl: number): void {
  const lo = al + bl;
  r.lo = lo >>> 0;
  r.hi = (ah + bh + (lo > 0xffffffff ? 1 : 0)) >>> 0;
}

/** r = (a - b) mod 2^64. */
export function sub64(ah: number, al: number, bh: number, bl: number): void {
  const lo = al - bl;
  r.lo = lo >>> 0;
  r.hi = (ah - bh - (lo < 0 ? 1 : 0)) >>> 0;
}

/** Reverses the byte order of a u32. */
export function bswap32(x: number): number {
  return ((x >>> 24) | ((x >>> 8) & 0xff00) | ((x & 0xff00) << 8) | (x << 24)) >>> 0;
}

/** Little-endian u32 at byte offset `o`. */
export function readLE32(b: Uint8Array, o: number): number {
  return (b[o] | (b[o + 1] << 8) | (b[o + 2] << 16) | (b[o + 3] << 24)) >>> 0;
}

/** Splits a bigint in [0, 2^64) into r.hi / r.lo. */
export function splitBigInt(v: bigint): void {
  r.hi = Number(v >> 32n);
  r.lo = Number(v & 0xffffffffn);
}

/** Joins (hi, lo) into a bigint; used only at API boundaries, never in loops. */
export function joinBigInt(hi: number, lo: number): bigint {
  return (BigInt(hi) << 32n) | BigInt(lo);
}
