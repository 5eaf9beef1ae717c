/**
 * A request's shared-cache hits: which of its blocks a cache that every worker can load from
 * holds (SGLang HiCache's storage tier, LMCache, Mooncake's store). The caller asks that store;
 * the router credits each candidate for the hits past its own device prefix (Dynamo's
 * `shared_cache_hits` and `hits_beyond`).
 * @internal
 * @module
 */

import { KvRouteError } from '../errors.js';
import { describe } from '../validate.js';

/**
 * Validates `[start, end)` pairs of block positions: integers, each non-empty, sorted, not
 * overlapping and within the prompt's `fullBlocks`. Returns them flattened, or undefined when
 * absent. An empty list is valid (the store holds none of the request).
 */
export function parseSharedCacheHits(value: unknown, fullBlocks: number, name: string): Uint32Array | undefined {
  if (value === undefined) return undefined;
  const invalid = (why: string) =>
    new KvRouteError('ERR_INVALID_ARG', `${name} must be sorted, non-overlapping [start, end) pairs of block positions: ${why}`);
  if (!Array.isArray(value)) throw invalid(`got ${describe(value)}`);
  const out = new Uint32Array(value.length * 2);
  let previousEnd = 0;
  value.forEach((pair, i) => {
    if (!Array.isArray(pair) || pair.length !== 2)
      throw invalid(`${name}[${i}] is not a pair but ${Array.isArray(pair) ? `an array of ${pair.length}` : describe(pair)}`);
    const [start, end] = pair as unknown[];
    if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || (start as number) < 0)
      throw invalid(`${name}[${i}] is [${describe(start)}, ${describe(end)}]`);
    const [s, e] = [start as number, end as number];
    if (e <= s) throw invalid(`${name}[${i}] [${s}, ${e}) is empty`);
    if (s < previousEnd) throw invalid(`${name}[${i}] starts at ${s}, before the previous pair's end ${previousEnd}`);
    if (e > fullBlocks) throw invalid(`${name}[${i}] ends at ${e}, past the prompt's ${fullBlocks} full blocks`);
    out[2 * i] = s;
    out[2 * i + 1] = e;
    previousEnd = e;
  });
  return out;
}
