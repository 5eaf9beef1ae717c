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

/** r = (a + b) mod 2^64. */
export function add64(ah: number, al: number, bh: number, bl: number): void {
  const lo = al + bl;
  r.lo = lo >>> 0;
  r.hi = (ah + bh + (lo > 0xffffffff ? 1 : 0)) >>> 0;
}

/** Little-endian u32 at byte offset `o`. */
export function readLE32(b: Uint8Array, o: number): number {
  return (b[o] | (b[o + 1] << 8) | (b[o + 2] << 16) | (b[o + 3] << 24)) >>> 0;
}
