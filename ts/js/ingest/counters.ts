/**
 * Ingestion counters of the pure-JS backend, in the layout the native backend reports
 * (`RawIngestCounters`), and the filter reasons in kvroute-core's `FilterReason::ALL` order.
 * @internal
 * @module
 */

import type { RawIngestCounters } from '../../backend-types.js';

/** Filter reasons, in the order of `RawIngestCounters.filtered` on both backends. */
export const FILTER_REASONS = [
  'unsupported_ownership',
  'non_local_locality',
  'unknown_medium',
  'non_main_attention_kind',
  'unknown_kind',
  'non_main_attention_group',
  'non_main_group',
  'ambiguous_cache_namespace',
  'placeholder',
  'block_size_mismatch',
  'prompt_embeds',
  'tier_block_size_mismatch',
] as const;

export type FilterReason = (typeof FILTER_REASONS)[number];

const REASON_INDEX = new Map<FilterReason, number>(FILTER_REASONS.map((r, i) => [r, i]));

export function emptyCounters(): RawIngestCounters {
  return {
    batches: 0,
    storedEvents: 0,
    removedEvents: 0,
    clearedEvents: 0,
    storedBlocks: 0,
    removedHashes: 0,
    tierStored: [0, 0, 0],
    tierRemoved: [0, 0, 0],
    tierBlocks: [0, 0, 0],
    filtered: FILTER_REASONS.map(() => 0),
    unknownEvents: 0,
    extraFields: 0,
    foldedHashes: 0,
    oddLengthHashes: 0,
    shortTokens: 0,
    dpRankMismatches: 0,
    decodeErrors: 0,
    firstDecodeError: null,
  };
}

export function countFiltered(c: RawIngestCounters, why: FilterReason): void {
  c.filtered[REASON_INDEX.get(why) as number]++;
}

/** Adds `b` into `a`; the first decode error kept is `a`'s, else `b`'s. */
export function addCounters(a: RawIngestCounters, b: RawIngestCounters): void {
  const scalar = [
    'batches',
    'storedEvents',
    'removedEvents',
    'clearedEvents',
    'storedBlocks',
    'removedHashes',
    'unknownEvents',
    'extraFields',
    'foldedHashes',
    'oddLengthHashes',
    'shortTokens',
    'dpRankMismatches',
    'decodeErrors',
  ] as const;
  for (const k of scalar) a[k] += b[k];
  for (let i = 0; i < 3; i++) {
    a.tierStored[i] += b.tierStored[i];
    a.tierRemoved[i] += b.tierRemoved[i];
    a.tierBlocks[i] += b.tierBlocks[i];
  }
  for (let i = 0; i < a.filtered.length; i++) a.filtered[i] += b.filtered[i];
  a.firstDecodeError ??= b.firstDecodeError;
}
