//! The writer's book: everything about the tree that only writers read (names, where each block
//! sits, free lists, counters, prediction expiries). Kept once, however many copies of the view
//! readers use, so the per-block hash-map work of an event is done once.

pub use super::blocks::{BlockArena, Loc};
use super::edge::EdgeStore;
use super::ranks::{RankNames, Slot};
use super::repeats::RepeatFinder;
use super::{BlockId, NodeId};
use crate::index::expiry::ExpiryQueue;
use crate::index::growth::FastMap;
use crate::index::stats::{vec_bytes, EventCounters};

/// A rank's name for a block it holds: its alias when it has one, else the canonical name.
fn name_in(names: &RankNames, blocks: &BlockArena, block: BlockId) -> u64 {
    alias_or_canonical(&names.aliases, blocks, block)
}

#[inline(always)]
fn alias_or_canonical(aliases: &FastMap<BlockId, u64>, blocks: &BlockArena, block: BlockId) -> u64 {
    let canonical = blocks.ext(block);
    if aliases.is_empty() {
        canonical
    } else {
        aliases.get(&block).copied().unwrap_or(canonical)
    }
}

/// Names `block` `ext` for the rank whose `names` these are, unless the rank names a block so
/// already: then returns that block and changes nothing. One call for the check and the insert.
/// `block` must be a block the rank does not name yet, with `ext` as its canonical name (a new
/// one), or see [`claim_existing_in`]. Inlined, with the table's common case (`names.rs`,
/// `Table::claim_at_home`). Takes the rank's names and the block data already looked up
/// ([`Book::names_and_blocks`]), as the other `*_in` functions here do: the writer's loops over
/// an event's blocks look the rank up once.
#[inline(always)]
pub fn claim_in(names: &mut RankNames, blocks: &BlockArena, ext: u64, block: BlockId) -> Option<BlockId> {
    let RankNames { lookup, aliases } = names;
    lookup.claim(ext, block, |id| alias_or_canonical(aliases, blocks, id) == ext)
}

/// The block the rank names `ext`, if it holds one ([`Book::named`]).
#[inline]
pub fn named_in(names: &RankNames, blocks: &BlockArena, ext: u64) -> Option<BlockId> {
    names.lookup.get(ext, |block| name_in(names, blocks, block) == ext)
}

/// Names `block`, a position the rank does not hold yet, `ext` for the rank unless the rank
/// names a block so already: then returns that block and changes nothing. Unlike a new block,
/// an existing one may be named differently by this rank than by its creator; the name is then
/// recorded as the rank's alias, right after the claim (which never looks at `block` itself, so
/// it can run before the alias is there).
#[inline]
pub fn claim_existing_in(names: &mut RankNames, blocks: &BlockArena, ext: u64, block: BlockId) -> Option<BlockId> {
    let existing = claim_in(names, blocks, ext, block);
    if existing.is_none() && ext != blocks.ext(block) {
        names.aliases.insert(block, ext);
    }
    existing
}

/// Takes the rank's name `ext` out of its table and returns the block it named
/// ([`Book::take_named`]). Inlined into the removal's loop: a call per removed block saved and
/// restored six registers.
#[inline(always)]
pub fn take_in(names: &mut RankNames, blocks: &BlockArena, ext: u64) -> Option<BlockId> {
    let RankNames { lookup, aliases } = names;
    let block = lookup.take(ext, |block| alias_or_canonical(aliases, blocks, block) == ext)?;
    if !aliases.is_empty() {
        aliases.remove(&block);
    }
    Some(block)
}

#[derive(Debug, Default)]
pub struct Book {
    pub free_nodes: Vec<NodeId>,
    /// Every node's edge buffer, shared by the copies of the view (see `edge.rs`).
    pub edges: EdgeStore,
    pub blocks: BlockArena,
    /// Per rank slot (the view assigns ranks to slots; the book keeps their names).
    pub names: Vec<Option<RankNames>>,
    pub free_slots: Vec<Slot>,
    /// Sum over ranks of held blocks.
    pub held_blocks: u64,
    pub counters: EventCounters,
    pub expiry: ExpiryQueue,
    /// Slots whose held count changed during the current operation (published at its end).
    pub dirty: Vec<Slot>,
    /// Scratch for finding names repeated inside a Stored event.
    pub repeats: RepeatFinder,
}

impl Book {
    pub fn names(&self, slot: Slot) -> &RankNames {
        self.names[slot as usize].as_ref().expect("live rank slot")
    }

    pub fn names_mut(&mut self, slot: Slot) -> &mut RankNames {
        self.names[slot as usize].as_mut().expect("live rank slot")
    }

    /// A free slot, with empty names.
    pub fn alloc_slot(&mut self) -> Slot {
        let slot = self.free_slots.pop().unwrap_or(self.names.len() as Slot);
        if slot as usize == self.names.len() {
            self.names.push(None);
        }
        self.names[slot as usize] = Some(RankNames::default());
        slot
    }

    pub fn release_slot(&mut self, slot: Slot) {
        if self.names[slot as usize].take().is_some() {
            self.free_slots.push(slot);
        }
    }

    /// The rank's name for a block it holds.
    pub fn name_of(&self, slot: Slot, block: BlockId) -> u64 {
        name_in(self.names(slot), &self.blocks, block)
    }

    /// The block the rank names `ext`, if it holds one. The name table matches fingerprints;
    /// the block's own name confirms the hit (see `names.rs`).
    pub fn named(&self, slot: Slot, ext: u64) -> Option<BlockId> {
        named_in(self.names(slot), &self.blocks, ext)
    }

    /// Takes the rank's name `ext` out of its table and returns the block it named, if any: a
    /// lookup and a removal in one scan of the name's bucket. The block's alias, if it had one,
    /// goes too; [`Self::restore_name`] undoes this.
    pub fn take_named(&mut self, slot: Slot, ext: u64) -> Option<BlockId> {
        let (names, blocks) = self.names_and_blocks(slot);
        take_in(names, blocks, ext)
    }

    /// Gives back a name [`Self::take_named`] took.
    pub fn restore_name(&mut self, slot: Slot, ext: u64, block: BlockId) {
        let canonical = self.blocks.ext(block);
        let names = self.names_mut(slot);
        names.lookup.insert(ext, block);
        if ext != canonical {
            names.aliases.insert(block, ext);
        }
    }

    /// The rank's names and the block data, borrowed apart: a loop over an event's blocks looks
    /// the rank's slot up once instead of at every name (two lookups a block, each checking
    /// the slot is live, were 5% of a new block's instructions at W = 256).
    #[inline(always)]
    pub fn names_and_blocks(&mut self, slot: Slot) -> (&mut RankNames, &mut BlockArena) {
        (self.names[slot as usize].as_mut().expect("live rank slot"), &mut self.blocks)
    }

    /// Where the block the rank names `ext` sits, if the rank holds one.
    pub fn locate(&self, slot: Slot, ext: u64) -> Option<Loc> {
        self.named(slot, ext).map(|block| self.blocks.loc(block))
    }

    pub fn mark_dirty(&mut self, slot: Slot) {
        // Usually the same slot, block after block: check the last one first.
        if self.dirty.last() != Some(&slot) && !self.dirty.contains(&slot) {
            self.dirty.push(slot);
        }
    }

    pub fn heap_bytes(&self) -> usize {
        vec_bytes::<NodeId>(self.free_nodes.capacity())
            + self.edges.heap_bytes()
            + self.blocks.heap_bytes()
            + vec_bytes::<Option<RankNames>>(self.names.capacity())
            + self.names.iter().flatten().map(RankNames::heap_bytes).sum::<usize>()
            + vec_bytes::<Slot>(self.free_slots.capacity() + self.dirty.capacity())
            + self.expiry.heap_bytes()
            + self.repeats.heap_bytes()
    }
}
