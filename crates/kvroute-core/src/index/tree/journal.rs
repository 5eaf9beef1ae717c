//! Changes to a [`View`] as a list of small, already-resolved operations.
//!
//! A writer works out an event once (name lookups, checks, block allocation: the book's
//! hash-map work) and records what it changes in the view as [`ViewOp`]s, applying each to the
//! copy it writes as it goes. The other copy then replays the list, which costs a few loads and
//! stores per edge instead of the event's per-block work: an edge's positions are written once,
//! into the buffer both copies share (`edge.rs`), and the ops only point the copies at it. Every
//! op is deterministic, so replay leaves the two copies identical, node ids included.

use super::children::Children;
use super::edge::Edge;
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
    /// The node's edge is now `edge` (positions appended, perhaps in a new buffer).
    SetEdge {
        node: NodeId,
        edge: Edge,
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
        child: NodeId,
    },
    /// Moves the edge's tail from `k` on (with its children and holders) into the new node
    /// `tail`, which becomes `node`'s only child; `edge` is the tail's copy of those positions.
    Split {
        node: NodeId,
        k: u32,
        tail: NodeId,
        edge: Edge,
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

/// The ops of one batch.
#[derive(Debug, Default)]
pub struct Journal {
    ops: Vec<ViewOp>,
}

/// Above this many ops (64 KiB), a cleared journal gives its memory back, so an idle index does
/// not hold the scratch of its largest batch. It was 16,384 ops (512 KiB); once writers applied
/// queued batches in one write, their journals kept more, and the index's live bytes at rest
/// rose 3% on the churn workload.
const KEEP_CAPACITY: usize = 1 << 11;

impl Journal {
    /// Applies `op` to `view` and keeps it for the replay.
    pub fn record(&mut self, view: &mut View, op: ViewOp) {
        view.apply(&op);
        self.ops.push(op);
    }

    /// Applies every recorded op, in order, to the other copy.
    pub fn replay(&self, view: &mut View) {
        for op in &self.ops {
            view.apply(op);
        }
    }

    pub fn clear(&mut self) {
        if self.ops.capacity() > KEEP_CAPACITY {
            *self = Self::default();
        } else {
            self.ops.clear();
        }
    }

    pub fn heap_bytes(&self) -> usize {
        vec_bytes::<ViewOp>(self.ops.capacity())
    }
}

impl View {
    fn apply(&mut self, op: &ViewOp) {
        match *op {
            ViewOp::NewNode { id, parent } => self.put_node(id, Node { parent, ..Node::default() }),
            ViewOp::FreeNode { id } => *self.node_mut(id) = Node::default(),
            ViewOp::SetEdge { node, edge } => self.node_mut(node).edge = edge,
            ViewOp::Truncate { node, keep } => {
                let n = self.node_mut(node);
                n.edge = n.edge.truncated(keep);
            }
            ViewOp::SetCutoff { node, slot, cutoff } => self.node_mut(node).set_cutoff(slot, cutoff),
            ViewOp::AddChild { node, local, child } => self.node_mut(node).children.insert(local, child),
            ViewOp::RemoveChild { node, local, child } => self.node_mut(node).children.remove(local, child),
            ViewOp::Split { node, k, tail, edge } => self.split(node, k, tail, edge),
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

    fn split(&mut self, node: NodeId, k: u32, tail: NodeId, edge: Edge) {
        let n = self.node_mut(node);
        n.edge = n.edge.truncated(k);
        let children = std::mem::take(&mut n.children);
        let holders = n.holders.split_at(k);
        let first = edge.locals()[0];
        self.put_node(tail, Node { parent: node, edge, children, holders });
        for child in self.node(tail).children.ids() {
            self.node_mut(child).parent = tail;
        }
        self.node_mut(node).children = Children::default();
        self.node_mut(node).children.insert(first, tail);
    }
}
