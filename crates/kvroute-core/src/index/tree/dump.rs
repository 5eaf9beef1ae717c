//! Dumps the index as Stored events that rebuild it.
//!
//! Per rank (in rank order), a depth-first walk with children in local-hash order; each maximal
//! chain along which the rank holds exactly one child becomes one event. The output depends only
//! on what each rank holds and names, never on the tree's shape, so a restored index dumps
//! identically and the pure-JS backend can produce the same events from its own layout.
//! Predicted (approximate-mode) blocks are not dumped: they are guesses with a TTL.

use super::book::Book;
use super::ranks::Slot;
use super::view::View;
use super::{NodeId, ROOT};
use crate::index::event::{Rank, StoredBlock};
use crate::tiers::LowerTier;

/// One Stored event of a dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpedStore {
    pub rank: Rank,
    /// The tier the event stores into: `None` for the device tree (everything this module
    /// dumps); the index appends its lower tiers' blocks (`index/lower.rs`).
    pub lower_tier: Option<LowerTier>,
    pub parent: Option<u64>,
    pub blocks: Vec<StoredBlock>,
}

/// A tree's book and view, read together.
pub struct Dumper<'a> {
    pub book: &'a Book,
    pub view: &'a View,
}

impl Dumper<'_> {
    pub fn dump(&self) -> Vec<DumpedStore> {
        let mut ranks: Vec<(Rank, Slot)> = self.view.ranks.live().map(|(slot, s)| (s.rank, slot)).collect();
        ranks.sort_unstable();
        let mut out = Vec::new();
        for (rank, slot) in ranks {
            self.dump_rank(rank, slot, &mut out);
        }
        out
    }

    fn held_children(&self, slot: Slot, node: NodeId) -> Vec<NodeId> {
        self.view
            .node(node)
            .children
            .sorted(|c| self.view.first_local(c))
            .into_iter()
            .map(|(_, c)| c)
            .filter(|&c| self.view.node(c).cutoff(slot) > 0)
            .collect()
    }

    fn dump_rank(&self, rank: Rank, slot: Slot, out: &mut Vec<DumpedStore>) {
        let predicted = &self.view.ranks.state(slot).predicted;
        let mut stack: Vec<(NodeId, Option<u64>)> =
            self.held_children(slot, ROOT).into_iter().rev().map(|c| (c, None)).collect();
        while let Some((start, parent)) = stack.pop() {
            let mut blocks = Vec::new();
            let mut node = start;
            let next = loop {
                let n = self.view.node(node);
                let cutoff = n.cutoff(slot);
                let mut stopped = false;
                for pos in 0..cutoff as usize {
                    let block = n.blocks()[pos];
                    if predicted.contains_key(&block) {
                        stopped = true;
                        break;
                    }
                    blocks.push(StoredBlock { ext: self.book.name_of(slot, block), local: n.locals()[pos] });
                }
                if stopped || cutoff < n.len() {
                    break Vec::new();
                }
                let children = self.held_children(slot, node);
                if children.len() == 1 {
                    node = children[0];
                } else {
                    break children;
                }
            };
            if blocks.is_empty() {
                continue;
            }
            let last = blocks.last().map(|b| b.ext);
            out.push(DumpedStore { rank, lower_tier: None, parent, blocks });
            stack.extend(next.into_iter().rev().map(|c| (c, last)));
        }
    }
}
