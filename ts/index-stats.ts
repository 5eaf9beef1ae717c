/**
 * `KvIndex.stats()`: what an index holds and what it applied, rejected and skipped, by reason
 * (Dynamo's metric labels), from the backend's raw counters.
 * @module
 */

import type { RawIndexStats } from './backend-types.js';

/**
 * Events applied, by kind.
 * @group Index
 */
export interface AppliedCounts {
  /** Stored events applied (duplicates included). */
  stored: number;
  /** Removed events applied (even if some of their hashes were unknown). */
  removed: number;
  /** Cleared events applied. */
  cleared: number;
}

/**
 * Rejections, by reason (Dynamo's metric labels).
 * @group Index
 */
export interface RejectedCounts {
  /** Stored events whose parent the rank does not hold; nothing of them applied. */
  parent_block_not_found: number;
  /** Stored events naming their own parent, repeating a name, or reusing a name for another block. */
  invalid_block: number;
}

/**
 * One lower storage tier (host memory, disk or external): what it holds and what it did with
 * its events. A lower tier keys a block by its position from the root, so a store's parent must
 * be a block the rank holds, in a lower tier or on the device (or none, at the root).
 * @group Index
 */
export interface LowerTierStats {
  /** Sum over ranks of the blocks each holds in the tier. */
  blocks: number;
  /** Blocks stored (a block the rank held already counts once). */
  stored: number;
  /** Blocks removed. */
  removed: number;
  /** Blocks of stores whose parent the rank holds in no tier, device included: not applied. */
  unanchored: number;
  /** Blocks of a store from the first whose name the rank already uses for another position: not applied. */
  conflicting: number;
  /** Removed hashes the rank did not hold in the tier. */
  not_found: number;
}

/**
 * What was left out on purpose: not errors, so dashboards need not alarm on them.
 * @group Index
 */
export interface SkippedCounts {
  /**
   * Hashes of Removed events that the rank does not hold, counted per hash. Benign and common: an
   * engine removes a child after removing its parent, which already removed the child here.
   */
  block_not_found: number;
  /** Events of a cache owner's lane (`residency_domain: "cache_owner"`), which kvroute does not model yet. */
  cache_owner: number;
}

/**
 * Size and counters of an index. Nothing is dropped silently: every rejection is counted.
 * @group Index
 */
export interface IndexStats {
  /** Distinct worker ids with at least one known rank. */
  workers: number;
  /** Known (worker, dp rank) pairs, including ranks that currently hold nothing. */
  ranks: number;
  /** Sum over ranks of the blocks each holds. */
  blocks: number;
  /**
   * Nodes of the tree: compressed edges of at most 1,024 blocks on the native backend, single
   * blocks on the JS one.
   */
  treeNodes: number;
  /** Distinct block positions (a block shared by several ranks counts once). */
  treeBlocks: number;
  /**
   * Estimated heap bytes (native: measured capacities, including applied event batches that
   * wait to be freed by the next `applyEvents` or `flush`, at most 4 MiB per writer thread;
   * JS: a rough model).
   */
  memoryBytes: number;
  /** `memoryBytes / blocks` (0 when empty). */
  bytesPerHeldBlock: number;
  /** Events and operations accepted but not applied yet. */
  pending: number;
  /** Events applied, by kind. */
  events: AppliedCounts;
  /** What was rejected, by reason. */
  rejected: RejectedCounts;
  /** What was left out on purpose, by reason. */
  skipped: SkippedCounts;
  /** Stored events that changed nothing (replays). Not an error. */
  duplicateStores: number;
  /** Predicted blocks removed because their TTL passed. */
  expiredBlocks: number;
  /** The lower storage tiers, which routing credits at `hostCacheHitWeight` and `diskCacheHitWeight`. */
  lowerTiers: LowerTiersStats;
}

/**
 * Each lower storage tier's stats, by Dynamo's tier name.
 * @group Index
 */
export interface LowerTiersStats {
  /** Host memory (CPU offload; media `CPU`, `CPU_PINNED`, `CPU_TIER1`). */
  host_pinned: LowerTierStats;
  /** Disk (media `CPU_TIER2`, `DISK`, `NVME`, `STORAGE`). */
  disk: LowerTierStats;
  /** External or shared storage (media `EXTERNAL`, `NETWORK`, `REMOTE`, `SHARED`). */
  external: LowerTierStats;
}

/** The public shape of a backend's counters. @internal */
export function toIndexStats(s: RawIndexStats, cacheOwnerEvents: number): IndexStats {
  return {
    workers: s.workers,
    ranks: s.ranks,
    blocks: s.blocks,
    treeNodes: s.treeNodes,
    treeBlocks: s.treeBlocks,
    memoryBytes: s.memoryBytes,
    bytesPerHeldBlock: s.blocks > 0 ? s.memoryBytes / s.blocks : 0,
    pending: s.pending,
    events: { stored: s.stored, removed: s.removed, cleared: s.cleared },
    rejected: {
      parent_block_not_found: s.parentBlockNotFound,
      invalid_block: s.invalidBlock,
    },
    skipped: { block_not_found: s.blockNotFound, cache_owner: cacheOwnerEvents },
    duplicateStores: s.duplicateStores,
    expiredBlocks: s.expiredBlocks,
    lowerTiers: { host_pinned: tierStats(s.lowerTiers, 0), disk: tierStats(s.lowerTiers, 1), external: tierStats(s.lowerTiers, 2) },
  };
}

/** Tier `t`'s six figures in the backends' order. */
function tierStats(f: number[], t: number): LowerTierStats {
  const k = 6 * t;
  return { blocks: f[k], stored: f[k + 1], removed: f[k + 2], unanchored: f[k + 3], conflicting: f[k + 4], not_found: f[k + 5] };
}
