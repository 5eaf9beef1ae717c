/**
 * Dynamo-compatible block hashing.
 *
 * A block's *local hash* identifies its own tokens (plus LoRA, cache namespace and multimodal
 * content); the radix-tree index is keyed by it. A block's *sequence hash* chains the local
 * hashes, so it identifies the block together with its whole prefix. Both backends produce
 * bit-identical results, equal to NVIDIA Dynamo's `compute_block_hash_for_seq` and
 * `compute_seq_hash_for_block`.
 */

import { resolveBackend } from './backend.js';
import type { BackendName } from './backend-types.js';
import { invalidArg } from './errors.js';
import { checkBlockSize, checkOptions, describe, optionalBoolean, optionalString, toHashes, toTokens, toU64 } from './validate.js';

/**
 * What, besides the tokens, goes into a block's local hash.
 * @group Hashing
 */
export interface BlockHashOptions {
  /** LoRA adapter name; mixed into the seed. Empty means none. */
  loraName?: string;
  /** Cache namespace (tenant isolation); mixed into the seed. Empty means none. */
  cacheNamespace?: string;
  /** EAGLE speculative decoding: windows of `blockSize + 1` tokens overlapping by one. */
  eagle?: boolean;
  /**
   * Multimodal content hashes per block (index = block index). They are sorted and appended to
   * the block's bytes; `null`, `undefined`, empty lists and blocks past the end hash as text.
   */
  mmHashes?: ReadonlyArray<ReadonlyArray<bigint> | null | undefined>;
  /** Backend for this call; defaults to the process-wide {@link backend}. */
  backend?: BackendName;
}

/**
 * Options of {@link sequenceHashes} and {@link xxh3_64}.
 * @group Hashing
 */
export interface BackendOption {
  /** Backend for this call; defaults to the process-wide {@link backend}. */
  backend?: BackendName;
}

const BLOCK_HASH_OPTIONS = ['loraName', 'cacheNamespace', 'eagle', 'mmHashes', 'backend'] as const;

/** Validated, backend-ready form of {@link BlockHashOptions}. @internal */
export interface ParsedBlockHashOptions {
  loraName: string | undefined;
  cacheNamespace: string | undefined;
  eagle: boolean;
  mmOffsets: Uint32Array | undefined;
  mmHashes: BigUint64Array | undefined;
  backend: unknown;
}

/** @internal */
export function parseBlockHashOptions(opts: unknown, name = 'opts'): ParsedBlockHashOptions {
  const o = checkOptions(opts, name, BLOCK_HASH_OPTIONS);
  const mm = flattenMmHashes(o.mmHashes, `${name}.mmHashes`);
  return {
    loraName: wellFormed(optionalString(o.loraName, `${name}.loraName`), `${name}.loraName`),
    cacheNamespace: wellFormed(optionalString(o.cacheNamespace, `${name}.cacheNamespace`), `${name}.cacheNamespace`),
    eagle: optionalBoolean(o.eagle, `${name}.eagle`) ?? false,
    mmOffsets: mm?.offsets,
    mmHashes: mm?.hashes,
    backend: o.backend,
  };
}

/**
 * Names are hashed as UTF-8, where every lone surrogate would become U+FFFD: two different
 * ill-formed names would then share a cache namespace (tenant isolation gone). They are refused.
 */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function wellFormed(value: string | undefined, name: string): string | undefined {
  if (value !== undefined && LONE_SURROGATE.test(value)) throw invalidArg(`${name} is not well-formed UTF-16 (it has a lone surrogate)`);
  return value;
}

function flattenMmHashes(value: unknown, name: string): { offsets: Uint32Array; hashes: BigUint64Array } | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value)) throw invalidArg(`${name} must be an array (one entry per block), got ${describe(value)}`);
  const offsets = new Uint32Array(value.length + 1);
  const flat: bigint[] = [];
  value.forEach((block: unknown, i: number) => {
    if (block !== null && block !== undefined) {
      if (!Array.isArray(block)) throw invalidArg(`${name}[${i}] must be an array of bigints, null or undefined, got ${describe(block)}`);
      block.forEach((h: unknown, j: number) => {
        flat.push(toU64(h, `${name}[${i}][${j}]`));
      });
    }
    offsets[i + 1] = flat.length;
  });
  return { offsets, hashes: BigUint64Array.from(flat) };
}

/**
 * Local hashes of every full block of `tokens` (a partial tail block is not hashed).
 *
 * @param tokens Token ids, each an integer in [0, 2^32).
 * @param blockSize Tokens per KV block, the engine's `block_size`.
 * @example
 * ```ts
 * blockHashes([1, 2, 3, 4, 5, 6, 7, 8], 4); // BigUint64Array [14643705804678351452n, 16777012769546811212n]
 * ```
 * @group Hashing
 * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument (tokens, block size, options); `ERR_NATIVE_UNAVAILABLE` when `backend: 'native'` cannot load.
 */
export function blockHashes(tokens: Uint32Array | readonly number[], blockSize: number, opts?: BlockHashOptions): BigUint64Array {
  const t = toTokens(tokens);
  const bs = checkBlockSize(blockSize);
  const o = parseBlockHashOptions(opts);
  return resolveBackend(o.backend, 'opts.backend').hashing.blockHashes(
    t,
    bs,
    o.loraName,
    o.cacheNamespace,
    o.eagle,
    o.mmOffsets,
    o.mmHashes,
  );
}

/**
 * Chains local hashes into sequence hashes: `seq[0] = local[0]`,
 * `seq[i] = xxh3_64(le64(seq[i-1]) ‖ le64(local[i]), 1337)`.
 * @group Hashing
 * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument; `ERR_NATIVE_UNAVAILABLE` when `backend: 'native'` cannot load.
 */
export function sequenceHashes(localHashes: BigUint64Array | readonly bigint[], opts?: BackendOption): BigUint64Array {
  const hashes = toHashes(localHashes, 'localHashes');
  const o = checkOptions(opts, 'opts', ['backend']);
  return resolveBackend(o.backend, 'opts.backend').hashing.sequenceHashes(hashes);
}

const utf8 = new TextEncoder();

/**
 * XXH3-64 of bytes (a string is hashed as UTF-8) with a 64-bit seed (default 0).
 * @group Hashing
 * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument (data, seed outside u64); `ERR_NATIVE_UNAVAILABLE` when `backend: 'native'` cannot load.
 */
export function xxh3_64(data: Uint8Array | string, seed: bigint = 0n, opts?: BackendOption): bigint {
  let bytes: Uint8Array;
  if (typeof data === 'string') bytes = utf8.encode(data);
  else if (data instanceof Uint8Array) bytes = data;
  else throw invalidArg(`data must be a Uint8Array or a string, got ${describe(data)}`);
  const s = toU64(seed, 'seed');
  const o = checkOptions(opts, 'opts', ['backend']);
  return resolveBackend(o.backend, 'opts.backend').hashing.xxh3(bytes, Number(s >> 32n), Number(s & 0xffffffffn));
}
