/**
 * Validated events in the packed columnar layout both backends consume. Validation and packing
 * happen in one pass, once, in TypeScript, so both backends reject exactly the same inputs and
 * the native backend receives a whole batch in one Node-API call.
 *
 * `meta` holds 4 u32 per event: kind, dp rank, flags, count. `words` holds per event: worker id,
 * event id, the parent when flagged, then `count` (block_hash, tokens_hash) pairs for a Stored or
 * `count` hashes for a Removed. Flags: bit 0 a parent follows; bit 1 the device tier; otherwise
 * bits 2-3 name the lower tier (0 host pinned, 1 disk, 2 external). (Mirrors
 * `kvroute_core::index::packed`.)
 * @internal
 * @module
 */

import type { StorageTier } from './types.js';

export const KIND_STORED = 0;
export const KIND_REMOVED = 1;
export const KIND_CLEARED = 2;
export const FLAG_HAS_PARENT = 1;
export const FLAG_DEVICE_TIER = 2;
/** Where a lower tier's index (0 host pinned, 1 disk, 2 external) sits in the flags. */
export const LOWER_TIER_SHIFT = 2;

/** The lower tiers in packed-flag order. */
export const LOWER_TIER_NAMES: readonly StorageTier[] = ['host_pinned', 'disk', 'external'];

/** The flags naming a tier: device, or lower tier 0-2. */
export function tierFlags(lowerTier: number | undefined): number {
  return lowerTier === undefined ? FLAG_DEVICE_TIER : lowerTier << LOWER_TIER_SHIFT;
}

/** The lower tier the flags name (0-2), or `undefined` for the device tier. */
export function lowerTierOf(flags: number): number | undefined {
  return flags & FLAG_DEVICE_TIER ? undefined : (flags >> LOWER_TIER_SHIFT) & 3;
}

/** The tier the flags name, as `RouterEvent.storage_tier` spells it. */
export function storageTierOf(flags: number): StorageTier {
  const lower = lowerTierOf(flags);
  return lower === undefined ? 'device' : LOWER_TIER_NAMES[lower];
}

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
const TWO_32 = 4294967296;

/** A packed batch ready for a backend. */
export interface PackedEvents {
  meta: Uint32Array;
  words: BigUint64Array;
}

/** Growable typed buffers; u64 values are written as u32 halves to avoid BigInt allocation. */
export class PackedWriter {
  private meta: Uint32Array<ArrayBuffer> = new Uint32Array(64);
  private metaLen = 0;
  private words: Uint32Array<ArrayBuffer> = new Uint32Array(256);
  /** The same buffer as u64s: a bigint is stored with no BigInt arithmetic. */
  private words64 = new BigUint64Array(this.words.buffer);
  private wordsLen = 0;

  get eventCount(): number {
    return this.metaLen / 4;
  }

  pushMeta(kind: number, dpRank: number, flags: number, count: number): void {
    if (this.metaLen + 4 > this.meta.length) this.meta = grow(this.meta, this.metaLen + 4);
    this.meta[this.metaLen++] = kind;
    this.meta[this.metaLen++] = dpRank;
    this.meta[this.metaLen++] = flags;
    this.meta[this.metaLen++] = count;
  }

  private ensureWords(): void {
    if (this.wordsLen + 2 > this.words.length) {
      this.words = grow(this.words, this.wordsLen + 2);
      this.words64 = new BigUint64Array(this.words.buffer);
    }
  }

  /** Writes a u64 given as (hi, lo) u32 halves. */
  pushHalves(hi: number, lo: number): void {
    this.ensureWords();
    if (LITTLE_ENDIAN) {
      this.words[this.wordsLen++] = lo;
      this.words[this.wordsLen++] = hi;
    } else {
      this.words[this.wordsLen++] = hi;
      this.words[this.wordsLen++] = lo;
    }
  }

  /** Writes a validated u64 held as a safe integer. */
  pushNumber(n: number): void {
    this.pushHalves(Math.floor(n / TWO_32), n >>> 0);
  }

  /** Writes a bigint already checked to be in [0, 2^64). */
  pushBigInt(v: bigint): void {
    this.ensureWords();
    this.words64[this.wordsLen >>> 1] = v;
    this.wordsLen += 2;
  }

  finish(): PackedEvents {
    return {
      meta: this.meta.slice(0, this.metaLen),
      words: new BigUint64Array(this.words.slice(0, this.wordsLen).buffer),
    };
  }
}

function grow(a: Uint32Array, need: number): Uint32Array<ArrayBuffer> {
  const next = new Uint32Array(Math.max(need, a.length * 2));
  next.set(a);
  return next;
}
