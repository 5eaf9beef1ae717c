//! Stored events (and approximate-mode predictions, which are stores with an expiry).
//!
//! A store is checked before it changes the tree, so a rejected event changes nothing. Names are
//! claimed as the walk reaches them (each checked and inserted back to back, while its bucket is
//! in the cache): the names of existing positions the rank did not hold yet while the existing
//! part of the path is walked, the names of new positions after it; on the first name in use,
//! every name claimed so far is given back. Claiming an existing position's name in the walk,
//! rather than checking it there and inserting it once the tree changes, saves a second probe of
//! the rank's table per block; and since a name claimed earlier in the event is then in the
//! table, a name repeated inside the event is caught by its second claim, so the separate search
//! for repeats is only needed for events that rename a held block (the new name is inserted only
//! when the tree changes). The same claims reject an event that names its own parent among its
//! blocks: the rank names the parent so already, so that name's claim, or at a position the rank
//! holds its check, fails. A separate scan of the event's blocks for the parent's name, before
//! the walk, was 7% of the bare tree's samples at W = 256 (it took the event's cache misses;
//! removed, the tree ran 2-6% faster: `bench/vs-dynamo/HISTORY.md`).

use super::blocks::MAX_EDGE_LEN;
use super::book::{claim_existing_in, claim_in, named_in, Loc};
use super::journal::ViewOp;
use super::ranks::Slot;
use super::remove::PREFETCH_AHEAD;
use super::writer::TreeWriter;
use super::{BlockId, NodeId, ROOT};
use crate::index::event::StoredBlock;
use crate::index::stats::Rejection;

/// What [`TreeWriter::claim_existing`] found on the part of the path that already exists.
struct Walk {
    /// The blocks of the event `[first_claimed, new_from)` sit at existing positions the rank did
    /// not hold: their names are now claimed.
    first_claimed: usize,
    /// The blocks from `new_from` on need new positions.
    new_from: usize,
    /// Whether the event names a block the rank holds differently.
    renames: bool,
    /// The node of the first position claimed, if any.
    first_claimed_node: Option<NodeId>,
    /// The last existing position of the event (the parent's when there is none).
    end: Option<Loc>,
    /// The last position of the path the rank held before the event (the parent's when it held
    /// none of the event's positions): where its predictions on the path end, if it has any.
    held_end: Option<Loc>,
}

/// How far along one node's edge the rank holds, while a store walks it.
#[derive(Clone, Copy)]
struct Reach {
    node: NodeId,
    cutoff: u32,
    /// Whether the store extended it (and must write it back).
    grew: bool,
}

impl TreeWriter<'_> {
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
        let walk = self.claim_existing(slot, start, blocks, predicted.is_some())?;
        // A rename's new name is inserted only below, so a repeat of it is not caught by a claim.
        if walk.renames && self.book.repeats.any_repeated(blocks) {
            self.give_back(slot, &blocks[walk.first_claimed..walk.new_from]);
            return Err(Rejection::InvalidBlock);
        }
        let (existing, new) = blocks.split_at(walk.new_from);
        let Some(claimed) = self.claim_names(slot, new) else {
            self.give_back(slot, &blocks[walk.first_claimed..walk.new_from]);
            return Err(Rejection::InvalidBlock);
        };
        // A plain store (a real event that renames nothing) only extends the rank's cutoffs along
        // the part it did not hold, which the walk already found, and confirms the rank's
        // predictions on the path, which end where its holding did; otherwise each existing
        // position is visited again.
        let plain = predicted.is_none() && !walk.renames;
        let (mut changed, at) = if plain {
            self.extend_cutoffs(slot, &walk);
            if let Some(held_end) = walk.held_end {
                self.confirm_from(slot, held_end);
            }
            (walk.first_claimed < walk.new_from, walk.end)
        } else {
            self.hold_each(slot, start, existing, predicted, walk.renames)
        };
        let newly_held = walk.new_from - walk.first_claimed;
        if newly_held > 0 {
            self.book.held_blocks += newly_held as u64;
            self.book.mark_dirty(slot);
        }
        if !new.is_empty() {
            self.insert_new(slot, at, new, &claimed, predicted);
            changed = true;
        }
        match predicted {
            // One expiry entry for the whole prediction, at its deepest block.
            Some(_) => {
                let deepest = claimed.last().copied().or_else(|| at.map(|loc| self.view.block_at(loc)));
                let expiry = deepest.and_then(|b| self.view.ranks.state(slot).predicted.get(&b).map(|&e| (b, e)));
                if let Some((block, expiry)) = expiry {
                    self.book.expiry.push(expiry, slot, block, &self.view.ranks);
                }
            }
            // A renaming store went through `hold_each`, which confirmed its existing positions
            // one by one; what it predicted above them is confirmed from the parent up. A plain
            // store confirmed everything above.
            None if !plain => {
                if let Some(parent_loc) = start {
                    self.confirm_from(slot, parent_loc);
                }
            }
            None => {}
        }
        Ok(changed)
    }

    /// The rank now holds the path to `walk.end`: sets its cutoff on each node from the one
    /// holding the first position it did not hold, going up from the end (the walk only passes
    /// to a child at the end of an edge, so the nodes above the last are held whole).
    fn extend_cutoffs(&mut self, slot: Slot, walk: &Walk) {
        let (Some(first), Some(end)) = (walk.first_claimed_node, walk.end) else {
            return;
        };
        let (mut node, mut cutoff) = (end.node, end.pos + 1);
        loop {
            self.set_cutoff(node, slot, cutoff);
            if node == first {
                return;
            }
            node = self.view.node(node).parent;
            cutoff = self.view.node(node).len();
        }
    }

    /// Holds each existing position of the event for the rank, in order (predictions, renames).
    /// Returns whether anything changed, and the last position.
    fn hold_each(
        &mut self,
        slot: Slot,
        start: Option<Loc>,
        existing: &[StoredBlock],
        predicted: Option<f64>,
        renames: bool,
    ) -> (bool, Option<Loc>) {
        let mut changed = false;
        let mut at = start;
        // The rank's cutoff on the node being walked, written back once per node rather than
        // once per block (an edge shared by hundreds of ranks has a long holder list).
        let mut reach: Option<Reach> = None;
        for block in existing {
            let loc = self.view.advance(at, block.local).expect("claim_existing walked these positions");
            let r = match reach {
                Some(r) if r.node == loc.node => r,
                other => {
                    self.write_reach(slot, other);
                    Reach { node: loc.node, cutoff: self.view.node(loc.node).cutoff(slot), grew: false }
                }
            };
            let held = r.cutoff > loc.pos;
            // Not held: the rank holds the previous position, so its cutoff is exactly `loc.pos`.
            reach = Some(if held { r } else { Reach { cutoff: loc.pos + 1, grew: true, ..r } });
            changed |= self.hold_existing(slot, loc, held, block.ext, predicted, renames);
            at = Some(loc);
        }
        self.write_reach(slot, reach);
        (changed, at)
    }

    fn resolve_parent(&self, slot: Slot, parent: Option<u64>) -> Result<Option<Loc>, Rejection> {
        match parent {
            None => Ok(None),
            Some(ext) => self.book.locate(slot, ext).map(Some).ok_or(Rejection::ParentBlockNotFound),
        }
    }

    /// Walks the positions that already exist, claiming for the rank the names of those it does
    /// not hold yet and checking the names of those it holds: a name the rank uses for another
    /// position rejects the event (after giving back what was claimed). A rank's coverage is
    /// prefix-closed, so the positions it holds come first and its cutoffs are only looked up
    /// until the first one it does not hold.
    fn claim_existing(
        &mut self,
        slot: Slot,
        start: Option<Loc>,
        blocks: &[StoredBlock],
        predicted: bool,
    ) -> Result<Walk, Rejection> {
        // The rank's names are looked up once for the walk; a claim that fails ends it, and the
        // names claimed before it are given back after.
        let (names, arena) = self.book.names_and_blocks(slot);
        for b in blocks.iter().take(PREFETCH_AHEAD) {
            names.lookup.prefetch(b.ext);
        }
        let mut renames = false;
        // The index of the first position the rank does not hold, once the walk reaches it.
        let mut claiming_from: Option<usize> = None;
        let mut first_claimed_node = None;
        let mut cutoff_on: Option<(NodeId, u32)> = None;
        let mut at = start;
        let mut held_end = start;
        let mut new_from = blocks.len();
        let mut rejected_at = None;
        for (i, block) in blocks.iter().enumerate() {
            let Some(loc) = self.view.advance(at, block.local) else {
                new_from = i;
                break;
            };
            if let Some(ahead) = blocks.get(i + PREFETCH_AHEAD) {
                names.lookup.prefetch(ahead.ext);
            }
            let here = self.view.node(loc.node).blocks()[loc.pos as usize];
            let held = claiming_from.is_none() && {
                let cutoff = match cutoff_on {
                    Some((node, cutoff)) if node == loc.node => cutoff,
                    _ => self.view.node(loc.node).cutoff(slot),
                };
                cutoff_on = Some((loc.node, cutoff));
                loc.pos < cutoff
            };
            let in_use = if held {
                let named = named_in(names, arena, block.ext);
                // Held under another name: renamed when the tree changes (a prediction never renames).
                renames |= named.is_none() && !predicted;
                named.is_some_and(|named| named != here)
            } else {
                claiming_from.get_or_insert(i);
                first_claimed_node.get_or_insert(loc.node);
                claim_existing_in(names, arena, block.ext, here).is_some()
            };
            if in_use {
                rejected_at = Some(i);
                break;
            }
            if held {
                held_end = Some(loc);
            }
            at = Some(loc);
        }
        if let Some(i) = rejected_at {
            // Held positions come first and claim nothing, so only a failed claim has any to give back.
            if let Some(first) = claiming_from {
                self.give_back(slot, &blocks[first..i]);
            }
            return Err(Rejection::InvalidBlock);
        }
        Ok(Walk {
            first_claimed: claiming_from.unwrap_or(new_from),
            new_from,
            renames,
            first_claimed_node,
            end: at,
            held_end,
        })
    }

    /// Gives back the names the rank claimed for `blocks` in this event (and their aliases).
    fn give_back(&mut self, slot: Slot, blocks: &[StoredBlock]) {
        for b in blocks {
            self.book.take_named(slot, b.ext);
        }
    }

    /// Gives each new block a block id and the rank's name for it, checking right before, while
    /// the name's bucket is in the cache, that the rank does not use that name yet. On the first
    /// name in use, gives back every name and id claimed so far and returns `None`: the event is
    /// rejected before anything else changed. The ids' locations are set by [`Self::insert_new`].
    fn claim_names(&mut self, slot: Slot, blocks: &[StoredBlock]) -> Option<Vec<BlockId>> {
        let mut claimed = Vec::with_capacity(blocks.len());
        let (names, arena) = self.book.names_and_blocks(slot);
        for b in blocks.iter().take(PREFETCH_AHEAD) {
            names.lookup.prefetch(b.ext);
        }
        for (i, b) in blocks.iter().enumerate() {
            if let Some(ahead) = blocks.get(i + PREFETCH_AHEAD) {
                names.lookup.prefetch(ahead.ext);
            }
            let id = arena.alloc(Loc::default(), b.ext);
            if claim_in(names, arena, b.ext, id).is_some() {
                arena.release(id);
                for (&id, b) in claimed.iter().zip(blocks).rev() {
                    names.lookup.remove(b.ext, id);
                    arena.release(id);
                }
                return None;
            }
            claimed.push(id);
        }
        Some(claimed)
    }

    fn write_reach(&mut self, slot: Slot, reach: Option<Reach>) {
        if let Some(Reach { node, cutoff, grew: true }) = reach {
            self.set_cutoff(node, slot, cutoff);
        }
    }

    /// Holds an existing position for the rank: the caller extends its cutoff when it was not
    /// `held`, and [`Self::claim_existing`] named it for the rank then. A held position is
    /// renamed when the event names it differently (only real events rename: `renames` says
    /// whether this one does anywhere). Returns whether anything changed.
    fn hold_existing(
        &mut self,
        slot: Slot,
        loc: Loc,
        held: bool,
        ext: u64,
        predicted: Option<f64>,
        renames: bool,
    ) -> bool {
        let block = self.view.node(loc.node).blocks()[loc.pos as usize];
        match predicted {
            // A prediction never renames a block the engine named, and only refreshes the TTL
            // of blocks that are still predictions.
            Some(expiry) => {
                if !held {
                    self.predict(slot, block, expiry);
                } else if let Some(&current) = self.view.ranks.state(slot).predicted.get(&block) {
                    // Never shortened, so expiry never increases along a path (even if the
                    // caller's clock goes back).
                    self.predict(slot, block, current.max(expiry));
                }
                !held
            }
            None => {
                if !self.view.ranks.state(slot).predicted.is_empty() {
                    self.unpredict(slot, block);
                }
                !held || (renames && self.rename(slot, block, ext))
            }
        }
    }

    /// Creates positions for `blocks` after `at`: extending a leaf in place when the rank holds its
    /// end and it has no children (decode appends one block at a time), otherwise as a new child,
    /// splitting the edge first when `at` is inside it. An edge holds at most [`MAX_EDGE_LEN`]
    /// positions (so that locations pack: `blocks.rs`); a longer run goes on in a chain of
    /// children, each held whole by the rank.
    fn insert_new(
        &mut self,
        slot: Slot,
        at: Option<Loc>,
        blocks: &[StoredBlock],
        ids: &[BlockId],
        predicted: Option<f64>,
    ) {
        let (node, extend_leaf) = match at {
            None => (ROOT, false),
            Some(loc) => {
                if loc.pos + 1 < self.view.node(loc.node).len() {
                    self.split(loc.node, loc.pos + 1);
                }
                (loc.node, self.view.node(loc.node).children.is_empty())
            }
        };
        let mut target = if extend_leaf && self.view.node(node).len() < MAX_EDGE_LEN {
            node
        } else {
            self.add_child(node, blocks[0].local)
        };
        let mut done = 0;
        loop {
            let offset = self.view.node(target).len();
            let take = (ids.len() - done).min((MAX_EDGE_LEN - offset) as usize);
            let (run, run_ids) = (&blocks[done..done + take], &ids[done..done + take]);
            for (j, &id) in run_ids.iter().enumerate() {
                self.book.blocks.relocate(id, Loc { node: target, pos: offset + j as u32 });
            }
            self.extend(target, run, run_ids);
            self.set_cutoff(target, slot, offset + take as u32);
            done += take;
            if done == ids.len() {
                break;
            }
            target = self.add_child(target, blocks[done].local);
        }
        // `claim_names` named them (by their canonical names: this rank creates them).
        self.book.held_blocks += ids.len() as u64;
        self.book.mark_dirty(slot);
        if let Some(expiry) = predicted {
            for &id in ids {
                self.predict(slot, id, expiry);
            }
        }
    }

    /// A new empty child of `node`, keyed by `local`, the first local hash its edge will get.
    fn add_child(&mut self, node: NodeId, local: u64) -> NodeId {
        let child = self.alloc_node(node);
        self.record(ViewOp::AddChild { node, local, child });
        child
    }

    /// Splits `node`'s edge before position `k`; the tail becomes its only child.
    fn split(&mut self, node: NodeId, k: u32) {
        let tail = self.next_node_id();
        let (head, edge) = self.book.edges.split(node, tail, self.view.node(node).edge, k);
        self.record(ViewOp::Split { node, k, tail, edge });
        self.record(ViewOp::SetEdge { node, edge: head });
        for (pos, &id) in self.view.node(tail).blocks().iter().enumerate() {
            self.book.blocks.relocate(id, Loc { node: tail, pos: pos as u32 });
        }
    }

    /// Sets a block's prediction expiry; [`Self::store`] queues one expiry entry for all of them.
    fn predict(&mut self, slot: Slot, block: BlockId, expiry: f64) {
        self.record(ViewOp::Predict { slot, block, expiry });
    }

    /// A real event proves the rank holds `loc` and everything before it: those blocks are no
    /// longer predictions. Predictions only ever sit below confirmed blocks, so the walk stops at
    /// the first confirmed one.
    fn confirm_from(&mut self, slot: Slot, loc: Loc) {
        if self.view.ranks.state(slot).predicted.is_empty() {
            return;
        }
        let (mut node, mut pos) = (loc.node, Some(loc.pos));
        while node != ROOT {
            let n = self.view.node(node);
            let (end, parent) = (pos.map_or(n.len(), |p| p + 1), n.parent);
            for p in (0..end).rev() {
                let block = self.view.node(node).blocks()[p as usize];
                if !self.view.ranks.state(slot).predicted.contains_key(&block) {
                    return;
                }
                self.record(ViewOp::Unpredict { slot, block });
            }
            node = parent;
            pos = None;
        }
    }
}
