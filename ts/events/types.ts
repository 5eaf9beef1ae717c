/**
 * KV events in NVIDIA Dynamo's `RouterEvent` wire shape (snake_case, as engines and Dynamo's
 * publishers emit them). Every u64 may be a number (safe integers only), a bigint or a decimal
 * string; kvroute returns u64 values as bigint.
 */

/**
 * A u64 as accepted on input: a non-negative safe integer, a bigint, or a decimal string.
 * @group Events
 */
export type U64Like = number | bigint | string;

/**
 * Where a block lives. Only `device` (GPU memory, the default) changes the index.
 * @group Events
 */
export type StorageTier = 'device' | 'host_pinned' | 'disk' | 'external';

/**
 * A multimodal object inside a block; validated and otherwise ignored by the index.
 * @group Events
 */
export interface BlockMmObjectInfo {
  /** Hash of the multimodal object (image, audio, ...). */
  mm_hash: U64Like;
  /** Token offsets `[start, end]` relative to the block. */
  offsets: ReadonlyArray<readonly [number, number]>;
}

/**
 * Multimodal content of a block; already folded into `tokens_hash` by the engine.
 * @group Events
 */
export interface BlockExtraInfo {
  /** The objects overlapping this block. */
  mm_objects: readonly BlockMmObjectInfo[];
}

/**
 * One block of a Stored event.
 * @group Events
 */
export interface StoredBlock {
  /** The engine's opaque name for the block (its sequence hash, usually). */
  block_hash: U64Like;
  /** The block's local hash: what the index is keyed by. */
  tokens_hash: U64Like;
  /** Multimodal content, if any; validated, not used by the index. */
  mm_extra_info?: BlockExtraInfo | null;
}

/**
 * Payload of a Stored event.
 * @group Events
 */
export interface StoredPayload {
  /** The rank's name for the block before the first one, or null to start at the root. */
  parent_hash: U64Like | null;
  /** Informational; the index derives positions from the parent. */
  start_position?: number | null;
  /** The blocks, in order. */
  blocks: readonly StoredBlock[];
}

/**
 * Blocks entered a rank's cache.
 * @group Events
 */
export interface StoredData {
  /** The stored blocks and where they continue from. */
  stored: StoredPayload;
}

/**
 * Payload of a Removed event.
 * @group Events
 */
export interface RemovedPayload {
  /** The rank's names of the removed blocks. */
  block_hashes: readonly U64Like[];
}

/**
 * Blocks left a rank's cache.
 * @group Events
 */
export interface RemovedData {
  /** The removed blocks. */
  removed: RemovedPayload;
}

/**
 * What happened: blocks stored, blocks removed, or the rank's whole cache cleared.
 * @group Events
 */
export type KvCacheEventData = StoredData | RemovedData | 'cleared';

/**
 * One cache event of one data-parallel rank.
 * @group Events
 */
export interface KvCacheEvent {
  /** Informational; ordering comes from the order events are given in. */
  event_id: U64Like;
  /** Data-parallel rank (default 0). */
  dp_rank?: number | bigint | string;
  /** What happened. */
  data: KvCacheEventData;
}

/**
 * A KV event as a worker publishes it.
 * @group Events
 */
export interface RouterEvent {
  /** The worker that published the event. */
  worker_id: U64Like;
  /** Default `device`; events of the other tiers go to the index's lower tiers (`stats().lowerTiers`). */
  storage_tier?: StorageTier;
  /** The event itself. */
  event: KvCacheEvent;
  /** Accepted for compatibility with newer Dynamo publishers; ignored. */
  residency_domain?: string;
  /** Accepted for compatibility with newer Dynamo publishers; ignored. */
  state_source?: unknown;
}

/**
 * A block of a dumped Stored event.
 * @group Events
 */
export interface DumpedBlock extends StoredBlock {
  /** The rank's name for the block. */
  block_hash: bigint;
  /** The block's local hash. */
  tokens_hash: bigint;
  /** Always null in dumps. */
  mm_extra_info: null;
}

/**
 * Payload of a dumped Stored event.
 * @group Events
 */
export interface DumpedPayload extends StoredPayload {
  /** The rank's name of the parent block; null at the root. */
  parent_hash: bigint | null;
  /** Always null in dumps. */
  start_position: null;
  /** The blocks of one chain. */
  blocks: DumpedBlock[];
}

/**
 * The event part of a dumped Stored event.
 * @group Events
 */
export interface DumpedCacheEvent extends KvCacheEvent {
  /** Sequence number within the dump, from 0. */
  event_id: bigint;
  /** The rank. */
  dp_rank: number;
  /** Always a Stored event. */
  data: DumpedData;
}

/**
 * The data of a dumped event: always Stored.
 * @group Events
 */
export interface DumpedData extends StoredData {
  /** The chain of blocks. */
  stored: DumpedPayload;
}

/**
 * A Stored event as kvroute returns it (from `dump()`): every u64 is a bigint.
 * @group Events
 */
export interface DumpedEvent extends RouterEvent {
  /** The worker. */
  worker_id: bigint;
  /**
   * The tier: `device` for the tree's chains; a lower tier's blocks follow them, one root store
   * per run of blocks that continue each other, whose first block's `tokens_hash` is that
   * block's position (see `KvIndex.dump`).
   */
  storage_tier: StorageTier;
  /** The Stored event. */
  event: DumpedCacheEvent;
}
