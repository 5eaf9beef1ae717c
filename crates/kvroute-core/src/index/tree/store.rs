//! Stored events (and approximate-mode predictions, which are stores with an expiry).
//!
//! A store is planned read-only first and applied second, so a rejected event changes nothing.

use super::ranks::Slot;
use super::{children::Children, BlockId, Loc, Node, NodeId, Tree, ROOT};
use crate::index::event::StoredBlock;
use crate::index::stats::Rejection;
use rustc_hash::FxHashSet;

/// Up to this many blocks, repeated names are found by comparing pairs: cheaper than hashing
/// (no allocation) for the short events engines send.
const PAIRWISE_MAX: usize = 16;

fn has_repeated_name(blocks: &[StoredBlock]) -> bool {
    if blocks.len() <= PAIRWISE_MAX {
        return blocks.iter().enumerate().any(|(i, a)| blocks[i + 1..].iter().any(|b| b.ext == a.ext));
    }
    let mut seen = FxHashSet::default();
    !blocks.iter().all(|b| seen.insert(b.ext))
}

impl Tree {
    /// Stores `blocks` for the rank after its block named `parent` (or at the root).
    /// `predicted` is the expiry of an approximate-mode prediction; `None` for real events.
    /// Returns whether anything changed (`false` is a duplicate store).
    pub(super) fn store(
        &mut self,
        slot: Slot,
        parent: Option<u64>,
        blocks: &[StoredBlock],
        predicted: Option<f64>,
    ) -> Result<bool, Rejection> {
        let start = self.resolve_parent(slot, parent)?;
        self.check_names(slot, parent, start, blocks)?;
        let mut changed = false;
        let mut at = start;
        for (i, block) in blocks.iter().enumerate() {
            let Some(loc) = self.advance(at, block.local) else {
                self.insert_new(slot, at, &blocks[i..], predicted);
                changed = true;
                break;
            };
            changed |= self.hold_existing(slot, loc, block.ext, predicted);
            at = Some(loc);
        }
        if predicted.is_none() {
            if let Some(parent_loc) = start {
                self.confirm_from(slot, parent_loc);
            }
        }
        Ok(changed)
    }

    fn resolve_parent(&self, slot: Slot, parent: Option<u64>) -> Result<Option<Loc>, Rejection> {
        match parent {
            None => Ok(None),
            Some(ext) => match self.ranks.state(slot).lookup.get(&ext) {
                Some(&block) => Ok(Some(self.blocks.loc[block as usize])),
                None => Err(Rejection::ParentBlockNotFound),
            },
        }
    }

    /// Rejects stores that would give one name two meanings: the parent among the blocks, a name
    /// repeated inside the event, or a name the rank already uses for a different position.
    fn check_names(
        &self,
        slot: Slot,
        parent: Option<u64>,
        start: Option<Loc>,
        blocks: &[StoredBlock],
    ) -> Result<(), Rejection> {
        if parent.is_some_and(|p| blocks.iter().any(|b| b.ext == p)) {
            return Err(Rejection::InvalidBlock);
        }
        if has_repeated_name(blocks) {
            return Err(Rejection::InvalidBlock);
        }
        let lookup = &self.ranks.state(slot).lookup;
        let mut at = start;
        for (i, block) in blocks.iter().enumerate() {
            let Some(loc) = self.advance(at, block.local) else {
                // The rest of the event creates new positions: none of its names may be in use.
                if blocks[i..].iter().any(|b| lookup.contains_key(&b.ext)) {
                    return Err(Rejection::InvalidBlock);
                }
                break;
            };
            let here = self.node(loc.node).blocks[loc.pos as usize];
            if lookup.get(&block.ext).is_some_and(|&named| named != here) {
                return Err(Rejection::InvalidBlock);
            }
            at = Some(loc);
        }
        Ok(())
    }

    /// Makes the rank hold an existing position. Returns whether anything changed.
    fn hold_existing(&mut self, slot: Slot, loc: Loc, ext: u64, predicted: Option<f64>) -> bool {
        let block = self.node(loc.node).blocks[loc.pos as usize];
        let held = self.node(loc.node).cutoff(slot) > loc.pos;
        if !held {
            // The rank holds the previous position, so its cutoff here is exactly `loc.pos`.
            self.node_mut(loc.node).set_cutoff(slot, loc.pos + 1);
        }
        match predicted {
            // A prediction never renames a block the engine named, and only refreshes the TTL
            // of blocks that are still predictions.
            Some(expiry) => {
                if !held {
                    self.set_name(slot, block, ext, false);
                    self.predict(slot, block, expiry);
                } else if self.ranks.state(slot).predicted.contains_key(&block) {
                    self.predict(slot, block, expiry);
                }
                !held
            }
            None => {
                let predicted = &mut self.ranks.state_mut(slot).predicted;
                if !predicted.is_empty() {
                    predicted.remove(&block);
                }
                self.set_name(slot, block, ext, held) || !held
            }
        }
    }

    /// Creates positions for `blocks` after `at`: extending a leaf in place when the rank holds its
    /// end and it has no children (decode appends one block at a time), otherwise as a new child,
    /// splitting the edge first when `at` is inside it.
    fn insert_new(&mut self, slot: Slot, at: Option<Loc>, blocks: &[StoredBlock], predicted: Option<f64>) {
        let (node, extend_leaf) = match at {
            None => (ROOT, false),
            Some(loc) => {
                if loc.pos + 1 < self.node(loc.node).len() {
                    self.split(loc.node, loc.pos + 1);
                }
                (loc.node, self.node(loc.node).children.is_empty())
            }
        };
        let target = if extend_leaf {
            node
        } else {
            let child = self.alloc_node(Node { parent: node, ..Node::default() });
            self.node_mut(node).children.insert(blocks[0].local, child);
            child
        };
        let offset = self.node(target).len();
        for (j, b) in blocks.iter().enumerate() {
            let id = self.blocks.alloc(Loc { node: target, pos: offset + j as u32 }, b.ext);
            let n = self.node_mut(target);
            n.locals.push(b.local);
            n.blocks.push(id);
            self.set_name(slot, id, b.ext, false);
            if let Some(expiry) = predicted {
                self.predict(slot, id, expiry);
            }
        }
        let len = self.node(target).len();
        self.node_mut(target).set_cutoff(slot, len);
    }

    /// Splits `node`'s edge before position `k`; the tail becomes its only child.
    fn split(&mut self, node: NodeId, k: u32) {
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
        let moved = blocks.clone();
        let tail = self.alloc_node(Node { parent: node, locals, blocks, children, holders });
        for child in self.node(tail).children.ids() {
            self.node_mut(child).parent = tail;
        }
        for (pos, id) in moved.into_iter().enumerate() {
            self.blocks.loc[id as usize] = Loc { node: tail, pos: pos as u32 };
        }
        self.node_mut(node).children = Children::default();
        self.node_mut(node).children.insert(first, tail);
    }

    fn predict(&mut self, slot: Slot, block: BlockId, expiry: f64) {
        self.ranks.state_mut(slot).predicted.insert(block, expiry);
        self.expiry.push(expiry, slot, block, &self.ranks);
    }

    /// A real event proves the rank holds `loc` and everything before it: those blocks are no
    /// longer predictions. Predictions only ever sit below confirmed blocks, so the walk stops at
    /// the first confirmed one.
    fn confirm_from(&mut self, slot: Slot, loc: Loc) {
        if self.ranks.state(slot).predicted.is_empty() {
            return;
        }
        let (mut node, mut pos) = (loc.node, Some(loc.pos));
        while node != ROOT {
            let n = &self.nodes[node as usize];
            let end = pos.map_or(n.len(), |p| p + 1);
            for p in (0..end).rev() {
                let block = n.blocks[p as usize];
                if self.ranks.state_mut(slot).predicted.remove(&block).is_none() {
                    return;
                }
            }
            node = n.parent;
            pos = None;
        }
    }
}
