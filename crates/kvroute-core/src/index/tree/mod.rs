//! The compressed radix tree: which rank holds which KV blocks, keyed by local hashes.
//!
//! See the [`crate::index`] module docs for the design. The tree is two parts:
//! * the `View` (`view.rs`, `node.rs`): edges, holders, children, ranks and predictions, all
//!   that queries read (`matches.rs`); [`crate::index::KvIndex`] keeps it twice, left-right,
//!   with the edges' positions in buffers both copies share (`edge.rs`);
//! * the `Book` (`book.rs`): names, block locations (`blocks.rs`, 12 bytes a position), the
//!   edge buffers, free lists, counters, expiries, which only writers read; kept once.
//!
//! `TreeWriter` (`writer.rs`, with the algorithms in `store.rs` and `remove.rs`) applies an
//! event to the book and one view, journaling the view's changes (`journal.rs`) so that the
//! other copy replays them cheaply. [`Tree`] is the single-threaded whole.

// The parts a writer works with are private to the crate: the copies of the view share edge
// buffers (`edge.rs`), which is sound only under the write discipline `Tree` and `Shard` keep.
mod blocks;
pub(crate) mod book;
mod children;
mod dump;
pub(crate) mod edge;
mod holders;
pub(crate) mod journal;
mod matches;
mod node;
pub mod ranks;
mod remove;
mod repeats;
mod store;
pub(crate) mod view;
pub(crate) mod writer;

use crate::index::event::{Rank, RouterEvent};
use crate::index::stats::IndexStats;

pub(crate) use book::Book;
pub use dump::DumpedStore;
pub(crate) use dump::Dumper;
pub(crate) use journal::Journal;
pub use matches::MatchScore;
pub(crate) use view::View;
pub(crate) use writer::TreeWriter;

/// Index of a node in the node arena. The root is node 0 and owns no blocks.
pub type NodeId = u32;
/// Stable id of one tree position. It survives edge splits, so per-rank lookups never need to
/// be re-pointed when the tree reshapes.
pub type BlockId = u32;

pub const ROOT: NodeId = 0;

/// Stats of a tree from its book and one view; `view_copies` is how many copies of the view
/// exist (their memory counts that many times).
pub(crate) fn tree_stats(book: &Book, view: &View, view_copies: usize) -> IndexStats {
    let mut workers: Vec<u64> = view.ranks.live().map(|(_, s)| s.rank.worker_id).collect();
    workers.sort_unstable();
    workers.dedup();
    IndexStats {
        workers: workers.len() as u64,
        ranks: view.ranks.by_rank.len() as u64,
        blocks: book.held_blocks,
        tree_nodes: (view.nodes.len() - book.free_nodes.len() - 1) as u64,
        tree_blocks: book.blocks.live_count() as u64,
        memory_bytes: (view.heap_bytes() * view_copies + book.heap_bytes()) as u64,
        events: book.counters,
        lower_tiers: Default::default(),
    }
}

/// The single-threaded tree: one book, one view. [`crate::index::KvIndex`] wraps the same parts
/// for concurrent use.
#[derive(Debug, Default)]
pub struct Tree {
    book: Book,
    view: View,
    journal: Journal,
}

impl Tree {
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs one write; a single view needs no replay, so the journal is dropped at once.
    fn write(&mut self, op: impl FnOnce(&mut TreeWriter<'_>)) {
        op(&mut TreeWriter::new(&mut self.book, &mut self.view, &mut self.journal));
        self.journal.clear();
    }

    /// Applies one event. Rejections are counted, never returned: a router must keep going.
    pub fn apply_event(&mut self, event: &RouterEvent, now_ms: f64) {
        self.write(|w| w.apply_event(event, now_ms));
    }

    /// Drops one rank (`Some`) or every rank of a worker (`None`), forgetting them entirely.
    pub fn remove_worker(&mut self, worker_id: u64, dp_rank: Option<u32>) {
        self.write(|w| w.remove_worker(worker_id, dp_rank));
    }

    /// Approximate mode: see `TreeWriter::record_prediction` (`writer.rs`).
    pub fn record_prediction(
        &mut self,
        rank: Rank,
        locals: &[u64],
        seq_hashes: &[u64],
        now_ms: f64,
        expires_at_ms: f64,
    ) {
        self.write(|w| w.record_prediction(rank, locals, seq_hashes, now_ms, expires_at_ms));
    }

    /// Removes predicted blocks whose TTL has passed.
    pub fn expire(&mut self, now_ms: f64) {
        self.write(|w| w.expire(now_ms));
    }

    pub fn find_matches(&self, query: &[u64], now_ms: f64) -> Vec<MatchScore> {
        self.view.find_matches(query, now_ms)
    }

    /// Blocks held by a rank (0 when unknown).
    pub fn tree_size(&self, rank: Rank) -> usize {
        self.view.tree_size(rank)
    }

    pub fn dump(&self) -> Vec<DumpedStore> {
        Dumper { book: &self.book, view: &self.view }.dump()
    }

    pub fn stats(&self) -> IndexStats {
        let mut stats = tree_stats(&self.book, &self.view, 1);
        stats.memory_bytes += self.journal.heap_bytes() as u64;
        stats
    }

    /// Heap bytes the tree holds: every container's real allocation, so it matches what the
    /// allocator sees (checked against a counting allocator in `bench/vs-dynamo`). O(nodes).
    pub fn heap_bytes(&self) -> usize {
        self.view.heap_bytes() + self.book.heap_bytes() + self.journal.heap_bytes()
    }
}
