//! What the tree knows per rank, split by who reads it: [`RankView`] (which ranks exist, their
//! order, how many blocks each holds, which are only predicted) is read by queries and kept in
//! every copy of the view; [`RankNames`] (the names a rank uses for its blocks) only the writer
//! reads, so it is kept once, in the book.

use super::BlockId;
use crate::index::event::Rank;
use crate::index::growth::FastMap;
use crate::index::names::NameTable;
use crate::index::stats::vec_bytes;

/// A rank's dense slot number: holder lists store slots, not (u64, u32) pairs.
pub type Slot = u32;

/// A rank as queries see it.
#[derive(Debug)]
pub struct RankInfo {
    pub rank: Rank,
    /// Blocks the rank holds (its `tree_size`).
    pub held: u32,
    /// Predicted blocks (approximate mode) → expiry time in ms. Confirmed blocks are absent.
    pub predicted: FastMap<BlockId, f64>,
}

/// The ranks of a view, with slots assigned by the writer.
#[derive(Debug, Default)]
pub struct RankView {
    pub slots: Vec<Option<RankInfo>>,
    pub by_rank: FastMap<Rank, Slot>,
    /// Live slots in (worker id, dp rank) order, and each slot's position in it: results are
    /// sorted by a u64 key built from that position instead of by comparing ranks (sorting 256
    /// scores by rank was most of a query's time at 256 workers).
    by_order: Vec<Slot>,
    order: Vec<u32>,
}

impl RankView {
    pub fn slot_of(&self, rank: Rank) -> Option<Slot> {
        self.by_rank.get(&rank).copied()
    }

    /// Makes `slot` (free in this view) hold `rank`.
    pub fn add(&mut self, slot: Slot, rank: Rank) {
        let i = slot as usize;
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        self.slots[i] = Some(RankInfo { rank, held: 0, predicted: FastMap::default() });
        self.by_rank.insert(rank, slot);
        let at = self.by_order.partition_point(|&s| self.state(s).rank < rank);
        self.by_order.insert(at, slot);
        self.renumber(at);
    }

    /// Forgets the rank in `slot`; returns how many predictions it had.
    pub fn release(&mut self, slot: Slot) -> usize {
        let Some(state) = self.slots[slot as usize].take() else {
            return 0;
        };
        self.by_rank.remove(&state.rank);
        let at = self.order[slot as usize] as usize;
        self.by_order.remove(at);
        self.renumber(at);
        state.predicted.len()
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

    /// Live ranks: positions run from 0 to this.
    pub fn count(&self) -> usize {
        self.by_order.len()
    }

    /// The slot at a position in rank order.
    pub fn at_position(&self, position: u32) -> Slot {
        self.by_order[position as usize]
    }

    pub fn state(&self, slot: Slot) -> &RankInfo {
        self.slots[slot as usize].as_ref().expect("live rank slot")
    }

    pub fn state_mut(&mut self, slot: Slot) -> &mut RankInfo {
        self.slots[slot as usize].as_mut().expect("live rank slot")
    }

    pub fn live(&self) -> impl Iterator<Item = (Slot, &RankInfo)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| s.as_ref().map(|s| (i as Slot, s)))
    }

    pub fn heap_bytes(&self) -> usize {
        vec_bytes::<Option<RankInfo>>(self.slots.capacity())
            + self.by_rank.allocation_size()
            + vec_bytes::<Slot>(self.by_order.capacity())
            + vec_bytes::<u32>(self.order.capacity())
            + self.live().map(|(_, s)| s.predicted.allocation_size()).sum::<usize>()
    }
}

/// The names one rank uses for its blocks (writer-only).
#[derive(Debug, Default)]
pub struct RankNames {
    /// The rank's name for each block it holds → that block (see `names.rs`).
    pub lookup: NameTable,
    /// Blocks the rank names differently from the tree's canonical name (the first storer's).
    /// Usually empty: engines that hash like Dynamo agree on names.
    pub aliases: FastMap<BlockId, u64>,
}

impl RankNames {
    pub fn heap_bytes(&self) -> usize {
        self.lookup.heap_bytes() + self.aliases.allocation_size()
    }
}
