//! Lower storage tiers (host memory, disk, external): which rank holds which KV blocks there,
//! so that routing can credit a rank whose engine offloaded the rest of a prompt's prefix.
//!
//! This follows Dynamo's lower-tier index (`indexer/lower_tier.rs`) and its continuation walk:
//! a rank's match continues from where its device (GPU) prefix ends, through the host tier, then
//! disk, then external storage, counting the consecutive blocks each tier holds for it
//! ([`LowerTiers::extensions`]). Routing weighs them with `host_cache_hit_weight` and
//! `disk_cache_hit_weight` (disk and external both count as disk).
//!
//! Dynamo keys a lower-tier block by its parent's engine hash and its own local hash, and
//! starts a rank's walk from the engine hash of its last device block. kvroute's device index
//! keeps engine hashes where only its writer threads read them, so this index keys a block by
//! its **position** instead: the sequence hash of the local hashes from the root, which the
//! walk computes from the request alone. A store's parent is placed when it is stored: a block
//! the rank holds in a lower tier, else its device block of that name (the index's writer
//! thread, which applies the rank's events in order, walks it up to the root); a parent the
//! rank holds nowhere leaves the store `unanchored`, not applied. A block whose parent the
//! device later drops keeps its position, where Dynamo's edge keeps its parent's name: either
//! way the walk reaches it only through that parent. For engines that name blocks consistently
//! (a parent's hash is the hash of the block before) the two keyings give the same walks.

//! Lower tiers are kept apart from the device index: they change nothing there, and a rank's
//! device prefix and lower tiers may be read a moment apart (as in Dynamo, whose tiers are
//! separate indexers too).

mod runs;
mod walk;

use crate::hashing::next_sequence_hash;
use crate::index::{Rank, StoredBlock};
use rustc_hash::FxHashMap;

pub use walk::TierReach;

/// A storage tier below device memory, in the order a match walks them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LowerTier {
    HostPinned = 0,
    Disk = 1,
    External = 2,
}

impl LowerTier {
    pub const ALL: [LowerTier; 3] = [LowerTier::HostPinned, LowerTier::Disk, LowerTier::External];

    pub fn index(self) -> usize {
        self as usize
    }
}

/// What one tier did with the events it was given; nothing is dropped without a count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TierCounters {
    /// Blocks stored (a block the rank already held at the same position counts once).
    pub stored: u64,
    /// Blocks removed.
    pub removed: u64,
    /// Blocks of stores whose parent the rank holds in no tier, device included (not applied).
    pub unanchored: u64,
    /// Blocks not applied because the rank already used their name for another position, and
    /// the blocks after them in the same store (Dynamo stops such a store there too).
    pub conflicting: u64,
    /// Removed hashes the rank did not hold in the tier.
    pub not_found: u64,
}

/// Where a rank's block sits in a tier, and what it was stored under: enough to dump the tier
/// as chains ([`runs`]) rather than one event per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Placed {
    /// Its position (the sequence hash from the root).
    position: u64,
    /// Its local hash.
    local: u64,
    /// Its parent's position; a root block's own.
    parent: u64,
}

impl Placed {
    fn is_root(&self) -> bool {
        self.parent == self.position
    }
}

/// One tier's size and counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TierStats {
    /// Sum over ranks of the blocks each holds in the tier.
    pub blocks: u64,
    pub counters: TierCounters,
}

#[derive(Debug, Default)]
struct Tier {
    /// Position (sequence hash) → the ranks holding it, each with how many of its names point
    /// there (an engine may name one position twice).
    held: FxHashMap<u64, Vec<(Rank, u32)>>,
    /// Per rank, its names → where they are.
    names: FxHashMap<Rank, FxHashMap<u64, Placed>>,
    blocks: u64,
    counters: TierCounters,
}

impl Tier {
    fn position_of(&self, rank: Rank, name: u64) -> Option<u64> {
        self.names.get(&rank)?.get(&name).map(|p| p.position)
    }

    fn holds(&self, rank: Rank, position: u64) -> bool {
        self.held.get(&position).is_some_and(|ranks| ranks.iter().any(|(r, _)| *r == rank))
    }

    fn hold(&mut self, rank: Rank, position: u64) {
        let ranks = self.held.entry(position).or_default();
        match ranks.iter_mut().find(|(r, _)| *r == rank) {
            Some((_, refs)) => *refs += 1,
            None => ranks.push((rank, 1)),
        }
        self.blocks += 1;
    }

    fn release(&mut self, rank: Rank, position: u64) {
        let Some(ranks) = self.held.get_mut(&position) else { return };
        if let Some(i) = ranks.iter().position(|(r, _)| *r == rank) {
            ranks[i].1 -= 1;
            if ranks[i].1 == 0 {
                ranks.swap_remove(i);
            }
            self.blocks -= 1;
        }
        if ranks.is_empty() {
            self.held.remove(&position);
        }
    }

    fn clear_rank(&mut self, rank: Rank) {
        if let Some(names) = self.names.remove(&rank) {
            for placed in names.into_values() {
                self.release(rank, placed.position);
            }
        }
    }

    fn bytes(&self) -> usize {
        let entry = std::mem::size_of::<(u64, Vec<(Rank, u32)>)>() + 1;
        let held = self.held.capacity() * entry
            + self.held.values().map(|v| v.capacity() * std::mem::size_of::<(Rank, u32)>()).sum::<usize>();
        // A hash map's slot is its entry plus one control byte.
        let name_entry = std::mem::size_of::<(u64, Placed)>() + 1;
        let names = self.names.capacity() * (std::mem::size_of::<(Rank, FxHashMap<u64, Placed>)>() + 1)
            + self.names.values().map(|m| m.capacity() * name_entry).sum::<usize>();
        held + names
    }
}

/// The lower tiers of every rank. Single-threaded: the native index keeps it behind a lock.
#[derive(Debug, Default)]
pub struct LowerTiers {
    tiers: [Tier; 3],
}

impl LowerTiers {
    /// Whether any tier holds a block (routing skips the walk otherwise).
    pub fn is_empty(&self) -> bool {
        self.tiers.iter().all(|t| t.blocks == 0)
    }

    /// A Stored event of `tier`: `blocks` in order (engine hash, local hash), the first
    /// a child of `parent`, or a root block. The parent is looked up in the rank's lower tiers,
    /// then by `on_device`, which gives the position of the rank's device block of that name.
    pub fn store(
        &mut self,
        rank: Rank,
        tier: LowerTier,
        parent: Option<u64>,
        blocks: &[StoredBlock],
        on_device: impl FnOnce(u64) -> Option<u64>,
    ) {
        let mut position = match parent {
            None => None,
            Some(name) => match self.anchor(rank, tier, name).or_else(|| on_device(name)) {
                Some(p) => Some(p),
                None => {
                    self.tiers[tier.index()].counters.unanchored += blocks.len() as u64;
                    return;
                }
            },
        };
        let t = &mut self.tiers[tier.index()];
        for (i, &StoredBlock { ext: name, local }) in blocks.iter().enumerate() {
            let here = position.map_or(local, |p| next_sequence_hash(p, local));
            let names = t.names.entry(rank).or_default();
            match names.get(&name) {
                Some(known) if known.position == here => {}
                Some(_) => {
                    t.counters.conflicting += (blocks.len() - i) as u64;
                    return;
                }
                None => {
                    names.insert(name, Placed { position: here, local, parent: position.unwrap_or(here) });
                    t.hold(rank, here);
                    t.counters.stored += 1;
                }
            }
            position = Some(here);
        }
    }

    /// The position of a store's parent: the rank's block of that name in this tier, else in the
    /// other lower tiers (a disk store may continue a chain the host tier holds).
    fn anchor(&self, rank: Rank, tier: LowerTier, name: u64) -> Option<u64> {
        self.tiers[tier.index()].position_of(rank, name).or_else(|| {
            LowerTier::ALL.iter().filter(|t| **t != tier).find_map(|t| self.tiers[t.index()].position_of(rank, name))
        })
    }

    /// A Removed event of `tier`.
    pub fn remove(&mut self, rank: Rank, tier: LowerTier, hashes: &[u64]) {
        let t = &mut self.tiers[tier.index()];
        for name in hashes {
            let placed = t.names.get_mut(&rank).and_then(|names| names.remove(name));
            match placed {
                Some(p) => {
                    t.release(rank, p.position);
                    t.counters.removed += 1;
                }
                None => t.counters.not_found += 1,
            }
        }
        if t.names.get(&rank).is_some_and(|names| names.is_empty()) {
            t.names.remove(&rank);
        }
    }

    /// Forgets everything `rank` holds in every lower tier (an engine's cache clear, which Dynamo
    /// fans out to every tier).
    pub fn clear_rank(&mut self, rank: Rank) {
        for t in &mut self.tiers {
            t.clear_rank(rank);
        }
    }

    /// Forgets a worker's ranks (one, or all when `dp_rank` is `None`).
    pub fn remove_worker(&mut self, worker_id: u64, dp_rank: Option<u32>) {
        for t in &mut self.tiers {
            let ranks: Vec<Rank> = t
                .names
                .keys()
                .filter(|r| r.worker_id == worker_id && dp_rank.is_none_or(|d| d == r.dp_rank))
                .copied()
                .collect();
            for rank in ranks {
                t.clear_rank(rank);
            }
        }
    }

    /// Every block each rank holds in a lower tier, as runs of blocks that continue each other
    /// ([`runs`]: the first in position form, so that replaying it as a root store places
    /// it exactly): (rank, tier, run), ordered by rank, then tier (walk order), then the run's
    /// first name, so that both backends list them alike.
    pub fn runs(&self) -> Vec<(Rank, LowerTier, Vec<StoredBlock>)> {
        let mut out: Vec<(Rank, LowerTier, Vec<StoredBlock>)> = LowerTier::ALL
            .iter()
            .flat_map(|&tier| {
                self.tiers[tier.index()]
                    .names
                    .iter()
                    .flat_map(move |(&rank, names)| runs::runs(names).into_iter().map(move |run| (rank, tier, run)))
            })
            .collect();
        out.sort_unstable_by_key(|(rank, tier, run)| (*rank, tier.index(), run[0].ext));
        out
    }

    pub fn stats(&self) -> [TierStats; 3] {
        LowerTier::ALL.map(|t| {
            let tier = &self.tiers[t.index()];
            TierStats { blocks: tier.blocks, counters: tier.counters }
        })
    }

    /// Estimated heap bytes (map capacities times entry sizes).
    pub fn memory_bytes(&self) -> u64 {
        self.tiers.iter().map(|t| t.bytes() as u64).sum()
    }
}
