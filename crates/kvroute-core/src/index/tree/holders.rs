//! A node's holders: `(rank slot, cutoff)` pairs sorted by slot, the rank holding the edge's
//! first `cutoff` positions.
//!
//! Most nodes have one or two holders (at W = 256 a shard's nodes average 1.4), so up to two are
//! kept in the node itself and only more go to the heap. A `Vec` for each would cost a heap
//! allocation of at least four pairs (32 bytes, more with the allocator's own header) per node
//! and view copy, plus a `malloc` and a `free` whenever a node is made or freed. The two
//! in-place pairs fit in the bytes of the `Vec` beside the niche the enum's tag lives in, so a
//! node is no larger for them.

use super::ranks::Slot;

/// In place, unused pairs have cutoff 0 and come last: every holder's cutoff is at least 1.
const INLINE: usize = 2;

#[derive(Debug)]
pub enum Holders {
    Inline([(Slot, u32); INLINE]),
    Spilled(Vec<(Slot, u32)>),
}

const _: () = assert!(std::mem::size_of::<Holders>() == std::mem::size_of::<Vec<(Slot, u32)>>());

impl Default for Holders {
    fn default() -> Self {
        Self::Inline([(0, 0); INLINE])
    }
}

impl Holders {
    /// The holders, sorted by slot.
    pub fn as_slice(&self) -> &[(Slot, u32)] {
        match self {
            Self::Inline(pairs) => &pairs[..inline_len(pairs)],
            Self::Spilled(v) => v,
        }
    }

    pub fn cutoff(&self, slot: Slot) -> u32 {
        let holders = self.as_slice();
        holders.binary_search_by_key(&slot, |(s, _)| *s).map_or(0, |i| holders[i].1)
    }

    /// Sets a holder's cutoff (0 removes it).
    pub fn set_cutoff(&mut self, slot: Slot, cutoff: u32) {
        match self.as_slice().binary_search_by_key(&slot, |(s, _)| *s) {
            Ok(i) if cutoff == 0 => self.remove(i),
            Ok(i) => self.as_mut_slice()[i].1 = cutoff,
            Err(i) if cutoff > 0 => self.insert(i, (slot, cutoff)),
            Err(_) => {}
        }
    }

    pub fn max_cutoff(&self) -> u32 {
        self.as_slice().iter().map(|(_, c)| *c).max().unwrap_or(0)
    }

    /// Cuts every holder to at most `k` positions and returns, for the edge's tail after `k`
    /// (split off into a new node), the holders that reached past it with what they hold there.
    pub fn split_at(&mut self, k: u32) -> Holders {
        // A cutoff of 0 would end the in-place pairs early: splits are never at the edge's start.
        debug_assert!(k >= 1, "an edge is split after its first position at least");
        let mut tail = Holders::default();
        for (slot, cutoff) in self.as_mut_slice() {
            if *cutoff > k {
                tail.push_last((*slot, *cutoff - k));
                *cutoff = k;
            }
        }
        tail
    }

    /// Heap bytes (none while in place).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Self::Inline(_) => 0,
            Self::Spilled(v) => crate::index::stats::vec_bytes::<(Slot, u32)>(v.capacity()),
        }
    }

    fn as_mut_slice(&mut self) -> &mut [(Slot, u32)] {
        match self {
            Self::Inline(pairs) => {
                let len = inline_len(pairs);
                &mut pairs[..len]
            }
            Self::Spilled(v) => v,
        }
    }

    /// Appends a pair whose slot is above every holder's.
    fn push_last(&mut self, pair: (Slot, u32)) {
        let len = self.as_slice().len();
        self.insert(len, pair);
    }

    fn insert(&mut self, i: usize, pair: (Slot, u32)) {
        match self {
            Self::Inline(pairs) => {
                let len = inline_len(pairs);
                if len < INLINE {
                    pairs.copy_within(i..len, i + 1);
                    pairs[i] = pair;
                } else {
                    let mut v = Vec::with_capacity(2 * INLINE);
                    v.extend_from_slice(pairs);
                    v.insert(i, pair);
                    *self = Self::Spilled(v);
                }
            }
            Self::Spilled(v) => v.insert(i, pair),
        }
    }

    /// Removes pair `i`, moving back in place (and freeing the heap) when two or fewer remain.
    fn remove(&mut self, i: usize) {
        match self {
            Self::Inline(pairs) => {
                let len = inline_len(pairs);
                pairs.copy_within(i + 1..len, i);
                pairs[len - 1] = (0, 0);
            }
            Self::Spilled(v) => {
                v.remove(i);
                if v.len() <= INLINE {
                    let mut pairs = [(0, 0); INLINE];
                    pairs[..v.len()].copy_from_slice(v);
                    *self = Self::Inline(pairs);
                }
            }
        }
    }
}

fn inline_len(pairs: &[(Slot, u32); INLINE]) -> usize {
    pairs.iter().take_while(|(_, cutoff)| *cutoff != 0).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Cutoffs set and cleared against a map; slots 0..6, so that a node's holders cross the
        /// two in-place pairs both ways many times.
        #[test]
        fn behaves_like_a_sorted_map_in_place_and_spilled(
            ops in prop::collection::vec((0u32..6, prop_oneof![Just(0u32), 1u32..50]), 0..300),
        ) {
            let mut holders = Holders::default();
            let mut model = BTreeMap::new();
            for (slot, cutoff) in ops {
                holders.set_cutoff(slot, cutoff);
                if cutoff == 0 {
                    model.remove(&slot);
                } else {
                    model.insert(slot, cutoff);
                }
                let expected: Vec<_> = model.iter().map(|(s, c)| (*s, *c)).collect();
                prop_assert_eq!(holders.as_slice(), &expected[..]);
                prop_assert_eq!(matches!(holders, Holders::Inline(_)), expected.len() <= INLINE);
                prop_assert_eq!(holders.heap_bytes() == 0, expected.len() <= INLINE);
                prop_assert_eq!(holders.cutoff(slot), cutoff);
                prop_assert_eq!(holders.max_cutoff(), model.values().copied().max().unwrap_or(0));
            }
        }
    }

    #[test]
    fn a_split_moves_what_reaches_past_the_cut() {
        for count in 0..5u32 {
            let mut holders = Holders::default();
            for slot in 0..count {
                holders.set_cutoff(slot * 2, 3 + slot * 2);
            }
            let tail = holders.split_at(5);
            let head: Vec<_> = (0..count).map(|s| (s * 2, (3 + s * 2).min(5))).collect();
            let moved: Vec<_> = (0..count).filter(|s| 3 + s * 2 > 5).map(|s| (s * 2, 3 + s * 2 - 5)).collect();
            assert_eq!(holders.as_slice(), &head[..]);
            assert_eq!(tail.as_slice(), &moved[..]);
        }
    }
}
