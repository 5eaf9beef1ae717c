//! The compressed radix tree: which rank holds which KV blocks, keyed by local hashes.
//!
//! See the [`crate::index`] module docs for the design. This module holds the data layout and the
//! small operations every algorithm shares; `store`, `remove`, `matches` and `dump` hold the
//! algorithms.

mod children;
mod dump;
mod matches;
pub mod ranks;
mod remove;
mod store;

use crate::index::event::{EventData, Rank, RouterEvent};
use crate::index::growth::ChunkedVec;
use crate::index::stats::{vec_bytes, EventCounters, IndexStats, Rejection};
use children::Children;
use ranks::{RankTable, Slot};

pub use dump::DumpedStore;
pub use matches::MatchScore;

/// Index of a node in the node arena. The root is node 0 and owns no blocks.
pub type NodeId = u32;
/// Stable id of one tree position. It survives edge splits, so per-rank lookups never need to
/// be re-pointed when the tree reshapes.
pub type BlockId = u32;

pub const ROOT: NodeId = 0;

#[derive(Debug, Default)]
pub struct Node {
    parent: NodeId,
    /// The edge: local hashes, compared on every match, kept inline for cache locality.
    locals: Vec<u64>,
    /// The edge's positions as stable block ids (same length as `locals`).
    blocks: Vec<BlockId>,
    children: Children,
    /// (rank slot, cutoff), sorted by slot: the rank holds `edge[0..cutoff]`. Invariants: every
    /// holder has `cutoff >= 1`; the holders of a child are a subset of the holders of its parent
    /// with `cutoff == parent.len()`; the largest cutoff equals the edge length, so every
    /// position is held by someone.
    holders: Vec<(Slot, u32)>,
}

impl Node {
    fn len(&self) -> u32 {
        self.locals.len() as u32
    }

    fn cutoff(&self, slot: Slot) -> u32 {
        match self.holders.binary_search_by_key(&slot, |(s, _)| *s) {
            Ok(i) => self.holders[i].1,
            Err(_) => 0,
        }
    }

    /// Sets a holder's cutoff (0 removes it).
    fn set_cutoff(&mut self, slot: Slot, cutoff: u32) {
        match self.holders.binary_search_by_key(&slot, |(s, _)| *s) {
            Ok(i) if cutoff == 0 => {
                self.holders.remove(i);
            }
            Ok(i) => self.holders[i].1 = cutoff,
            Err(i) if cutoff > 0 => self.holders.insert(i, (slot, cutoff)),
            Err(_) => {}
        }
    }

    fn max_cutoff(&self) -> u32 {
        self.holders.iter().map(|(_, c)| *c).max().unwrap_or(0)
    }
}

/// Where one block sits: its node and its offset in that node's edge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Loc {
    node: NodeId,
    pos: u32,
}

/// Per-position data, indexed by [`BlockId`].
#[derive(Debug, Default)]
struct BlockArena {
    loc: ChunkedVec<Loc>,
    /// The canonical name: the external hash of the rank that created the position.
    ext: ChunkedVec<u64>,
    free: Vec<BlockId>,
}

impl BlockArena {
    fn alloc(&mut self, loc: Loc, ext: u64) -> BlockId {
        if let Some(id) = self.free.pop() {
            self.loc[id as usize] = loc;
            self.ext[id as usize] = ext;
            id
        } else {
            self.ext.push(ext);
            self.loc.push(loc) as BlockId
        }
    }

    fn live_count(&self) -> usize {
        self.loc.len() - self.free.len()
    }
}

/// The single-threaded tree. [`crate::index::KvIndex`] wraps it for concurrent use.
#[derive(Debug)]
pub struct Tree {
    nodes: ChunkedVec<Node>,
    free_nodes: Vec<NodeId>,
    blocks: BlockArena,
    ranks: RankTable,
    /// Sum over ranks of held blocks.
    held_blocks: u64,
    counters: EventCounters,
    expiry: crate::index::expiry::ExpiryQueue,
}

impl Default for Tree {
    fn default() -> Self {
        Self::new()
    }
}

impl Tree {
    pub fn new() -> Self {
        let mut nodes = ChunkedVec::default();
        nodes.push(Node::default()); // the root
        Self {
            nodes,
            free_nodes: Vec::new(),
            blocks: BlockArena::default(),
            ranks: RankTable::default(),
            held_blocks: 0,
            counters: EventCounters::default(),
            expiry: Default::default(),
        }
    }

    /// Applies one event. Rejections are counted, never returned: a router must keep going.
    pub fn apply_event(&mut self, event: &RouterEvent, now_ms: f64) {
        self.expire(now_ms);
        if !event.device_tier {
            self.counters.reject(Rejection::IgnoredTier);
            return;
        }
        match &event.data {
            EventData::Stored { parent, blocks } => {
                let slot = self.ranks.get_or_insert(event.rank);
                match self.store(slot, *parent, blocks, None) {
                    Ok(changed) => self.count_store(changed, blocks.len()),
                    Err(why) => self.counters.reject(why),
                }
            }
            EventData::Removed { hashes } => self.remove_hashes(event.rank, hashes),
            EventData::Cleared => {
                let slot = self.ranks.get_or_insert(event.rank);
                self.clear_slot(slot);
                self.counters.cleared += 1;
            }
        }
    }

    fn count_store(&mut self, changed: bool, blocks: usize) {
        self.counters.stored += 1;
        // An empty store changes nothing but is no replay.
        if !changed && blocks > 0 {
            self.counters.duplicate_stores += 1;
        }
    }

    /// A device-tier Removed event: each hash on its own, unknown ones counted.
    fn remove_hashes(&mut self, rank: Rank, hashes: &[u64]) {
        let slot = self.ranks.get_or_insert(rank);
        for &ext in hashes {
            if !self.remove_named(slot, ext) {
                self.counters.reject(Rejection::BlockNotFound);
            }
        }
        self.counters.removed += 1;
    }

    /// Drops one rank (`Some`) or every rank of a worker (`None`), forgetting them entirely.
    pub fn remove_worker(&mut self, worker_id: u64, dp_rank: Option<u32>) {
        let slots: Vec<Slot> = self
            .ranks
            .live()
            .filter(|(_, s)| s.rank.worker_id == worker_id && dp_rank.is_none_or(|r| r == s.rank.dp_rank))
            .map(|(slot, _)| slot)
            .collect();
        for slot in slots {
            self.clear_slot(slot);
            self.ranks.release(slot);
        }
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
        let slot = self.ranks.get_or_insert(rank);
        let blocks: Vec<_> = locals
            .iter()
            .zip(seq_hashes)
            .map(|(&local, &ext)| crate::index::event::StoredBlock { ext, local })
            .collect();
        if let Err(why) = self.store(slot, None, &blocks, Some(expires_at_ms)) {
            self.counters.reject(why);
        }
    }

    /// Removes predicted blocks whose TTL has passed.
    pub fn expire(&mut self, now_ms: f64) {
        while let Some((slot, block)) = self.expiry.pop_due(now_ms, &self.ranks) {
            let before = self.held_blocks;
            let name = self.name_of(slot, block);
            self.remove_named(slot, name);
            // Descendants go with their prefix, so count blocks, not removals.
            self.counters.expired_blocks += before - self.held_blocks;
        }
    }

    pub fn stats(&self) -> IndexStats {
        let mut workers: Vec<u64> = self.ranks.live().map(|(_, s)| s.rank.worker_id).collect();
        workers.sort_unstable();
        workers.dedup();
        IndexStats {
            workers: workers.len() as u64,
            ranks: self.ranks.by_rank.len() as u64,
            blocks: self.held_blocks,
            tree_nodes: (self.nodes.len() - self.free_nodes.len() - 1) as u64,
            tree_blocks: self.blocks.live_count() as u64,
            memory_bytes: self.heap_bytes() as u64,
            events: self.counters,
        }
    }

    /// Heap bytes the tree holds: every container's real allocation, so it matches what the
    /// allocator sees (checked against a counting allocator in `bench/vs-dynamo`). O(nodes).
    pub fn heap_bytes(&self) -> usize {
        let node_bytes: usize = self.nodes.heap_bytes()
            + vec_bytes::<NodeId>(self.free_nodes.capacity())
            + self
                .nodes
                .iter()
                .map(|n| {
                    vec_bytes::<u64>(n.locals.capacity())
                        + vec_bytes::<BlockId>(n.blocks.capacity())
                        + vec_bytes::<(Slot, u32)>(n.holders.capacity())
                        + n.children.heap_bytes()
                })
                .sum::<usize>();
        let block_bytes = self.blocks.loc.heap_bytes()
            + self.blocks.ext.heap_bytes()
            + vec_bytes::<BlockId>(self.blocks.free.capacity());
        node_bytes + block_bytes + self.ranks.heap_bytes() + self.expiry.heap_bytes()
    }

    /// Blocks held by a rank (0 when unknown).
    pub fn tree_size(&self, rank: Rank) -> usize {
        self.ranks.slot_of(rank).map_or(0, |slot| self.ranks.state(slot).lookup.len())
    }

    // ---- shared helpers -------------------------------------------------------------------

    fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    fn node_mut(&mut self, id: NodeId) -> &mut Node {
        &mut self.nodes[id as usize]
    }

    fn alloc_node(&mut self, node: Node) -> NodeId {
        if let Some(id) = self.free_nodes.pop() {
            self.nodes[id as usize] = node;
            id
        } else {
            self.nodes.push(node) as NodeId
        }
    }

    /// The rank's name for a block it holds.
    fn name_of(&self, slot: Slot, block: BlockId) -> u64 {
        let aliases = &self.ranks.state(slot).aliases;
        let canonical = self.blocks.ext[block as usize];
        if aliases.is_empty() {
            canonical
        } else {
            aliases.get(&block).copied().unwrap_or(canonical)
        }
    }

    /// Records that the rank holds `block` under `ext`, dropping a previous name of that block.
    /// Returns whether anything changed.
    fn set_name(&mut self, slot: Slot, block: BlockId, ext: u64, held_before: bool) -> bool {
        let canonical = self.blocks.ext[block as usize];
        let old = held_before.then(|| self.name_of(slot, block));
        if old == Some(ext) {
            return false;
        }
        let state = self.ranks.state_mut(slot);
        if let Some(old) = old {
            state.lookup.remove(&old);
        } else {
            self.held_blocks += 1;
        }
        state.lookup.insert(ext, block);
        if ext == canonical {
            if !state.aliases.is_empty() {
                state.aliases.remove(&block);
            }
        } else {
            state.aliases.insert(block, ext);
        }
        true
    }

    /// Forgets the rank's name for a block it stops holding.
    fn drop_name(&mut self, slot: Slot, block: BlockId) {
        let canonical = self.blocks.ext[block as usize];
        let state = self.ranks.state_mut(slot);
        // Aliases and predictions are rare: skip their maps when empty (the common case).
        let name = if state.aliases.is_empty() { canonical } else { state.aliases.remove(&block).unwrap_or(canonical) };
        state.lookup.remove(&name);
        if !state.predicted.is_empty() {
            state.predicted.remove(&block);
        }
        self.held_blocks -= 1;
    }

    /// The position after `at` along `local`: within the same edge, or the first position of a
    /// child. `None` at the root means "before the first block".
    fn advance(&self, at: Option<Loc>, local: u64) -> Option<Loc> {
        match at {
            None => self.node(ROOT).children.get(local).map(|node| Loc { node, pos: 0 }),
            Some(Loc { node, pos }) => {
                let n = self.node(node);
                if pos + 1 < n.len() {
                    (n.locals[(pos + 1) as usize] == local).then_some(Loc { node, pos: pos + 1 })
                } else {
                    n.children.get(local).map(|child| Loc { node: child, pos: 0 })
                }
            }
        }
    }
}
