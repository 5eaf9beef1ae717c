//! The KV index: which (worker, dp rank) holds which KV blocks.
//!
//! # Semantics
//! Each rank holds a set of blocks. A block sits at a path of local hashes from the root and is
//! named by that rank's external hash (names are per rank: ranks may disagree on them). Storing
//! requires the parent to be held by the same rank; removing a block removes everything the rank
//! holds below it, so a rank's coverage is always a prefix-closed set and a re-stored gap never
//! resurrects old descendants. `find_matches` reports, per rank, how many leading blocks of the
//! query it holds.
//!
//! # Design
//! A compressed radix tree ([`tree::Tree`]) in two arenas:
//! * **Nodes** own an edge: a run of local hashes, stored inline so matching compares a
//!   contiguous slice, plus `holders`, a slot-sorted list of `(rank, cutoff)`: the rank holds the
//!   edge's first `cutoff` positions. Children are keyed by the first local hash of their edge.
//! * **Blocks** are stable ids for tree positions. A rank's lookup maps its names to block ids,
//!   not to (node, offset), so splitting an edge re-points each moved position once instead of
//!   once per rank that holds it (Dynamo re-points lookups per rank, lazily). A position keeps one
//!   canonical name (its creator's); a rank whose engine names it differently gets an alias
//!   entry, so the common case of agreeing names costs nothing extra.
//!
//! Invariants, which make matching a single walk that never overcounts:
//! 1. the holders of a child are a subset of the holders that cover its parent's whole edge;
//! 2. every position is held by some rank: removal frees unheld tails and nodes at once,
//!    so leaves can again be extended in place (the decode pattern of one block per event);
//! 3. a rank's predicted (approximate-mode) blocks lie below its confirmed ones, and their
//!    expiry never increases along a path, so expired predictions are a suffix that a binary
//!    search finds without any write.
//!
//! Concurrency: the tree is kept twice, left-right style ([`lock`]): queries read the published
//! copy without any lock and never wait; a writer updates the other copy, publishes it, waits for
//! readers to leave the old one and replays the operation there. Dynamo's concurrent tree uses
//! per-node locks and epochs instead; ours trades twice the memory and write work (on background
//! threads) for reads that cannot be held up by writers at all, and for simple single-threaded
//! tree code. Growth never stalls a writer for long either ([`growth`]). No anchors or sharding;
//! edges are never re-merged after removals (neither are Dynamo's).
//!
//! [`KvIndex`] adds the background writer threads, flush barrier and close.

pub mod concurrent;
pub mod event;
mod expiry;
pub mod growth;
pub mod json;
pub mod lock;
pub mod packed;
pub mod stats;
pub mod tree;

pub use concurrent::KvIndex;
pub use event::{DpRank, EventData, Rank, RouterEvent, StoredBlock, WorkerId};
pub use stats::{EventCounters, IndexStats, Rejection};
pub use tree::{DumpedStore, MatchScore, Tree};
