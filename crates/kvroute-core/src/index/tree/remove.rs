//! Removed and Cleared events. Removing a block removes everything the rank holds below it, so a
//! rank's coverage is always contiguous from the root and a re-stored gap never resurrects
//! descendants. Positions nobody holds any more are freed at once, keeping the tree minimal.

use super::book::{take_in, Loc};
use super::journal::ViewOp;
use super::ranks::Slot;
use super::writer::TreeWriter;
use super::{NodeId, ROOT};
use std::ops::Range;

/// How many names ahead a removal prefetches a name's bucket, and a store its new names'
/// buckets: enough to overlap the misses, few enough to stay in the cache until used. 8 was as
/// good before bucket scans got cheaper; 32 gains nothing over 16. A removal also prefetched
/// each name's block data, half as far ahead, once its bucket had arrived (a second scan of the
/// bucket); that second stage cost 88 instructions per removed block, and without it two-writer
/// ingest ran 10% faster at W = 16 and 4% on churn (eighteenth round, `index/mod.rs`).
pub(super) const PREFETCH_AHEAD: usize = 16;

/// A pending run of a Removed event: positions `low..=high` of `node`'s edge, named deepest
/// first.
#[derive(Clone, Copy)]
struct Run {
    node: NodeId,
    low: u32,
    high: u32,
}

impl Run {
    fn at(loc: Loc) -> Self {
        Self { node: loc.node, low: loc.pos, high: loc.pos }
    }
}

impl TreeWriter<'_> {
    /// Removes each named block (and what the rank holds below it) in order, as if one at a time;
    /// returns how many names the rank did not hold at their turn.
    ///
    /// Engines evict leaf first, so a Removed event is mostly runs that walk an edge backwards
    /// (each name the position just before the previous one). Such a run is cut once, at its
    /// shallowest position, instead of once per block: the same final state, and since the run
    /// only moves towards the root, every name in it was still held at its turn. Any other name
    /// applies the pending cut first, so its lookup sees the state the names before it left.
    ///
    /// Each name is looked up and taken out of the name table in one scan of its bucket
    /// ([`crate::index::tree::Book::take_named`]): a name that joins the pending run is sure to
    /// go when the run is cut, and the cut skips the names it took. A name that starts a new run
    /// goes back in the table for the pending cut, which may take it with it. A name repeated
    /// later in the event is then not found, as it would not be after the cut.
    pub(super) fn remove_names(&mut self, slot: Slot, hashes: &[u64]) -> usize {
        let mut unknown = 0;
        let mut pending: Option<Run> = None;
        let lookup = &self.book.names(slot).lookup;
        for &ext in hashes.iter().take(PREFETCH_AHEAD) {
            lookup.prefetch(ext);
        }
        for (i, &ext) in hashes.iter().enumerate() {
            // The rank's names looked up once for the name's prefetch and take.
            let (names, blocks) = self.book.names_and_blocks(slot);
            if let Some(&ahead) = hashes.get(i + PREFETCH_AHEAD) {
                names.lookup.prefetch(ahead);
            }
            // Taken out of the table at once (the common case: it joins the run); put back below
            // when it does not.
            let Some(block) = take_in(names, blocks, ext) else {
                // Whether or not a run is pending, an absent name stays absent after it.
                unknown += 1;
                continue;
            };
            let loc = self.book.blocks.loc(block);
            pending = match pending {
                Some(run) if run.node == loc.node && loc.pos + 1 == run.low => Some(Run { low: loc.pos, ..run }),
                Some(run) => {
                    // The pending cut applies first and may take this name with it (then no run
                    // is pending), so the name goes back in the table for it.
                    self.book.restore_name(slot, ext, block);
                    self.cut_run(slot, run);
                    let Some(still) = self.book.take_named(slot, ext) else {
                        unknown += 1;
                        pending = None;
                        continue;
                    };
                    Some(Run::at(self.book.blocks.loc(still)))
                }
                None => Some(Run::at(loc)),
            };
        }
        if let Some(run) = pending {
            self.cut_run(slot, run);
        }
        unknown
    }

    /// Cuts the rank at a run's shallowest position; the run's names were taken already.
    fn cut_run(&mut self, slot: Slot, run: Run) {
        self.cut_at(slot, Loc { node: run.node, pos: run.low }, run.low..run.high + 1);
    }

    /// Drops every block the rank holds. The rank itself stays known.
    pub(super) fn clear_slot(&mut self, slot: Slot) {
        let held: Vec<NodeId> = self.held_children(slot, ROOT);
        for child in held {
            self.drop_subtree(slot, child);
        }
        debug_assert!(self.book.names(slot).lookup.is_empty());
        if !self.view.ranks.state(slot).predicted.is_empty() {
            self.record(ViewOp::ClearPredicted { slot });
        }
    }

    fn held_children(&self, slot: Slot, node: NodeId) -> Vec<NodeId> {
        let n = self.view.node(node);
        n.children.iter().filter(|&c| self.view.node(c).cutoff(slot) > 0).collect()
    }

    /// The rank keeps `edge[0..loc.pos]` of `loc.node` and loses the rest of it and all below.
    /// The names of the positions in `taken` are out of the name table already.
    pub(super) fn cut_at(&mut self, slot: Slot, loc: Loc, taken: Range<u32>) {
        // Found before the cut, which may free `loc.node` (and with it the way up).
        let above = self.view.above(loc);
        let n = self.view.node(loc.node);
        let cutoff = n.cutoff(slot);
        if cutoff == n.len() {
            for child in self.held_children(slot, loc.node) {
                self.drop_subtree(slot, child);
            }
        }
        self.drop_names(slot, loc.node, loc.pos..cutoff, taken);
        self.set_cutoff(loc.node, slot, loc.pos);
        self.tidy(loc.node);
        if let Some(above) = above {
            self.cover_cut(slot, above);
        }
    }

    /// After a cut just below `above`, queues the expiry of that block if it is a prediction:
    /// the expiry entries under the cut are gone, and they may have been the ones covering the
    /// blocks above (`expiry.rs`).
    fn cover_cut(&mut self, slot: Slot, above: Loc) {
        if self.view.ranks.state(slot).predicted.is_empty() {
            return;
        }
        let block = self.view.block_at(above);
        if let Some(&expiry) = self.view.ranks.state(slot).predicted.get(&block) {
            self.book.expiry.push(expiry, slot, block, &self.view.ranks);
        }
    }

    /// Forgets the rank's names for `positions` of `node`'s edge (those in `taken` are out of
    /// the name table already, so they are only counted) and their predictions, if any.
    fn drop_names(&mut self, slot: Slot, node: NodeId, positions: Range<u32>, taken: Range<u32>) {
        // The positions outside `taken`: before it and after it.
        let within = |p: u32| p.max(positions.start).min(positions.end);
        let (before, after) = (positions.start..within(taken.start), within(taken.end)..positions.end);
        for pos in before.chain(after) {
            let block = self.view.node(node).blocks()[pos as usize];
            let name = self.book.name_of(slot, block);
            self.take_name(slot, name, block);
        }
        if !self.view.ranks.state(slot).predicted.is_empty() {
            for pos in positions.clone() {
                let block = self.view.node(node).blocks()[pos as usize];
                self.unpredict(slot, block);
            }
        }
        if !positions.is_empty() {
            self.book.held_blocks -= u64::from(positions.end - positions.start);
            self.book.mark_dirty(slot);
        }
    }

    /// Removes the rank from `top` and every node below it, children before parents so that each
    /// node is tidied after everything under it.
    fn drop_subtree(&mut self, slot: Slot, top: NodeId) {
        let mut order = Vec::new();
        let mut stack = vec![top];
        while let Some(id) = stack.pop() {
            order.push(id);
            let n = self.view.node(id);
            if n.cutoff(slot) == n.len() {
                stack.extend(self.held_children(slot, id));
            }
        }
        for id in order.into_iter().rev() {
            let cutoff = self.view.node(id).cutoff(slot);
            self.drop_names(slot, id, 0..cutoff, 0..0);
            self.set_cutoff(id, slot, 0);
            self.tidy(id);
        }
    }

    /// Frees the positions of `id` that no rank holds: the whole node when nobody holds it, or the
    /// unheld tail of its edge. Nothing below an unheld position can be held (holders of a child
    /// are full holders of its parent), so no children are lost.
    fn tidy(&mut self, id: NodeId) {
        if id == ROOT {
            return;
        }
        let n = self.view.node(id);
        let keep = n.max_cutoff();
        if keep == n.len() {
            return;
        }
        debug_assert!(n.children.is_empty(), "an unheld edge tail must have no children");
        let (parent, first) = (n.parent, n.locals()[0]);
        self.book.blocks.free.extend_from_slice(&n.blocks()[keep as usize..]);
        if keep > 0 {
            self.book.edges.shortened(id);
            self.record(ViewOp::Truncate { node: id, keep });
            return;
        }
        self.record(ViewOp::RemoveChild { node: parent, local: first, child: id });
        self.record(ViewOp::FreeNode { id });
        self.book.edges.free(id);
        self.book.free_nodes.push(id);
    }
}
