//! Per-position data for writers: where each block sits and its canonical name, 12 bytes a
//! position.
//!
//! A position's location (its node and its offset in that node's edge) is packed into one
//! `u32`: the offset in the low [`POS_BITS`] bits, the node above. The tree keeps every edge at
//! most [`MAX_EDGE_LEN`] positions long (a longer run continues in a child: `store.rs`), so the
//! offset always fits; node ids fit up to about four million nodes, which at 176 bytes a node
//! (both copies of the view) is past 700 MB of nodes alone. A location that does not fit is kept
//! in a side table instead, so correctness never depends on the tree's size: only such an
//! index's speed and memory do.
//!
//! Why packed: at W = 256 the index holds 1.3 ranks' names per position, so this array is a
//! third of its memory; 12 bytes instead of 16 took it from 0.56× Dynamo's bytes per held block
//! toward the 0.5× target (see `BENCHMARKS.md`). The earlier try at 12 bytes dropped the offset
//! and searched the edge for it, a cache miss per removal; unpacking costs a shift and a mask.

use super::{BlockId, NodeId};
use crate::index::growth::{ChunkedVec, FastMap};
use crate::index::stats::vec_bytes;

/// Bits of a packed location that hold the offset in the edge.
pub const POS_BITS: u32 = 10;
/// The longest edge the tree makes (1,024 positions), so that every offset packs.
pub const MAX_EDGE_LEN: u32 = 1 << POS_BITS;
/// The packed value of a location kept in the side table (never a packed location: node ids
/// that pack are below `SPILLED >> POS_BITS`).
const SPILLED: u32 = u32::MAX;

/// Where one block sits: its node and its offset in that node's edge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Loc {
    pub node: NodeId,
    pub pos: u32,
}

impl Loc {
    #[inline]
    fn pack(self) -> Option<u32> {
        (self.pos < MAX_EDGE_LEN && self.node < SPILLED >> POS_BITS).then_some(self.node << POS_BITS | self.pos)
    }

    #[inline]
    fn unpack(packed: u32) -> Self {
        Self { node: packed >> POS_BITS, pos: packed & (MAX_EDGE_LEN - 1) }
    }
}

/// One position's data: its canonical name (the external hash of the rank that created it) and
/// its packed location, side by side so that a removal's two reads share a cache line. Aligned
/// to 4 so that an array of them has no padding. The name comes first because the compiler
/// builds a new record on the stack and copies it as 8 bytes and then 4: with the location
/// first, the 8-byte read spanned the stores of both fields, which the CPU cannot forward, and
/// every new block waited for them to reach the cache (perf put a fifth of `store`'s samples
/// at W = 256 on that copy). Name first, each read matches one store: two-writer ingest at
/// W = 256 7% faster (8 alternating pairs, 6 faster), instructions unchanged.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, packed(4))]
struct BlockInfo {
    ext: u64,
    loc: u32,
}

const _: () = assert!(std::mem::size_of::<BlockInfo>() == 12);

/// Per-position data, indexed by [`BlockId`].
#[derive(Debug, Default)]
pub struct BlockArena {
    info: ChunkedVec<BlockInfo>,
    /// Locations that do not pack (see the module docs); usually empty.
    spilled: FastMap<BlockId, Loc>,
    pub free: Vec<BlockId>,
}

impl BlockArena {
    #[inline]
    pub fn alloc(&mut self, loc: Loc, ext: u64) -> BlockId {
        // One write of the whole record: a reused id's old record is never read (a miss), and
        // a new id's is pushed as it is.
        match self.free.pop() {
            Some(id) => {
                let loc = self.packed(id, loc);
                self.info[id as usize] = BlockInfo { ext, loc };
                id
            }
            None => {
                let id = self.info.len() as BlockId;
                let loc = self.packed(id, loc);
                self.info.push(BlockInfo { ext, loc });
                id
            }
        }
    }

    /// Gives back a block id taken by the last `alloc` (ids given back in the reverse order of
    /// their allocation leave the free list as it was).
    pub fn release(&mut self, block: BlockId) {
        self.free.push(block);
    }

    #[inline]
    pub fn loc(&self, block: BlockId) -> Loc {
        match self.info[block as usize].loc {
            SPILLED => self.spilled[&block],
            packed => Loc::unpack(packed),
        }
    }

    #[inline]
    pub fn ext(&self, block: BlockId) -> u64 {
        self.info[block as usize].ext
    }

    /// Sets where the block sits (a new block, or one that moved in an edge split).
    #[inline]
    pub fn relocate(&mut self, block: BlockId, loc: Loc) {
        self.info[block as usize].loc = self.packed(block, loc);
    }

    /// The packed value to store for `block` at `loc`, keeping the side table right without
    /// reading the block's old record: any entry the block had goes, and one is added when
    /// `loc` does not pack. The side table is usually empty, and then this is the packing alone.
    #[inline]
    fn packed(&mut self, block: BlockId, loc: Loc) -> u32 {
        if !self.spilled.is_empty() {
            self.spilled.remove(&block);
        }
        loc.pack().unwrap_or_else(|| self.spill(block, loc))
    }

    #[cold]
    fn spill(&mut self, block: BlockId, loc: Loc) -> u32 {
        self.spilled.insert(block, loc);
        SPILLED
    }

    pub fn live_count(&self) -> usize {
        self.info.len() - self.free.len()
    }

    pub fn heap_bytes(&self) -> usize {
        self.info.heap_bytes() + self.spilled.allocation_size() + vec_bytes::<BlockId>(self.free.capacity())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// Nodes on both sides of the packing limit, offsets up to past the longest edge.
    fn any_loc() -> impl Strategy<Value = Loc> {
        let limit = SPILLED >> POS_BITS;
        (prop_oneof![0..16u32, limit - 4..limit + 4, Just(u32::MAX)], 0..MAX_EDGE_LEN + 2)
            .prop_map(|(node, pos)| Loc { node, pos })
    }

    #[derive(Debug, Clone)]
    enum Op {
        Alloc(Loc, u64),
        Relocate(usize, Loc),
        Free(usize),
    }

    fn any_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (any_loc(), any::<u64>()).prop_map(|(l, e)| Op::Alloc(l, e)),
            (any::<usize>(), any_loc()).prop_map(|(i, l)| Op::Relocate(i, l)),
            any::<usize>().prop_map(Op::Free),
        ]
    }

    proptest! {
        /// The arena gives back every location and name it was told, packed or spilled, and
        /// keeps a side entry only for live blocks whose location does not pack.
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec(any_op(), 1..200)) {
            let mut arena = BlockArena::default();
            let mut model: HashMap<BlockId, (Loc, u64)> = HashMap::new();
            let mut live: Vec<BlockId> = Vec::new();
            for op in ops {
                match op {
                    Op::Alloc(loc, ext) => {
                        let id = arena.alloc(loc, ext);
                        prop_assert!(!model.contains_key(&id), "a live id was handed out again");
                        model.insert(id, (loc, ext));
                        live.push(id);
                    }
                    Op::Relocate(i, loc) if !live.is_empty() => {
                        let id = live[i % live.len()];
                        arena.relocate(id, loc);
                        model.get_mut(&id).expect("live").0 = loc;
                    }
                    Op::Free(i) if !live.is_empty() => {
                        let id = live.swap_remove(i % live.len());
                        model.remove(&id);
                        arena.release(id);
                    }
                    _ => {}
                }
                for (&id, &(loc, ext)) in &model {
                    prop_assert_eq!((arena.loc(id), arena.ext(id)), (loc, ext));
                }
                prop_assert_eq!(arena.live_count(), model.len());
                let unpacked = model.values().filter(|(loc, _)| loc.pack().is_none()).count();
                prop_assert!(arena.spilled.len() >= unpacked);
                prop_assert!(arena.spilled.len() <= unpacked + arena.free.len(), "stale side entries only for freed ids");
            }
        }
    }

    #[test]
    fn locations_pack_up_to_the_limits() {
        let limit = SPILLED >> POS_BITS;
        let last = Loc { node: limit - 1, pos: MAX_EDGE_LEN - 1 };
        assert_eq!(last.pack().map(Loc::unpack), Some(last));
        assert_eq!(Loc { node: limit, pos: 0 }.pack(), None);
        assert_eq!(Loc { node: 0, pos: MAX_EDGE_LEN }.pack(), None);
        assert_ne!(last.pack(), Some(SPILLED));
    }
}
