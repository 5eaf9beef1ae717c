//! The [`KvIndex`](super::KvIndex)'s lower storage tiers: applied by the writer threads, in order
//! with each worker's device events, under a lock; read by routing only once some tier holds a
//! block.
//!
//! They are kept outside the shards' views: those are what reads see without waiting, and
//! keeping lower tiers there would cost every device write a check and every view a second map.
//! Offload events are rarer than device ones, and a read takes the lock only while a tier holds
//! anything; a writer holds it for one lower-tier event. The writers apply them so that a store
//! whose parent the rank holds only on the device finds that parent in the writer's book, as the
//! worker's earlier events left it.

use super::concurrent::Overlap;
use super::event::{EventData, Rank, RouterEvent};
use super::tree::DumpedStore;
use crate::tiers::{LowerTiers, TierStats};
use parking_lot::RwLock;
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Debug, Default)]
pub(crate) struct LowerTierState {
    tiers: RwLock<LowerTiers>,
    /// Whether any lower-tier event was ever applied: until then a clear or a worker's removal
    /// has nothing to do here, and a read nothing to walk.
    used: AtomicBool,
}

impl LowerTierState {
    /// Whether `event` concerns the lower tiers: one of theirs, or a device clear once they hold
    /// anything (an engine's clear wipes every tier of the rank, as Dynamo fans it out).
    pub fn concerns(&self, event: &RouterEvent) -> bool {
        event.lower_tier.is_some() || (matches!(event.data, EventData::Cleared) && self.used.load(Ordering::Acquire))
    }

    /// Applies `event`'s lower-tier side; `on_device(rank, name)` gives the position of the rank's
    /// device block of that name (a store's parent the lower tiers do not hold).
    pub fn apply(&self, event: &RouterEvent, on_device: impl FnOnce(Rank, u64) -> Option<u64>) {
        if event.lower_tier.is_some() {
            self.used.store(true, Ordering::Release);
        }
        let mut tiers = self.tiers.write();
        match (event.lower_tier, &event.data) {
            (Some(tier), EventData::Stored { parent, blocks }) => {
                tiers.store(event.rank, tier, *parent, blocks, |name| on_device(event.rank, name));
            }
            (Some(tier), EventData::Removed { hashes }) => tiers.remove(event.rank, tier, hashes),
            (_, EventData::Cleared) => tiers.clear_rank(event.rank),
            (None, _) => {}
        }
    }

    pub fn remove_worker(&self, worker_id: u64, dp_rank: Option<u32>) {
        if self.used.load(Ordering::Acquire) {
            self.tiers.write().remove_worker(worker_id, dp_rank);
        }
    }

    /// Fills each candidate's lower-tier reach past its device overlap. While no tier holds a
    /// block (the common case) this costs one atomic load: routing pays nothing for tiers it
    /// does not use.
    pub fn extend<'p>(&self, out: &mut [Overlap], candidates: &[Rank], positions: impl FnOnce() -> Cow<'p, [u64]>) {
        if !self.used.load(Ordering::Acquire) {
            return;
        }
        let tiers = self.tiers.read();
        if tiers.is_empty() {
            return;
        }
        let device: Vec<u32> = out.iter().map(|o| o.device).collect();
        for (o, reach) in out.iter_mut().zip(tiers.extensions(&positions(), candidates, &device)) {
            o.lower = reach;
        }
    }

    /// The lower tiers as Stored events that rebuild them: one root store per run of blocks that
    /// continue each other, its first block in position form (a root of the block's name whose
    /// local hash is its position). A root block's position is its local hash, so replaying the
    /// event gives back exactly each (name, position), with no parent to anchor, whatever the
    /// device holds by then (see [`LowerTiers::runs`]). For a Dynamo reader, which keys
    /// lower-tier blocks by parent name and local hash, the runs that start at a true root are
    /// reachable, as they should be; the others match nothing.
    pub fn dump(&self) -> Vec<DumpedStore> {
        if !self.used.load(Ordering::Acquire) {
            return Vec::new();
        }
        let runs = self.tiers.read().runs();
        runs.into_iter()
            .map(|(rank, tier, blocks)| DumpedStore { rank, lower_tier: Some(tier), parent: None, blocks })
            .collect()
    }

    /// Each tier's size and counters, and the heap bytes of all three.
    pub fn stats(&self) -> ([TierStats; 3], u64) {
        let tiers = self.tiers.read();
        (tiers.stats(), tiers.memory_bytes())
    }
}
