/**
 * XXH3's secret, and everything derived from it per seed: the secret's little-endian u64 at every
 * byte offset (the short paths read it at odd offsets), pre-combined with the seed for the
 * 17-240-byte paths, and the long path's seed-derived secret. Computed once per seed and cached.
 * @internal
 * @module
 */

import { readLE32 } from './u64.js';

export const SECRET_SIZE = 192;

/** XXH3's 192-byte default secret (a constant of the XXH3 specification). */
// biome-ignore format: a 16-byte-per-line table is easier to check against the specification.
export const DEFAULT_SECRET = new Uint8Array([
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
/** A secret as its little-endian u64 at every byte offset (short paths read at odd offsets). */
export interface Words {
  hi: Uint32Array;
  lo: Uint32Array;
}

function secretWords(secret: Uint8Array): Words {
  const n = secret.length - 7;
  const hi = new Uint32Array(n);
  const lo = new Uint32Array(n);
  for (let o = 0; o < n; o++) {
    lo[o] = readLE32(secret, o);
    hi[o] = readLE32(secret, o + 4);
  }
  return { hi, lo };
}

export const DEFAULT_WORDS = secretWords(DEFAULT_SECRET);
const SH = DEFAULT_WORDS.hi;
const SL = DEFAULT_WORDS.lo;

/**
 * Everything that depends on the seed, computed once per seed: the secret words plus the seed
 * (first half of each 16-byte mix) and minus the seed (second half), and the long path's derived
 * secret. A workload hashes with few seeds (its salt, and 1337 for sequence hashes), so a
 * four-entry cache hits nearly always.
 */
export interface SeedKeys {
  seedH: number;
  seedL: number;
  plusH: Uint32Array;
  plusL: Uint32Array;
  minusH: Uint32Array;
  minusL: Uint32Array;
  long: Words | undefined;
}

const keyCache: SeedKeys[] = [];

function makeKeys(seedH: number, seedL: number): SeedKeys {
  const n = SH.length - 8;
  const k: SeedKeys = {
    seedH,
    seedL,
    plusH: new Uint32Array(n),
    plusL: new Uint32Array(n),
    minusH: new Uint32Array(n),
    minusL: new Uint32Array(n),
    long: undefined,
  };
  for (let s = 0; s < n; s++) {
    const lo = SL[s] + seedL;
    k.plusL[s] = lo >>> 0;
    k.plusH[s] = (SH[s] + seedH + (lo > 0xffffffff ? 1 : 0)) >>> 0;
    const lo2 = SL[s + 8] - seedL;
    k.minusL[s] = lo2 >>> 0;
    k.minusH[s] = (SH[s + 8] - seedH - (lo2 < 0 ? 1 : 0)) >>> 0;
  }
  return k;
}

/** The keys of a seed, from a four-entry cache. */
export function keysForSeed(seedH: number, seedL: number): SeedKeys {
  for (const k of keyCache) if (k.seedH === seedH && k.seedL === seedL) return k;
  const k = makeKeys(seedH, seedL);
  keyCache.unshift(k);
  if (keyCache.length > 4) keyCache.pop();
  return k;
}

/** The long path's secret: the default secret's 16-byte halves plus and minus the seed. */
export function longSecret(K: SeedKeys): Words {
  if (K.long) return K.long;
  if (K.seedH === 0 && K.seedL === 0) {
    K.long = DEFAULT_WORDS;
    return K.long;
  }
  const secret = new Uint8Array(SECRET_SIZE);
  const view = new DataView(secret.buffer);
  for (let i = 0; i < SECRET_SIZE; i += 16) {
    view.setUint32(i, K.plusL[i], true);
    view.setUint32(i + 4, K.plusH[i], true);
    view.setUint32(i + 8, K.minusL[i], true);
    view.setUint32(i + 12, K.minusH[i], true);
  }
  K.long = secretWords(secret);
  return K.long;
}
