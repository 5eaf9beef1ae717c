//! The view: the part of the tree that queries read (edges, holders, children, ranks,
//! predictions). [`crate::index::KvIndex`] keeps two copies of it, left-right style; writers
//! change one through [`super::journal`] and replay the journal on the other. The edges'
//! positions are not copied: both copies point at the same buffers (`edge.rs`).

use super::book::Loc;
use super::node::Node;
use super::ranks::RankView;
use super::{BlockId, NodeId, ROOT};
use crate::index::event::Rank;
use crate::index::growth::ChunkedVec;

#[derive(Debug)]
pub struct View {
    pub(super) nodes: ChunkedVec<Node>,
    pub(super) ranks: RankView,
    /// Predictions held by all ranks: queries track their path only when there are any.
    pub(super) predictions: u64,
}

impl Default for View {
    fn default() -> Self {
        Self::new()
    }
}

impl View {
    pub fn new() -> Self {
        let mut nodes = ChunkedVec::default();
        nodes.push(Node::default()); // the root
        Self { nodes, ranks: RankView::default(), predictions: 0 }
    }

    pub(super) fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    pub(super) fn node_mut(&mut self, id: NodeId) -> &mut Node {
        &mut self.nodes[id as usize]
    }

    /// A node's first local hash, its key among its parent's children (`None` before its edge
    /// has positions). Large child sets keep only the key's low bits and confirm here
    /// (`children.rs`).
    #[inline]
    pub(super) fn first_local(&self, id: NodeId) -> Option<u64> {
        self.node(id).locals().first().copied()
    }

    /// Blocks held by a rank (0 when unknown).
    pub fn tree_size(&self, rank: Rank) -> usize {
        self.ranks.slot_of(rank).map_or(0, |slot| self.ranks.state(slot).held as usize)
    }

    /// Heap bytes of this copy: every container's real allocation. O(nodes).
    pub fn heap_bytes(&self) -> usize {
        self.nodes.heap_bytes() + self.nodes.iter().map(Node::heap_bytes).sum::<usize>() + self.ranks.heap_bytes()
    }

    /// The block at a position.
    #[inline]
    pub(super) fn block_at(&self, loc: Loc) -> BlockId {
        self.node(loc.node).blocks()[loc.pos as usize]
    }

    /// The position just above `loc` on its path (`None` for a first block).
    pub(super) fn above(&self, loc: Loc) -> Option<Loc> {
        if loc.pos > 0 {
            return Some(Loc { pos: loc.pos - 1, ..loc });
        }
        let parent = self.node(loc.node).parent;
        (parent != ROOT).then(|| Loc { node: parent, pos: self.node(parent).len() - 1 })
    }

    /// The position after `at` along `local`: within the same edge, or the first position of a
    /// child. `None` at the root means "before the first block".
    pub(super) fn advance(&self, at: Option<Loc>, local: u64) -> Option<Loc> {
        match at {
            None => self.node(ROOT).children.get(local, |c| self.first_local(c)).map(|node| Loc { node, pos: 0 }),
            Some(Loc { node, pos }) => {
                let n = self.node(node);
                if pos + 1 < n.len() {
                    (n.locals()[(pos + 1) as usize] == local).then_some(Loc { node, pos: pos + 1 })
                } else {
                    n.children.get(local, |c| self.first_local(c)).map(|child| Loc { node: child, pos: 0 })
                }
            }
        }
    }
}
