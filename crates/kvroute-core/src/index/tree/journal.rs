//! Changes to a [`View`] as a list of small, already-resolved operations.
//!
//! A writer works out an event once (name lookups, checks, block allocation: the book's
//! hash-map work) and records what it changes in the view as [`ViewOp`]s, applying each to the
//! copy it writes as it goes. The other copy then replays the list, which costs a few loads and
//! stores per edge instead of the event's per-block work. Every op is deterministic, so replay
//! leaves the two copies identical, node ids and capacities included.

use super::children::Children;
use super::node::Node;
use super::ranks::Slot;
use super::view::View;
use super::{BlockId, NodeId};
use crate::index::event::Rank;
use crate::index::stats::vec_bytes;

#[derive(Debug, Clone, Copy)]
pub enum ViewOp {
    /// Node `id` (the next new id, or a freed one) starts empty under `parent`.
    NewNode {
        id: NodeId,
        parent: NodeId,
    },
    FreeNode {
        id: NodeId,
    },
    /// Appends `len` positions to the edge, from the journal's buffers at `start`.
    Extend {
        node: NodeId,
        start: u32,
        len: u32,
    },
    Truncate {
        node: NodeId,
        keep: u32,
    },
    SetCutoff {
        node: NodeId,
        slot: Slot,
        cutoff: u32,
    },
    AddChild {
        node: NodeId,
        local: u64,
        child: NodeId,
    },
    RemoveChild {
        node: NodeId,
        local: u64,
    },
    /// Moves the edge's tail from `k` on (with its children and holders) into the new node
    /// `tail`, which becomes `node`'s only child.
    Split {
        node: NodeId,
        k: u32,
        tail: NodeId,
    },
    AddRank {
        slot: Slot,
        rank: Rank,
    },
    ReleaseRank {
        slot: Slot,
    },
    SetHeld {
        slot: Slot,
        held: u32,
    },
    Predict {
        slot: Slot,
        block: BlockId,
        expiry: f64,
    },
    Unpredict {
        slot: Slot,
        block: BlockId,
    },
    ClearPredicted {
        slot: Slot,
    },
}

/// The ops of one batch, and the edge positions they append.
#[derive(Debug, Default)]
pub struct Journal {
    ops: Vec<ViewOp>,
    locals: Vec<u64>,
    blocks: Vec<BlockId>,
}

/// Above this many buffered entries (about 600 KiB in all), a cleared journal gives its memory
/// back, so an idle index does not hold the scratch of its largest batch.
const KEEP_CAPACITY: usize = 1 << 14;

impl Journal {
    /// Applies `op` to `view` and keeps it for the replay.
    pub fn record(&mut self, view: &mut View, op: ViewOp) {
        view.apply(&op, &self.locals, &self.blocks);
        self.ops.push(op);
    }

    /// Buffers edge positions for an [`ViewOp::Extend`]; returns their start.
    pub fn buffer(&mut self, locals: impl Iterator<Item = u64>, blocks: &[BlockId]) -> u32 {
        let start = self.locals.len() as u32;
        self.locals.extend(locals);
        self.blocks.extend_from_slice(blocks);
        start
    }

    /// Applies every recorded op, in order, to the other copy.
    pub fn replay(&self, view: &mut View) {
        for op in &self.ops {
            view.apply(op, &self.locals, &self.blocks);
        }
    }

    pub fn clear(&mut self) {
        if self.ops.capacity() > KEEP_CAPACITY || self.locals.capacity() > KEEP_CAPACITY {
            *self = Self::default();
        } else {
            self.ops.clear();
            self.locals.clear();
            self.blocks.clear();
        }
    }

    pub fn heap_bytes(&self) -> usize {
        vec_bytes::<ViewOp>(self.ops.capacity())
            + vec_bytes::<u64>(self.locals.capacity())
            + vec_bytes::<BlockId>(self.blocks.capacity())
    }
}

impl View {
    fn apply(&mut self, op: &ViewOp, locals: &[u64], blocks: &[BlockId]) {
        match *op {
            ViewOp::NewNode { id, parent } => self.put_node(id, Node { parent, ..Node::default() }),
            ViewOp::FreeNode { id } => *self.node_mut(id) = Node::default(),
            ViewOp::Extend { node, start, len } => {
                let range = start as usize..(start + len) as usize;
                let n = self.node_mut(node);
                n.locals.extend_from_slice(&locals[range.clone()]);
                n.blocks.extend_from_slice(&blocks[range]);
            }
            ViewOp::Truncate { node, keep } => {
                let n = self.node_mut(node);
                n.locals.truncate(keep as usize);
                n.blocks.truncate(keep as usize);
            }
            ViewOp::SetCutoff { node, slot, cutoff } => self.node_mut(node).set_cutoff(slot, cutoff),
            ViewOp::AddChild { node, local, child } => self.node_mut(node).children.insert(local, child),
            ViewOp::RemoveChild { node, local } => self.node_mut(node).children.remove(local),
            ViewOp::Split { node, k, tail } => self.split(node, k, tail),
            ViewOp::AddRank { slot, rank } => self.ranks.add(slot, rank),
            ViewOp::ReleaseRank { slot } => self.predictions -= self.ranks.release(slot) as u64,
            ViewOp::SetHeld { slot, held } => self.ranks.state_mut(slot).held = held,
            ViewOp::Predict { slot, block, expiry } => {
                if self.ranks.state_mut(slot).predicted.insert(block, expiry).is_none() {
                    self.predictions += 1;
                }
            }
            ViewOp::Unpredict { slot, block } => {
                if self.ranks.state_mut(slot).predicted.remove(&block).is_some() {
                    self.predictions -= 1;
                }
            }
            ViewOp::ClearPredicted { slot } => {
                let predicted = &mut self.ranks.state_mut(slot).predicted;
                self.predictions -= predicted.len() as u64;
                predicted.clear();
            }
        }
    }

    fn put_node(&mut self, id: NodeId, node: Node) {
        if id as usize == self.nodes.len() {
            self.nodes.push(node);
        } else {
            *self.node_mut(id) = node;
        }
    }

    fn split(&mut self, node: NodeId, k: u32, tail: NodeId) {
        let n = self.node_mut(node);
        let locals = n.locals.split_off(k as usize);
        let blocks = n.blocks.split_off(k as usize);
        let children = std::mem::take(&mut n.children);
        let mut holders = Vec::new();
        for (slot, cutoff) in &mut n.holders {
            if *cutoff > k {
                holders.push((*slot, *cutoff - k));
                *cutoff = k;
            }
        }
        let first = locals[0];
        self.put_node(tail, Node { parent: node, locals, blocks, children, holders });
        for child in self.node(tail).children.ids() {
            self.node_mut(child).parent = tail;
        }
        self.node_mut(node).children = Children::default();
        self.node_mut(node).children.insert(first, tail);
    }
}
