//! What the tree knows per rank: the names it uses for its blocks, and which of them are only
//! predicted (approximate mode).

use super::BlockId;
use crate::index::event::Rank;
use crate::index::growth::{FastMap, ShardedMap};
use crate::index::stats::vec_bytes;

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
    pub aliases: FastMap<BlockId, u64>,
    /// Predicted blocks (approximate mode) → expiry time in ms. Confirmed blocks are absent.
    pub predicted: FastMap<BlockId, f64>,
}

impl RankState {
    pub fn new(rank: Rank) -> Self {
        Self { rank, lookup: ShardedMap::default(), aliases: FastMap::default(), predicted: FastMap::default() }
    }

    pub fn heap_bytes(&self) -> usize {
        self.lookup.heap_bytes() + self.aliases.allocation_size() + self.predicted.allocation_size()
    }
}

/// Slot allocation for ranks, reusing the slots of removed ranks.
#[derive(Debug, Default)]
pub struct RankTable {
    pub slots: Vec<Option<RankState>>,
    pub by_rank: FastMap<Rank, Slot>,
    free: Vec<Slot>,
    /// Live slots in (worker id, dp rank) order, and each slot's position in it: results are
    /// sorted by a u64 key built from that position instead of by comparing ranks (sorting 256
    /// scores by rank was most of a query's time at 256 workers).
    by_order: Vec<Slot>,
    order: Vec<u32>,
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
        let at = self.by_order.partition_point(|&s| self.state(s).rank < rank);
        self.by_order.insert(at, slot);
        self.renumber(at);
        slot
    }

    /// Positions from `from` on changed: O(ranks) per rank added or removed, which is rare.
    fn renumber(&mut self, from: usize) {
        self.order.resize(self.slots.len(), u32::MAX);
        for (i, &slot) in self.by_order.iter().enumerate().skip(from) {
            self.order[slot as usize] = i as u32;
        }
    }

    /// The slot's position in rank order (a live slot).
    pub fn position(&self, slot: Slot) -> u32 {
        self.order[slot as usize]
    }

    /// The slot at a position in rank order.
    pub fn at_position(&self, position: u32) -> Slot {
        self.by_order[position as usize]
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
            let at = self.order[slot as usize] as usize;
            self.by_order.remove(at);
            self.renumber(at);
        }
    }

    /// Heap bytes of the table and of every rank's maps.
    pub fn heap_bytes(&self) -> usize {
        vec_bytes::<Option<RankState>>(self.slots.capacity())
            + self.by_rank.allocation_size()
            + vec_bytes::<Slot>(self.free.capacity())
            + vec_bytes::<Slot>(self.by_order.capacity())
            + vec_bytes::<u32>(self.order.capacity())
            + self.live().map(|(_, s)| s.heap_bytes()).sum::<usize>()
    }

    pub fn live(&self) -> impl Iterator<Item = (Slot, &RankState)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| s.as_ref().map(|s| (i as Slot, s)))
    }
}
