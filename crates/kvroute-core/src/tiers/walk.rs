//! The continuation walk: how far each candidate's match extends past its device prefix.

use super::{LowerTier, LowerTiers};
use crate::index::Rank;

/// How many blocks past a rank's device prefix the lower tiers add, tier by tier.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TierReach {
    /// Consecutive blocks the host tier holds from the end of the device prefix.
    pub host_pinned: u32,
    /// Consecutive blocks the disk tier holds from where the host tier's run ends.
    pub disk: u32,
    /// The same for external storage, from where the disk tier's run ends.
    pub external: u32,
}

impl LowerTiers {
    /// For each candidate, given its device overlap (`device[i]` leading blocks of the request),
    /// the blocks each lower tier adds, walking host, then disk, then external, each from where
    /// the one before stopped (Dynamo's continuation order). `positions` are the request's
    /// sequence hashes.
    pub fn extensions(&self, positions: &[u64], candidates: &[Rank], device: &[u32]) -> Vec<TierReach> {
        candidates
            .iter()
            .zip(device)
            .map(|(&rank, &start)| {
                let mut at = start as usize;
                let mut hits = [0u32; 3];
                for tier in LowerTier::ALL {
                    let t = &self.tiers[tier.index()];
                    let from = at;
                    while at < positions.len() && t.holds(rank, positions[at]) {
                        at += 1;
                    }
                    hits[tier.index()] = (at - from) as u32;
                }
                TierReach { host_pinned: hits[0], disk: hits[1], external: hits[2] }
            })
            .collect()
    }
}
