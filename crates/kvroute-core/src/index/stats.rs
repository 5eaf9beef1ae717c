//! Counters of what the index did with the events it was given. Nothing is dropped silently:
//! every rejected event or skipped hash is counted under its reason.

use crate::tiers::TierStats;

/// Why a Stored event, or one hash of a Removed event, was not applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// A Stored event's parent is not a block this rank holds. Nothing of the event applied.
    ParentBlockNotFound,
    /// A Removed event named a block this rank does not hold; counted per hash.
    BlockNotFound,
    /// A Stored event contradicts itself or the rank's names (its own parent among its blocks, a
    /// name used twice, a name the rank already uses for another position). Nothing applied.
    InvalidBlock,
    /// The event concerns a storage tier other than device memory.
    IgnoredTier,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventCounters {
    pub stored: u64,
    pub removed: u64,
    pub cleared: u64,
    pub parent_block_not_found: u64,
    pub block_not_found: u64,
    pub invalid_block: u64,
    pub ignored_tier: u64,
    /// Stored events that changed nothing (a replay). Not an error.
    pub duplicate_stores: u64,
    /// Predicted (approximate-mode) blocks removed because their TTL passed.
    pub expired_blocks: u64,
}

impl EventCounters {
    pub fn reject(&mut self, why: Rejection) {
        match why {
            Rejection::ParentBlockNotFound => self.parent_block_not_found += 1,
            Rejection::BlockNotFound => self.block_not_found += 1,
            Rejection::InvalidBlock => self.invalid_block += 1,
            Rejection::IgnoredTier => self.ignored_tier += 1,
        }
    }
}

/// A snapshot of the index's size and counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// Distinct worker ids with at least one known rank.
    pub workers: u64,
    /// Known (worker, dp rank) pairs, including ranks that currently hold nothing.
    pub ranks: u64,
    /// Sum over ranks of the blocks each holds.
    pub blocks: u64,
    /// Nodes of the compressed tree (excluding the root).
    pub tree_nodes: u64,
    /// Distinct tree positions (blocks shared by several ranks count once).
    pub tree_blocks: u64,
    /// Estimated heap bytes of the tree and per-rank maps.
    pub memory_bytes: u64,
    pub events: EventCounters,
    /// Host pinned, disk and external tiers, in that order (filled by [`KvIndex`](super::KvIndex);
    /// a bare tree holds none).
    pub lower_tiers: [TierStats; 3],
}

impl EventCounters {
    fn add(&mut self, o: &Self) {
        self.stored += o.stored;
        self.removed += o.removed;
        self.cleared += o.cleared;
        self.parent_block_not_found += o.parent_block_not_found;
        self.block_not_found += o.block_not_found;
        self.invalid_block += o.invalid_block;
        self.ignored_tier += o.ignored_tier;
        self.duplicate_stores += o.duplicate_stores;
        self.expired_blocks += o.expired_blocks;
    }
}

impl IndexStats {
    /// Adds another shard's stats (shards share no ranks or workers).
    pub fn add(&mut self, o: &Self) {
        self.workers += o.workers;
        self.ranks += o.ranks;
        self.blocks += o.blocks;
        self.tree_nodes += o.tree_nodes;
        self.tree_blocks += o.tree_blocks;
        self.memory_bytes += o.memory_bytes;
        self.events.add(&o.events);
    }
}

/// Heap bytes of a `Vec<T>` with this capacity.
pub fn vec_bytes<T>(capacity: usize) -> usize {
    capacity * std::mem::size_of::<T>()
}
