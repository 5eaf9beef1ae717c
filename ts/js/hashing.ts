/**
 * Block and sequence hashing for the pure-JS backend (Dynamo's scheme; see `hashing.ts` in the
 * core crate for the rules). Inputs arrive validated.
 * @internal
 * @module
 */

import type { HashingBackend } from '../backend-types.js';
import { blockCount } from '../validate.js';
import { add64, r } from './u64.js';
import { canHashWords, xxh3, xxh3Words, xxh3WordsBatch } from './xxh3.js';

const SEED = 1337;
const utf8 = new TextEncoder();
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** Computes the salt into r.hi / r.lo. */
function salt(loraName: string | undefined, cacheNamespace: string | undefined): void {
  let h = 0;
  let l = SEED;
  if (loraName) {
    const bytes = utf8.encode(loraName);
    xxh3(bytes, 0, bytes.length, 0, 0);
    add64(h, l, r.hi, r.lo);
    h = r.hi;
    l = r.lo;
  }
  if (cacheNamespace) {
    const bytes = utf8.encode(cacheNamespace);
    xxh3(bytes, 0, bytes.length, 0, 1);
    add64(h, l, r.hi, r.lo);
    h = r.hi;
    l = r.lo;
  }
  r.hi = h;
  r.lo = l;
}

/** The tokens' bytes as u32 little-endian, without a copy on little-endian hosts. */
function tokenBytes(tokens: Uint32Array): Uint8Array {
  if (LITTLE_ENDIAN) return new Uint8Array(tokens.buffer, tokens.byteOffset, tokens.byteLength);
  const out = new Uint8Array(tokens.length * 4);
  const view = new DataView(out.buffer);
  for (let i = 0; i < tokens.length; i++) view.setUint32(i * 4, tokens[i], true);
  return out;
}

/** Bytes of one multimodal block: its tokens, then its sorted mm hashes as u64 little-endian. */
function mmBlockBytes(bytes: Uint8Array, start: number, len: number, mm: BigUint64Array): Uint8Array {
  const out = new Uint8Array(len + mm.length * 8);
  out.set(bytes.subarray(start, start + len));
  const view = new DataView(out.buffer);
  const sorted = mm.slice().sort();
  for (let i = 0; i < sorted.length; i++) view.setBigUint64(len + i * 8, sorted[i], true);
  return out;
}

function blockHashes(
  tokens: Uint32Array,
  blockSize: number,
  loraName: string | undefined,
  cacheNamespace: string | undefined,
  eagle: boolean,
  mmOffsets?: Uint32Array,
  mmHashes?: BigUint64Array,
): BigUint64Array {
  salt(loraName, cacheNamespace);
  const seedH = r.hi;
  const seedL = r.lo;
  const count = blockCount(tokens.length, blockSize, eagle);
  const windowBytes = (eagle ? blockSize + 1 : blockSize) * 4;
  const out = new BigUint64Array(count);
  const words = new Uint32Array(out.buffer);
  const mmBlocks = mmOffsets && mmHashes ? mmOffsets.length - 1 : 0;
  if (canHashWords && mmBlocks === 0) {
    xxh3WordsBatch(tokens, blockSize, count, windowBytes, seedH, seedL, words);
    return out;
  }
  const bytes = tokenBytes(tokens);
  for (let i = 0; i < count; i++) {
    const start = i * blockSize * 4;
    if (i < mmBlocks && mmOffsets && mmHashes && mmOffsets[i + 1] > mmOffsets[i]) {
      const block = mmBlockBytes(bytes, start, windowBytes, mmHashes.subarray(mmOffsets[i], mmOffsets[i + 1]));
      xxh3(block, 0, block.length, seedH, seedL);
    } else {
      xxh3(bytes, start, windowBytes, seedH, seedL);
    }
    writeU64(out, words, i);
  }
  return out;
}

/** Writes r into out[i] through its u32 view (no BigInt allocation). */
function writeU64(out: BigUint64Array, words: Uint32Array, i: number): void {
  if (LITTLE_ENDIAN) {
    words[2 * i] = r.lo;
    words[2 * i + 1] = r.hi;
  } else {
    out[i] = (BigInt(r.hi) << 32n) | BigInt(r.lo);
  }
}

const pairWords = new Uint32Array(4);
const pairBytes = new Uint8Array(pairWords.buffer);

function sequenceHashes(local: BigUint64Array): BigUint64Array {
  const out = new BigUint64Array(local.length);
  if (local.length === 0) return out;
  const outWords = new Uint32Array(out.buffer);
  out[0] = local[0];
  let prevH = Number(local[0] >> 32n);
  let prevL = Number(local[0] & 0xffffffffn);
  const inWords = LITTLE_ENDIAN ? new Uint32Array(local.buffer, local.byteOffset, local.length * 2) : undefined;
  for (let i = 1; i < local.length; i++) {
    const curL = inWords ? inWords[2 * i] : Number(local[i] & 0xffffffffn);
    const curH = inWords ? inWords[2 * i + 1] : Number(local[i] >> 32n);
    if (canHashWords) {
      pairWords[0] = prevL;
      pairWords[1] = prevH;
      pairWords[2] = curL;
      pairWords[3] = curH;
      xxh3Words(pairWords, 0, 16, 0, SEED);
    } else {
      const view = new DataView(pairBytes.buffer);
      view.setUint32(0, prevL, true);
      view.setUint32(4, prevH, true);
      view.setUint32(8, curL, true);
      view.setUint32(12, curH, true);
      xxh3(pairBytes, 0, 16, 0, SEED);
    }
    prevH = r.hi;
    prevL = r.lo;
    writeU64(out, outWords, i);
  }
  return out;
}

function xxh3Hash(data: Uint8Array, seedHi: number, seedLo: number): bigint {
  xxh3(data, 0, data.length, seedHi, seedLo);
  return (BigInt(r.hi) << 32n) | BigInt(r.lo);
}

export const jsHashing: HashingBackend = { blockHashes, sequenceHashes, xxh3: xxh3Hash };
