//! One writer's shard of a [`crate::index::KvIndex`]: its ranks' tree, as a book kept once and a
//! view kept twice (left-right).
//!
//! A write locks the book, applies the op to the spare view while journaling the view's changes,
//! publishes that view, unlocks the book, and once readers have left the old view replays the
//! journal there. Queries read the published view and never wait. Calls that need the book
//! (`dump`, `stats`) lock it first and read the view second, so they see the two in step; they
//! may wait for the one write in progress.

use super::event::Rank;
use super::lock::LeftRight;
use super::stats::IndexStats;
use super::tree::{tree_stats, Book, DumpedStore, Dumper, Journal, MatchScore, TreeWriter, View};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

pub struct Shard {
    book: Mutex<Book>,
    view: LeftRight<View>,
    /// A write panicked: the copies and the book may disagree, so nothing is written any more
    /// (the index reports the failure). Reads go on from the copy readers were on, whose edge
    /// buffers stay alive: only a write frees buffers (see `tree/edge.rs`).
    poisoned: AtomicBool,
}

impl Default for Shard {
    fn default() -> Self {
        Self {
            book: Mutex::new(Book::default()),
            view: LeftRight::new(View::new(), View::new()),
            poisoned: AtomicBool::new(false),
        }
    }
}

/// Poisons its shard when dropped during a panic (a write that did not finish).
struct PoisonOnUnwind<'a>(&'a AtomicBool);

impl Drop for PoisonOnUnwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

impl Shard {
    /// Applies `op` to the book and both views, calling `visible` once readers see the change.
    /// `journal` is the writer's scratch, emptied after each write; it keeps its buffers for the
    /// next write unless they grew past a few hundred KiB (see `journal.rs`).
    /// A poisoned shard (a write panicked) ignores writes.
    pub fn write(&self, journal: &mut Journal, op: impl FnOnce(&mut TreeWriter<'_>), visible: impl FnOnce()) {
        let mut book = self.book.lock();
        if self.poisoned.load(Ordering::Relaxed) {
            return;
        }
        let _poison = PoisonOnUnwind(&self.poisoned);
        self.view.write_split(
            |view| {
                op(&mut TreeWriter::new(&mut book, view, journal));
                (book, journal)
            },
            |(book, journal)| {
                drop(book);
                visible();
                journal
            },
            |view, journal| {
                journal.replay(view);
                journal.clear();
            },
        );
    }

    pub fn find_matches(&self, query: &[u64], now_ms: f64) -> Vec<MatchScore> {
        self.view.read().find_matches(query, now_ms)
    }

    /// This shard's sorted scores, appended to `out`.
    pub fn find_matches_into(&self, query: &[u64], now_ms: f64, out: &mut Vec<MatchScore>) {
        self.view.read().find_matches_into(query, now_ms, out);
    }

    pub fn tree_size(&self, rank: Rank) -> usize {
        self.view.read().tree_size(rank)
    }

    pub fn dump(&self) -> Vec<DumpedStore> {
        let book = self.book.lock();
        let view = self.view.read();
        Dumper { book: &book, view: &view }.dump()
    }

    /// Stats with both views' memory (the writer's journal is not included: see `KvIndex`).
    pub fn stats(&self) -> IndexStats {
        let book = self.book.lock();
        tree_stats(&book, &self.view.read(), 2)
    }

    /// Forgets everything (at close), freeing the memory at once, and returns the heap bytes the
    /// book held (most of the tree's, and cheap to count: no walk over the nodes). The views go
    /// first: the book owns the edge buffers they point at.
    pub fn reset(&self) -> usize {
        let mut book = self.book.lock();
        let held = book.heap_bytes();
        self.view.write(|v| *v = View::new());
        *book = Book::default();
        self.poisoned.store(false, Ordering::Relaxed);
        held
    }
}
