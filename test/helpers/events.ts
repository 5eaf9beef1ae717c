import { type RouterEvent, sequenceHashes } from '../../ts/index.js';

/** Dynamo-style names: the sequence hash of the path so far, XORed with a per-rank salt. */
export function names(path: readonly bigint[], salt = 0n): bigint[] {
  return Array.from(sequenceHashes(path, { backend: 'js' }), (h) => h ^ salt);
}

export interface EventOpts {
  dpRank?: number;
  salt?: bigint;
  prefix?: readonly bigint[];
  tier?: RouterEvent['storage_tier'];
}

const big = (xs: readonly (number | bigint)[]) => xs.map((x) => BigInt(x));

/** A Stored event of `locals` after `prefix` (whose last block is the parent). */
export function stored(worker: number | bigint, locals: readonly (number | bigint)[], opts: EventOpts = {}): RouterEvent {
  const prefix = big(opts.prefix ?? []);
  const l = big(locals);
  const all = names([...prefix, ...l], opts.salt);
  return {
    worker_id: worker,
    ...(opts.tier ? { storage_tier: opts.tier } : {}),
    event: {
      event_id: 0,
      dp_rank: opts.dpRank ?? 0,
      data: {
        stored: {
          parent_hash: prefix.length ? all[prefix.length - 1] : null,
          blocks: l.map((tokens_hash, i) => ({ block_hash: all[prefix.length + i], tokens_hash })),
        },
      },
    },
  };
}

/** A Removed event for the blocks at `path[..len]` for each `len`. */
export function removed(
  worker: number | bigint,
  path: readonly (number | bigint)[],
  lens: readonly number[],
  opts: EventOpts = {},
): RouterEvent {
  const all = names(big(path), opts.salt);
  return {
    worker_id: worker,
    ...(opts.tier ? { storage_tier: opts.tier } : {}),
    event: { event_id: 0, dp_rank: opts.dpRank ?? 0, data: { removed: { block_hashes: lens.map((l) => all[l - 1]) } } },
  };
}

export function cleared(worker: number | bigint, dpRank = 0, tier?: RouterEvent['storage_tier']): RouterEvent {
  return { worker_id: worker, ...(tier ? { storage_tier: tier } : {}), event: { event_id: 0, dp_rank: dpRank, data: 'cleared' } };
}

export function q(...locals: number[]): bigint[] {
  return locals.map(BigInt);
}

export function range(from: number, to: number): bigint[] {
  return Array.from({ length: to - from + 1 }, (_, i) => BigInt(from + i));
}
