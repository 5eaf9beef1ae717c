/**
 * KV events in NVIDIA Dynamo's `RouterEvent` wire shape (snake_case, as engines and Dynamo's
 * publishers emit them). Every u64 may be a number (safe integers only), a bigint or a decimal
 * string; kvroute returns u64 values as bigint.
 */

/** A u64 as accepted on input: a non-negative safe integer, a bigint, or a decimal string. */
export type U64Like = number | bigint | string;

/** Where a block lives. Only `device` (GPU memory, the default) changes the index. */
export type StorageTier = 'device' | 'host_pinned' | 'disk' | 'external';

/** A multimodal object inside a block; validated and otherwise ignored by the index. */
export interface BlockMmObjectInfo {
  mm_hash: U64Like;
  /** Token offsets `[start, end]` relative to the block. */
  offsets: ReadonlyArray<readonly [number, number]>;
}

/** Multimodal content of a block; already folded into `tokens_hash` by the engine. */
export interface BlockExtraInfo {
  mm_objects: readonly BlockMmObjectInfo[];
}

/** One block of a Stored event. */
export interface StoredBlock {
  /** The engine's opaque name for the block (its sequence hash, usually). */
  block_hash: U64Like;
  /** The block's local hash: what the index is keyed by. */
  tokens_hash: U64Like;
  mm_extra_info?: BlockExtraInfo | null;
}

/** Blocks entered a rank's cache, continuing after `parent_hash` (or from the start). */
export interface StoredData {
  stored: {
    parent_hash: U64Like | null;
    /** Informational; the index derives positions from the parent. */
    start_position?: number | null;
    blocks: readonly StoredBlock[];
  };
}

/** Blocks left a rank's cache. */
export interface RemovedData {
  removed: { block_hashes: readonly U64Like[] };
}

/** What happened: blocks stored, blocks removed, or the rank's whole cache cleared. */
export type KvCacheEventData = StoredData | RemovedData | 'cleared';

/** One cache event of one data-parallel rank. */
export interface KvCacheEvent {
  /** Informational; ordering comes from the order events are given in. */
  event_id: U64Like;
  /** Data-parallel rank (default 0). */
  dp_rank?: number | bigint | string;
  data: KvCacheEventData;
}

/** A KV event as a worker publishes it. */
export interface RouterEvent {
  worker_id: U64Like;
  /** Default `device`; events of other tiers are counted as `ignored_tier`. */
  storage_tier?: StorageTier;
  event: KvCacheEvent;
  /** Accepted for compatibility with newer Dynamo publishers; ignored. */
  residency_domain?: string;
  /** Accepted for compatibility with newer Dynamo publishers; ignored. */
  state_source?: unknown;
}

/** A Stored event as kvroute returns it (from `dump()`): every u64 is a bigint. */
export interface DumpedEvent extends RouterEvent {
  worker_id: bigint;
  storage_tier: 'device';
  event: {
    event_id: bigint;
    dp_rank: number;
    data: {
      stored: {
        parent_hash: bigint | null;
        start_position: null;
        blocks: Array<{ block_hash: bigint; tokens_hash: bigint; mm_extra_info: null }>;
      };
    };
  };
}
