//! The [`KvIndex`](super::KvIndex)'s lower storage tiers: applied on the caller's thread, under a
//! lock, and read by routing only once some tier holds a block.
//!
//! They are kept outside the writer threads' shards: the shards' views are what reads see
//! without waiting, and keeping lower tiers there would cost every device write a check and
//! every view a second map. Offload events are rarer than device ones, and a read takes the lock
//! only while a tier holds anything; a write holds it for one event batch's lower-tier part.

use super::concurrent::Overlap;
use super::event::{EventData, Rank, RouterEvent};
use crate::tiers::{LowerTiers, TierStats};
use parking_lot::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Debug, Default)]
pub(super) struct LowerTierState {
    tiers: RwLock<LowerTiers>,
    /// Whether any lower-tier event was ever applied: until then a clear or a worker's removal
    /// has nothing to do here, and a read nothing to walk.
    used: AtomicBool,
}

impl LowerTierState {
    /// Applies the lower-tier part of `events` (their lower-tier events, and the lower-tier side
    /// of each clear) in order, and returns the events the device tree still needs. A batch with
    /// no lower-tier event is returned as it is, without a copy.
    pub fn split_off(&self, events: Vec<RouterEvent>) -> Vec<RouterEvent> {
        let any_lower = events.iter().any(|e| e.lower_tier.is_some());
        if !any_lower {
            // Device events only: the lower tiers care about their clears, once they hold anything.
            if self.used.load(Ordering::Acquire) && events.iter().any(|e| matches!(e.data, EventData::Cleared)) {
                let mut tiers = self.tiers.write();
                for e in events.iter().filter(|e| matches!(e.data, EventData::Cleared)) {
                    tiers.clear_rank(e.rank);
                }
            }
            return events;
        }
        self.used.store(true, Ordering::Release);
        let mut tiers = self.tiers.write();
        let mut device = Vec::with_capacity(events.len());
        for e in events {
            match (e.lower_tier, &e.data) {
                (Some(tier), EventData::Stored { parent, blocks }) => {
                    let pairs: Vec<(u64, u64)> = blocks.iter().map(|b| (b.ext, b.local)).collect();
                    tiers.store(e.rank, tier, *parent, &pairs);
                }
                (Some(tier), EventData::Removed { hashes }) => tiers.remove(e.rank, tier, hashes),
                // A clear wipes every lower tier of the rank, and a device clear the tree as well
                // (Dynamo fans a clear out to every lower tier, and to the primary index only
                // when the event targets it).
                (Some(_), EventData::Cleared) => tiers.clear_rank(e.rank),
                (None, EventData::Cleared) => {
                    tiers.clear_rank(e.rank);
                    device.push(e);
                }
                (None, _) => device.push(e),
            }
        }
        device
    }

    pub fn remove_worker(&self, worker_id: u64, dp_rank: Option<u32>) {
        if self.used.load(Ordering::Acquire) {
            self.tiers.write().remove_worker(worker_id, dp_rank);
        }
    }

    /// Fills each candidate's lower-tier reach past its device overlap. While no tier holds a
    /// block (the common case) this costs one atomic load: routing pays nothing for tiers it
    /// does not use.
    pub fn extend(&self, out: &mut [Overlap], candidates: &[Rank], positions: impl FnOnce() -> Vec<u64>) {
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

    /// Each tier's size and counters, and the heap bytes of all three.
    pub fn stats(&self) -> ([TierStats; 3], u64) {
        let tiers = self.tiers.read();
        (tiers.stats(), tiers.memory_bytes())
    }
}
