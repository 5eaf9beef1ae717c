//! One node of the compressed tree: an edge of local hashes and the ranks that hold a prefix of it.

use super::children::Children;
use super::edge::Edge;
use super::holders::Holders;
use super::ranks::Slot;
use super::{BlockId, NodeId};

#[derive(Debug, Default)]
pub struct Node {
    pub(super) parent: NodeId,
    /// The edge: its local hashes (compared on every match, contiguous) and its positions'
    /// stable block ids, in a buffer both copies of the view share (see `edge.rs`).
    pub(super) edge: Edge,
    pub(super) children: Children,
    /// (rank slot, cutoff), sorted by slot: the rank holds `edge[0..cutoff]`. Invariants: every
    /// holder has `cutoff >= 1`; the holders of a child are a subset of the holders of its parent
    /// with `cutoff == parent.len()`; the largest cutoff equals the edge length, so every
    /// position is held by someone.
    pub(super) holders: Holders,
}

// Two holders and two children are kept in place, in bytes the node had anyway, and the
// children's variant tag in spare values of their count (`children.rs`): keep it so.
const _: () = assert!(std::mem::size_of::<Node>() == 80);

impl Node {
    pub(super) fn len(&self) -> u32 {
        self.edge.len()
    }

    pub(super) fn locals(&self) -> &[u64] {
        self.edge.locals()
    }

    pub(super) fn blocks(&self) -> &[BlockId] {
        self.edge.blocks()
    }

    pub(super) fn cutoff(&self, slot: Slot) -> u32 {
        self.holders.cutoff(slot)
    }

    /// Sets a holder's cutoff (0 removes it).
    pub(super) fn set_cutoff(&mut self, slot: Slot, cutoff: u32) {
        self.holders.set_cutoff(slot, cutoff);
    }

    pub(super) fn max_cutoff(&self) -> u32 {
        self.holders.max_cutoff()
    }

    /// Heap bytes of this copy of the node (the edge's buffer is the book's: see `edge.rs`).
    pub(super) fn heap_bytes(&self) -> usize {
        self.holders.heap_bytes() + self.children.heap_bytes()
    }
}
