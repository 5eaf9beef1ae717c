//! KV events as the index consumes them: Dynamo's `RouterEvent`, already validated and with
//! every u64 decoded. Parsing and validation of the wire shapes happen in the TypeScript layer,
//! once for both backends.

use crate::tiers::LowerTier;

/// A worker as the deployment names it (Dynamo's `WorkerId`).
pub type WorkerId = u64;
/// A data-parallel rank within a worker.
pub type DpRank = u32;

/// One (worker, data-parallel rank): the unit that holds KV blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Rank {
    pub worker_id: WorkerId,
    pub dp_rank: DpRank,
}

impl Rank {
    pub const fn new(worker_id: WorkerId, dp_rank: DpRank) -> Self {
        Self { worker_id, dp_rank }
    }
}

/// One block of a Stored event: the engine's opaque name for it (`block_hash`) and the local hash
/// of its tokens (`tokens_hash`), which positions it in the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredBlock {
    pub ext: u64,
    pub local: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventData {
    Stored { parent: Option<u64>, blocks: Vec<StoredBlock> },
    Removed { hashes: Vec<u64> },
    Cleared,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterEvent {
    pub rank: Rank,
    /// Informational only (Dynamo ignores it too); kept so dumps and logs can carry it.
    pub event_id: u64,
    /// `None` for device memory (GPU), the tree's tier. [`KvIndex`](super::KvIndex) applies a
    /// lower tier's events to its [`LowerTiers`](crate::tiers::LowerTiers); a bare tree counts
    /// them as `ignored_tier`.
    pub lower_tier: Option<LowerTier>,
    pub data: EventData,
}

impl RouterEvent {
    /// Blocks the event names (stored or removed); 0 for a clear.
    pub fn block_count(&self) -> usize {
        match &self.data {
            EventData::Stored { blocks, .. } => blocks.len(),
            EventData::Removed { hashes } => hashes.len(),
            EventData::Cleared => 0,
        }
    }
}
