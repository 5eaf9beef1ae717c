//! [`TreeWriter`]: applies events to the book and to one copy of the view, recording every view
//! change in a [`Journal`] for the other copy. The algorithms live in `store` and `remove`; this
//! file holds the entry points and the small operations they share.

use super::book::{Book, Loc};
use super::journal::{Journal, ViewOp};
use super::ranks::Slot;
use super::view::View;
use super::{BlockId, NodeId};
use crate::hashing::sequence_hashes;
use crate::index::event::{EventData, Rank, RouterEvent, StoredBlock};
use crate::index::stats::Rejection;

pub struct TreeWriter<'a> {
    pub(super) book: &'a mut Book,
    pub(super) view: &'a mut View,
    journal: &'a mut Journal,
}

impl<'a> TreeWriter<'a> {
    /// Starts a write. Writes to a tree must be serialised, and each must be replayed on every
    /// other copy of the view before the next starts: this frees the edge buffers the previous
    /// write retired (see `edge.rs`).
    pub fn new(book: &'a mut Book, view: &'a mut View, journal: &'a mut Journal) -> Self {
        book.edges.begin_write();
        Self { book, view, journal }
    }

    /// Applies one event. Rejections are counted, never returned: a router must keep going.
    pub fn apply_event(&mut self, event: &RouterEvent, now_ms: f64) {
        self.expire(now_ms);
        if event.lower_tier.is_some() {
            self.book.counters.reject(Rejection::IgnoredTier);
            return;
        }
        match &event.data {
            EventData::Stored { parent, blocks } => {
                let slot = self.slot_for(event.rank);
                match self.store(slot, *parent, blocks, None) {
                    Ok(changed) => self.count_store(changed, blocks.len()),
                    Err(why) => self.book.counters.reject(why),
                }
            }
            EventData::Removed { hashes } => self.remove_hashes(event.rank, hashes),
            EventData::Cleared => {
                let slot = self.slot_for(event.rank);
                self.clear_slot(slot);
                self.book.counters.cleared += 1;
            }
        }
        self.publish_held();
    }

    fn count_store(&mut self, changed: bool, blocks: usize) {
        self.book.counters.stored += 1;
        // An empty store changes nothing but is no replay.
        if !changed && blocks > 0 {
            self.book.counters.duplicate_stores += 1;
        }
    }

    /// A device-tier Removed event: each hash on its own, unknown ones counted.
    fn remove_hashes(&mut self, rank: Rank, hashes: &[u64]) {
        let slot = self.slot_for(rank);
        let unknown = self.remove_names(slot, hashes);
        for _ in 0..unknown {
            self.book.counters.reject(Rejection::BlockNotFound);
        }
        self.book.counters.removed += 1;
    }

    /// Drops one rank (`Some`) or every rank of a worker (`None`), forgetting them entirely.
    pub fn remove_worker(&mut self, worker_id: u64, dp_rank: Option<u32>) {
        let slots: Vec<Slot> = self
            .view
            .ranks
            .live()
            .filter(|(_, s)| s.rank.worker_id == worker_id && dp_rank.is_none_or(|r| r == s.rank.dp_rank))
            .map(|(slot, _)| slot)
            .collect();
        for slot in slots {
            self.clear_slot(slot);
            self.book.dirty.retain(|&s| s != slot);
            self.book.release_slot(slot);
            self.record(ViewOp::ReleaseRank { slot });
        }
        self.publish_held();
    }

    /// Approximate mode: records that a request with these blocks was routed to `rank`, so its
    /// blocks count as held until `expires_at_ms` (refreshed by every later prediction).
    pub fn record_prediction(
        &mut self,
        rank: Rank,
        locals: &[u64],
        seq_hashes: &[u64],
        now_ms: f64,
        expires_at_ms: f64,
    ) {
        self.expire(now_ms);
        let slot = self.slot_for(rank);
        let blocks: Vec<_> = locals.iter().zip(seq_hashes).map(|(&local, &ext)| StoredBlock { ext, local }).collect();
        if let Err(why) = self.store(slot, None, &blocks, Some(expires_at_ms)) {
            self.book.counters.reject(why);
        }
        self.publish_held();
    }

    /// Removes predicted blocks whose TTL has passed.
    pub fn expire(&mut self, now_ms: f64) {
        while let Some((slot, deepest)) = self.book.expiry.pop_due(now_ms, &self.view.ranks) {
            let before = self.book.held_blocks;
            // The expired blocks of the path are a suffix: cut at its top.
            let top = self.topmost_expired(slot, self.book.blocks.loc(deepest), now_ms);
            self.cut_at(slot, top, 0..0);
            // Descendants go with their prefix, so count blocks, not removals.
            self.book.counters.expired_blocks += before - self.book.held_blocks;
        }
        self.publish_held();
    }

    /// The earliest time a prediction of this tree may expire (infinity when none is queued).
    pub fn next_expiry(&self) -> f64 {
        self.book.expiry.next_due().unwrap_or(f64::INFINITY)
    }

    /// The shallowest position at or above `loc` from which the rank's predictions on the path
    /// have all expired at `now_ms` (`loc` itself has).
    fn topmost_expired(&self, slot: Slot, mut loc: Loc, now_ms: f64) -> Loc {
        let predicted = &self.view.ranks.state(slot).predicted;
        while let Some(above) = self.view.above(loc) {
            match predicted.get(&self.view.block_at(above)) {
                Some(&at) if at <= now_ms => loc = above,
                _ => break,
            }
        }
        loc
    }

    /// Tells the view the new held counts of the ranks this operation changed.
    fn publish_held(&mut self) {
        while let Some(slot) = self.book.dirty.pop() {
            let held = self.book.names(slot).lookup.len() as u32;
            self.record(ViewOp::SetHeld { slot, held });
        }
    }

    // ---- shared helpers -------------------------------------------------------------------

    pub(super) fn record(&mut self, op: ViewOp) {
        self.journal.record(self.view, op);
    }

    /// The rank's slot, creating it on first sight.
    /// The sequence hash of the position `rank` names `ext` (`None` if it names none): how a
    /// lower tier places a store whose parent the rank holds only on the device. Walks the
    /// position up to the root, one block at a time; offload stores rarely need it.
    pub fn sequence_of(&self, rank: Rank, ext: u64) -> Option<u64> {
        let slot = self.view.ranks.slot_of(rank)?;
        let mut at = Some(self.book.blocks.loc(self.book.named(slot, ext)?));
        let mut path = Vec::new();
        while let Some(loc) = at {
            path.push(self.view.node(loc.node).locals()[loc.pos as usize]);
            at = self.view.above(loc);
        }
        path.reverse();
        sequence_hashes(&path).last().copied()
    }

    fn slot_for(&mut self, rank: Rank) -> Slot {
        if let Some(slot) = self.view.ranks.slot_of(rank) {
            return slot;
        }
        let slot = self.book.alloc_slot();
        self.record(ViewOp::AddRank { slot, rank });
        slot
    }

    /// A new empty node under `parent`.
    pub(super) fn alloc_node(&mut self, parent: NodeId) -> NodeId {
        let id = self.next_node_id();
        self.record(ViewOp::NewNode { id, parent });
        id
    }

    /// The id the next new node gets (taken from the free list).
    pub(super) fn next_node_id(&mut self) -> NodeId {
        self.book.free_nodes.pop().unwrap_or(self.view.nodes.len() as NodeId)
    }

    /// Appends positions to `node`'s edge.
    pub(super) fn extend(&mut self, node: NodeId, blocks: &[StoredBlock], ids: &[BlockId]) {
        let edge = self.book.edges.append(node, self.view.node(node).edge, blocks, ids);
        self.record(ViewOp::SetEdge { node, edge });
    }

    pub(super) fn set_cutoff(&mut self, node: NodeId, slot: Slot, cutoff: u32) {
        self.record(ViewOp::SetCutoff { node, slot, cutoff });
    }

    pub(super) fn unpredict(&mut self, slot: Slot, block: BlockId) {
        if self.view.ranks.state(slot).predicted.contains_key(&block) {
            self.record(ViewOp::Unpredict { slot, block });
        }
    }

    /// Names `block`, which the rank holds, `ext` instead of its previous name. Returns whether
    /// the name changed.
    pub(super) fn rename(&mut self, slot: Slot, block: BlockId, ext: u64) -> bool {
        let canonical = self.book.blocks.ext(block);
        let old = self.book.name_of(slot, block);
        if old == ext {
            return false;
        }
        let names = self.book.names_mut(slot);
        names.lookup.remove(old, block);
        names.lookup.insert(ext, block);
        if ext == canonical {
            if !names.aliases.is_empty() {
                names.aliases.remove(&block);
            }
        } else {
            names.aliases.insert(block, ext);
        }
        true
    }

    /// Takes the rank's name `ext` for `block` out of the name table (and its alias, if any).
    pub(super) fn take_name(&mut self, slot: Slot, ext: u64, block: BlockId) {
        let names = self.book.names_mut(slot);
        names.lookup.remove(ext, block);
        // Aliases are rare: skip their map when empty (the common case).
        if !names.aliases.is_empty() {
            names.aliases.remove(&block);
        }
    }
}
