/**
 * Raw backend figures → the public stats and decoded shapes.
 * @internal
 * @module
 */

import type { RawDecodedBatch, RawEngineEvent, RawExtraKey, RawIngestCounters, RawRankStatus } from '../backend-types.js';
import type {
  DecodedBatch,
  DecodedEngineEvent,
  DecodedExtraKey,
  FilteredCounts,
  IngestStats,
  RankSourceStats,
  SourceState,
} from './types.js';

/**
 * The filter counts by name, in `FILTER_REASONS` order (the decoding tests check every reason by
 * name on both backends); a literal because it runs per batch.
 */
function toFiltered(f: number[]): FilteredCounts {
  return {
    unsupported_ownership: f[0],
    non_local_locality: f[1],
    unknown_medium: f[2],
    non_main_attention_kind: f[3],
    unknown_kind: f[4],
    non_main_attention_group: f[5],
    non_main_group: f[6],
    ambiguous_cache_namespace: f[7],
    placeholder: f[8],
    block_size_mismatch: f[9],
    prompt_embeds: f[10],
    tier_block_size_mismatch: f[11],
  };
}

export function toIngestStats(c: RawIngestCounters): IngestStats {
  const filtered = toFiltered(c.filtered);
  const tier = (i: number) => ({ stored: c.tierStored[i], removed: c.tierRemoved[i], held: c.tierBlocks[i] });
  return {
    batches: c.batches,
    events: { stored: c.storedEvents, removed: c.removedEvents, cleared: c.clearedEvents },
    blocks: { stored: c.storedBlocks, removed: c.removedHashes },
    tiers: { host_pinned: tier(0), disk: tier(1), external: tier(2) },
    filtered,
    unknownEvents: c.unknownEvents,
    extraFields: c.extraFields,
    foldedHashes: c.foldedHashes,
    oddLengthHashes: c.oddLengthHashes,
    shortTokens: c.shortTokens,
    dpRankMismatches: c.dpRankMismatches,
    decodeErrors: c.decodeErrors,
    firstDecodeError: c.firstDecodeError ?? null,
  };
}

export function toRankSourceStats(s: RawRankStatus, c: RawIngestCounters): RankSourceStats {
  return {
    dpRank: s.dpRank,
    endpoint: s.endpoint,
    replayEndpoint: s.replayEndpoint ?? null,
    state: s.state as SourceState,
    reason: s.reason,
    lastSeq: s.lastSeq ?? null,
    lastBatchDigest: s.lastDigest ?? null,
    incarnation: s.incarnation,
    ...s.stream,
    malformedFrames: s.malformedFrames,
    held: s.held,
    lastBatchAt: s.lastBatchMs ?? null,
    lagMs: s.lagMs ?? null,
    ...toIngestStats(c),
  };
}

function toExtraKey(k: RawExtraKey): DecodedExtraKey {
  switch (k.kind) {
    case 'text':
      return { kind: 'text', value: k.text as string };
    case 'int':
      return { kind: 'int', value: k.int as bigint };
    case 'pair':
      return { kind: 'pair', id: k.text as string, offset: k.offset as number };
    case 'bytes':
      return { kind: 'bytes', value: k.bytes as Uint8Array };
    default:
      return { kind: 'other' };
  }
}

function toEvent(e: RawEngineEvent): DecodedEngineEvent {
  const n = <T>(v: T | null | undefined): T | null => v ?? null;
  const hashes = Array.from(e.blockHashes ?? []);
  if (e.type === 'BlockStored') {
    return {
      type: 'BlockStored',
      blockHashes: hashes,
      parentBlockHash: n(e.parentBlockHash),
      tokenIds: Array.from(e.tokenIds ?? []),
      eagle: e.eagle === true,
      blockSize: e.blockSize as number,
      loraId: n(e.loraId),
      medium: n(e.medium),
      loraName: n(e.loraName),
      cacheSalt: n(e.cacheSalt),
      extraKeys: e.extraKeys ? e.extraKeys.map((b) => (b ? b.map(toExtraKey) : null)) : null,
      groupIdx: n(e.groupIdx),
      kvCacheSpecKind: n(e.kvCacheSpecKind),
      kvCacheSpecSlidingWindow: n(e.kvCacheSpecSlidingWindow),
      locality: n(e.locality),
      ownership: n(e.ownership),
      sessionId: n(e.sessionId),
    };
  }
  if (e.type === 'BlockRemoved') {
    return {
      type: 'BlockRemoved',
      blockHashes: hashes,
      medium: n(e.medium),
      groupIdx: n(e.groupIdx),
      locality: n(e.locality),
      ownership: n(e.ownership),
    };
  }
  return { type: 'AllBlocksCleared', ownership: n(e.ownership) };
}

export function toDecodedBatch(b: RawDecodedBatch): DecodedBatch {
  return {
    ts: b.ts,
    dpRank: b.dpRank ?? null,
    layout: b.layout as DecodedBatch['layout'],
    events: b.events.map(toEvent),
    unknownEvents: b.unknownEvents,
    extraFields: b.extraFields,
    foldedHashes: b.foldedHashes,
    oddLengthHashes: b.oddLengthHashes,
  };
}
