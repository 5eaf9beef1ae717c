//! What the tree knows per rank: the names it uses for its blocks, and which of them are only
//! predicted (approximate mode).

use super::BlockId;
use crate::index::event::Rank;
use crate::index::growth::ShardedMap;
use crate::index::stats::{map_bytes, vec_bytes};
use rustc_hash::FxHashMap;

/// A rank's dense slot number: holder lists store slots, not (u64, u32) pairs.
pub type Slot = u32;

#[derive(Debug)]
pub struct RankState {
    pub rank: Rank,
    /// The rank's name for each block it holds → that block. Sharded so that growing it never
    /// rehashes all of a large rank's names at once (see `growth.rs`).
    pub lookup: ShardedMap<BlockId>,
    /// Blocks the rank names differently from the tree's canonical name (the first storer's).
    /// Usually empty: engines that hash like Dynamo agree on names.
    pub aliases: FxHashMap<BlockId, u64>,
    /// Predicted blocks (approximate mode) → expiry time in ms. Confirmed blocks are absent.
    pub predicted: FxHashMap<BlockId, f64>,
}

impl RankState {
    pub fn new(rank: Rank) -> Self {
        Self { rank, lookup: ShardedMap::default(), aliases: FxHashMap::default(), predicted: FxHashMap::default() }
    }

    pub fn heap_bytes(&self) -> usize {
        self.lookup.heap_bytes()
            + map_bytes::<BlockId, u64>(self.aliases.capacity())
            + map_bytes::<BlockId, f64>(self.predicted.capacity())
    }
}

/// Slot allocation for ranks, reusing the slots of removed ranks.
#[derive(Debug, Default)]
pub struct RankTable {
    pub slots: Vec<Option<RankState>>,
    pub by_rank: FxHashMap<Rank, Slot>,
    free: Vec<Slot>,
}

impl RankTable {
    pub fn slot_of(&self, rank: Rank) -> Option<Slot> {
        self.by_rank.get(&rank).copied()
    }

    pub fn get_or_insert(&mut self, rank: Rank) -> Slot {
        if let Some(slot) = self.by_rank.get(&rank) {
            return *slot;
        }
        let state = RankState::new(rank);
        let slot = if let Some(slot) = self.free.pop() {
            self.slots[slot as usize] = Some(state);
            slot
        } else {
            self.slots.push(Some(state));
            (self.slots.len() - 1) as Slot
        };
        self.by_rank.insert(rank, slot);
        slot
    }

    pub fn state(&self, slot: Slot) -> &RankState {
        self.slots[slot as usize].as_ref().expect("live rank slot")
    }

    pub fn state_mut(&mut self, slot: Slot) -> &mut RankState {
        self.slots[slot as usize].as_mut().expect("live rank slot")
    }

    pub fn release(&mut self, slot: Slot) {
        if let Some(state) = self.slots[slot as usize].take() {
            self.by_rank.remove(&state.rank);
            self.free.push(slot);
        }
    }

    /// Heap bytes of the table and of every rank's maps.
    pub fn heap_bytes(&self) -> usize {
        vec_bytes::<Option<RankState>>(self.slots.capacity())
            + map_bytes::<Rank, Slot>(self.by_rank.capacity())
            + vec_bytes::<Slot>(self.free.capacity())
            + self.live().map(|(_, s)| s.heap_bytes()).sum::<usize>()
    }

    pub fn live(&self) -> impl Iterator<Item = (Slot, &RankState)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| s.as_ref().map(|s| (i as Slot, s)))
    }
}
