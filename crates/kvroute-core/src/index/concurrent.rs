//! [`KvIndex`]: the tree, readable without waiting, fed by background writer threads.
//!
//! Callers enqueue events and return at once; each worker id is pinned to one writer thread (round
//! robin on first sight), so one worker's events apply in order. Each writer owns a **shard**: its
//! own tree holding only its workers' ranks, so writers never share a lock and ingest scales with
//! writer threads (see the design notes in [`crate::index`]). Each shard is kept twice,
//! left-right style (see `lock.rs`): reads run on the caller's thread on the published copies and
//! never wait, not even for a writer. A read visits every shard and merges their scores; ranks are
//! disjoint across shards, so the merge is a concatenation. Each batch of events a writer takes
//! from its queue becomes visible whole, so a read always sees, for each worker, a state that
//! worker held at some instant. A writer that finds batches queued behind the one it takes
//! applies them in the same write (up to 64 batches or 4,096 blocks), so it publishes, and
//! waits for readers to leave the other copy, once for the lot: with readers querying
//! meanwhile, a writer publishing after every small batch spent much of its time waiting for a
//! reader the scheduler had preempted.

use super::event::{Rank, RouterEvent, WorkerId};
use super::lower::LowerTierState;
use super::merge::merged_runs;
use super::shard::Shard;
use super::spent::SpentBatches;
use super::stats::IndexStats;
use super::tree::{DumpedStore, MatchScore};
use crate::hashing::sequence_hashes;
use crate::heap;
use crate::index::growth::FastMap;
use crate::tiers::TierReach;
use crate::KvError;
use crossbeam_channel::{unbounded, Sender};
use parking_lot::{Condvar, Mutex};
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use writer::writer_loop;

mod writer;

/// How long `flush` (and every wait for a writer) spins before it yields and then sleeps. The
/// lockstep walk of `bench/vs-dynamo` (each batch flushed before the next query) spent most of
/// its time in the scheduler when the waiter yielded from the start: 50 µs of plain spinning
/// made it 29% faster at W = 16, 26% on churn and 17% at W = 256 (Intel Xeon VM, 6 alternating
/// runs each; 10 and 20 µs gained less, 100 µs about the same). A writer that polled its queue
/// for 20 µs before parking, so that the next batch would not have to wake it, gained nothing.
const FLUSH_SPIN: Duration = Duration::from_micros(50);

/// What routing reads of one candidate rank (see [`KvIndex::overlaps`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Overlap {
    /// Leading blocks of the query the rank holds in device memory.
    pub device: u32,
    /// Blocks the rank holds in device memory in total.
    pub tree_size: u32,
    /// Blocks its lower tiers add past the device prefix.
    pub lower: TierReach,
}

/// Upper bound on writer threads (each owns a shard that every read visits).
pub const MAX_WRITER_THREADS: usize = 64;

enum Op {
    Events {
        events: Vec<RouterEvent>,
        now_ms: f64,
    },
    RemoveWorker {
        worker_id: WorkerId,
        dp_rank: Option<u32>,
    },
    Predict {
        rank: Rank,
        locals: Vec<u64>,
        seq_hashes: Vec<u64>,
        now_ms: f64,
        expires_at_ms: f64,
    },
    /// Sweeps a shard's expired predictions: time passes for every shard, not only for the one
    /// a write lands on, so that counts (`stats`) do not keep expired blocks.
    Expire {
        now_ms: f64,
    },
    Stop,
}

struct Shared {
    /// One shard per writer, its view kept twice: reads never wait (see `shard.rs`).
    shards: Vec<Shard>,
    /// Heap bytes of each writer's journal (its scratch between the two views' writes).
    journal_bytes: Vec<AtomicU64>,
    /// Per writer, the bits of the earliest expiry its shard's predictions may have (infinity
    /// when none), written after each write: other writers' ops sweep a shard only once it may
    /// have something due, instead of waking its writer on every event and prediction.
    next_due: Vec<AtomicU64>,
    /// Ops enqueued per writer; compared with `applied` by `flush`.
    enqueued: Vec<AtomicU64>,
    /// Ops applied per writer. Atomics, so that a waiter can spin on them briefly before
    /// sleeping (see `wait_until`).
    applied: Vec<AtomicU64>,
    /// Each shard's heap bytes (both views), refreshed by its writer at most every
    /// `MEMORY_REFRESH` so that a binding can tell its garbage collector cheaply.
    shard_bytes: Vec<AtomicU64>,
    /// Per writer, the lowest `applied` count that a sleeping waiter needs (`u64::MAX` when
    /// none): a writer wakes the sleepers only on reaching it. Waking them on every op instead
    /// cost a futex wake-up per batch while a `flush` waited on a long queue (a fifth of a
    /// writer's time on the index benchmark).
    wake_at: Vec<AtomicU64>,
    /// Waiters sleep here, registering in `wake_at` under the lock first.
    sleepers: Mutex<()>,
    progress: Condvar,
    /// Applied event batches, freed by the threads that send events (see `spent.rs`).
    spent: SpentBatches,
    /// The first panic inside a writer, if any. Writers keep running after it so that `flush`
    /// never hangs, but the index reports the failure instead of pretending to be healthy.
    failure: Mutex<Option<String>>,
    /// Host, disk and external tiers, applied by the writers in order with each worker's device
    /// events (see `lower.rs`).
    lower: LowerTierState,
}

/// The size of books from which [`KvIndex::close_returning_memory`] asks the allocator to give
/// pages back: the trim costs about a millisecond, which would dominate closing thousands of
/// small indexes (an empty one closes in microseconds), and what they free is reused anyway.
const RETURN_PAGES_FROM: u64 = 1 << 20;

/// How often a writer re-measures its shard's heap (an O(nodes) walk) for `memory_estimate`.
const MEMORY_REFRESH: Duration = Duration::from_millis(250);

impl Shared {
    fn measure(&self, shard: usize) {
        let bytes = self.shards[shard].stats().memory_bytes + self.journal_bytes[shard].load(Ordering::Relaxed);
        self.shard_bytes[shard].store(bytes, Ordering::Relaxed);
    }

    fn mark_applied(&self, writer: usize, ops: u64) {
        // SeqCst pairs with the waiter's registration (store `wake_at`, then load `applied`):
        // either this load sees its registration, or its load sees this op applied.
        let applied = self.applied[writer].fetch_add(ops, Ordering::SeqCst) + ops;
        if applied >= self.wake_at[writer].load(Ordering::SeqCst) {
            let _lock = self.sleepers.lock();
            // Every sleeper wakes and re-registers what it still needs.
            self.wake_at[writer].store(u64::MAX, Ordering::SeqCst);
            self.progress.notify_all();
        }
    }
}

/// Worker → writer, and how many workers were assigned so far (round robin on first sight).
type Assignment = (FastMap<WorkerId, usize>, usize);

/// A prediction queued by [`KvIndex::record_prediction`]: its writer and its place in
/// that writer's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PredictionTicket {
    writer: usize,
    position: u64,
}

pub struct KvIndex {
    shared: Arc<Shared>,
    writers: Vec<Sender<Op>>,
    handles: Mutex<Vec<JoinHandle<()>>>,
    /// Which writer each worker is pinned to. Every send happens under this lock (see `send`).
    assignment: Mutex<Assignment>,
    closed: AtomicBool,
    /// Whether any prediction (approximate mode) was ever recorded: only then do writes sweep
    /// expired predictions in every shard.
    predictions: AtomicBool,
}

impl KvIndex {
    pub fn new(writer_threads: usize) -> Result<Self, KvError> {
        if writer_threads == 0 || writer_threads > MAX_WRITER_THREADS {
            return Err(KvError::invalid_arg(format!(
                "writerThreads must be an integer in [1, {MAX_WRITER_THREADS}], got {writer_threads}"
            )));
        }
        let shared = Arc::new(Shared {
            shards: (0..writer_threads).map(|_| Shard::default()).collect(),
            journal_bytes: (0..writer_threads).map(|_| AtomicU64::new(0)).collect(),
            next_due: (0..writer_threads).map(|_| AtomicU64::new(f64::INFINITY.to_bits())).collect(),
            enqueued: (0..writer_threads).map(|_| AtomicU64::new(0)).collect(),
            applied: (0..writer_threads).map(|_| AtomicU64::new(0)).collect(),
            shard_bytes: (0..writer_threads).map(|_| AtomicU64::new(0)).collect(),
            wake_at: (0..writer_threads).map(|_| AtomicU64::new(u64::MAX)).collect(),
            sleepers: Mutex::new(()),
            progress: Condvar::new(),
            spent: SpentBatches::new(writer_threads),
            failure: Mutex::new(None),
            lower: LowerTierState::default(),
        });
        let mut writers = Vec::with_capacity(writer_threads);
        let mut handles = Vec::with_capacity(writer_threads);
        for id in 0..writer_threads {
            let (tx, rx) = unbounded::<Op>();
            let shared = Arc::clone(&shared);
            // Linux keeps 15 bytes of a thread's name (what `top -H` and perf show): short
            // enough that each writer's stays distinct.
            let handle = std::thread::Builder::new()
                .name(format!("kvr-writer-{id}"))
                .spawn(move || writer_loop(&shared, id, &rx))
                .map_err(|e| KvError::invalid_arg(format!("cannot start writer thread: {e}")))?;
            writers.push(tx);
            handles.push(handle);
        }
        Ok(Self {
            shared,
            writers,
            handles: Mutex::new(handles),
            assignment: Mutex::new((FastMap::default(), 0)),
            closed: AtomicBool::new(false),
            predictions: AtomicBool::new(false),
        })
    }

    fn ensure_open(&self) -> Result<(), KvError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(KvError::closed("KvIndex"));
        }
        Ok(())
    }

    fn writer_for(&self, worker_id: WorkerId, table: &mut Assignment) -> usize {
        let n = self.writers.len();
        *table.0.entry(worker_id).or_insert_with(|| {
            table.1 += 1;
            (table.1 - 1) % n
        })
    }

    /// Enqueues `op`; returns its position in that writer's sequence. The caller holds the
    /// assignment lock (`_ordered` is only reachable through it), so positions follow the
    /// channel's order: two threads that took positions 5 and 6 without it could send 6 first,
    /// and the writer, applying it, would count position 5 as applied and release a waiter whose
    /// own op was still queued (a prediction not yet visible to the router that made it).
    fn send(&self, _ordered: &Assignment, writer: usize, op: Op) -> u64 {
        let position = self.shared.enqueued[writer].fetch_add(1, Ordering::AcqRel) + 1;
        // The receiver only disappears after `close`, which `ensure_open` already excluded.
        let _ = self.writers[writer].send(op);
        position
    }

    /// Blocks until `writer` has applied its op at `position`.
    fn wait_for(&self, writer: usize, position: u64) {
        self.wait_until(&[(writer, position)]);
    }

    /// Blocks until each `(writer, target)` writer has applied `target` ops, in three stages.
    /// It spins for up to [`FLUSH_SPIN`] first: a writer usually finishes a small batch sooner
    /// than a sleeping thread can be woken, and waking costs tens of microseconds on small
    /// virtual machines. Then it yields for a while (the writer may need this core), then sleeps,
    /// registered to be woken when the first writer it waits for reaches its target.
    fn wait_until(&self, targets: &[(usize, u64)]) {
        const YIELDS: u32 = 200;
        let shared = &*self.shared;
        let behind = |&(w, target): &(usize, u64)| shared.applied[w].load(Ordering::SeqCst) < target;
        let start = Instant::now();
        let mut spins = 0u32;
        while targets.iter().any(behind) {
            std::hint::spin_loop();
            spins += 1;
            // The clock is read every 32 checks: a check is a load, the clock a few dozen cycles.
            if spins.is_multiple_of(32) && start.elapsed() > FLUSH_SPIN {
                break;
            }
        }
        for _ in 0..YIELDS {
            if !targets.iter().any(behind) {
                return;
            }
            std::thread::yield_now();
        }
        let mut lock = shared.sleepers.lock();
        loop {
            let waiting: Vec<(usize, u64)> = targets.iter().copied().filter(behind).collect();
            for &(w, target) in &waiting {
                shared.wake_at[w].fetch_min(target, Ordering::SeqCst);
            }
            // Checked again after registering: an op applied before the writer could see the
            // registration is seen here.
            if !waiting.iter().any(behind) {
                return;
            }
            shared.progress.wait(&mut lock);
        }
    }

    /// Enqueues events; each worker's events keep their order.
    ///
    /// A batch whose events all belong to one writer's workers (an engine's frame carries its own
    /// events only) goes to that writer as it is; splitting it allocated a vector per writer,
    /// grown event by event, on every call. After sending, this thread frees the batches the
    /// writers have applied since the last call (see `spent.rs`).
    pub fn apply_events(&self, events: Vec<RouterEvent>, now_ms: f64) -> Result<(), KvError> {
        self.ensure_open()?;
        let mut table = self.assignment.lock();
        let single = {
            let mut targets = events.iter().map(|e| self.writer_for(e.rank.worker_id, &mut table));
            match targets.next() {
                Some(w) if targets.all(|t| t == w) => Some(w),
                _ => None,
            }
        };
        match single {
            Some(w) => {
                self.send(&table, w, Op::Events { events, now_ms });
                self.sweep_others(&table, w, now_ms);
            }
            None => {
                for (w, events) in self.split_by_writer(events, &mut table).into_iter().enumerate() {
                    if !events.is_empty() {
                        self.send(&table, w, Op::Events { events, now_ms });
                    } else {
                        self.sweep_if_due(&table, w, now_ms);
                    }
                }
            }
        }
        drop(table);
        // After sending, so the writers start on this batch meanwhile.
        self.shared.spent.free_all();
        Ok(())
    }

    /// `events` in one vector per writer, each sized exactly, in their order.
    fn split_by_writer(&self, events: Vec<RouterEvent>, table: &mut Assignment) -> Vec<Vec<RouterEvent>> {
        let mut counts = vec![0usize; self.writers.len()];
        for e in &events {
            counts[self.writer_for(e.rank.worker_id, table)] += 1;
        }
        let mut per_writer: Vec<Vec<RouterEvent>> = counts.into_iter().map(Vec::with_capacity).collect();
        for event in events {
            let w = self.writer_for(event.rank.worker_id, table);
            per_writer[w].push(event);
        }
        per_writer
    }

    /// Enqueues the removal of one rank, or of all ranks of the worker; ordered after the
    /// worker's events already enqueued.
    pub fn remove_worker(&self, worker_id: WorkerId, dp_rank: Option<u32>) -> Result<(), KvError> {
        self.ensure_open()?;
        let mut table = self.assignment.lock();
        let w = self.writer_for(worker_id, &mut table);
        self.send(&table, w, Op::RemoveWorker { worker_id, dp_rank });
        Ok(())
    }

    /// Approximate mode: queues a routing prediction behind the worker's earlier ops (usually
    /// none in approximate mode); it is visible to reads once [`Self::await_prediction`] returns
    /// for the ticket. A router waits for it right before its next read of the index, so the
    /// writer applies it meanwhile instead of holding up the caller's thread.
    pub fn record_prediction(
        &self,
        rank: Rank,
        locals: Vec<u64>,
        seq_hashes: Vec<u64>,
        now_ms: f64,
        expires_at_ms: f64,
    ) -> Result<PredictionTicket, KvError> {
        self.ensure_open()?;
        if locals.len() != seq_hashes.len() {
            return Err(KvError::invalid_arg("local and sequence hashes differ in length"));
        }
        let mut table = self.assignment.lock();
        let writer = self.writer_for(rank.worker_id, &mut table);
        let position = self.send(&table, writer, Op::Predict { rank, locals, seq_hashes, now_ms, expires_at_ms });
        self.predictions.store(true, Ordering::Relaxed);
        self.sweep_others(&table, writer, now_ms);
        Ok(PredictionTicket { writer, position })
    }

    /// Waits until a deferred prediction is visible to reads.
    pub fn await_prediction(&self, ticket: PredictionTicket) -> Result<(), KvError> {
        self.wait_for(ticket.writer, ticket.position);
        self.check_failure()
    }

    /// Once predictions exist, a write to one shard sweeps the others' expired ones too.
    fn sweep_others(&self, table: &Assignment, except: usize, now_ms: f64) {
        for other in (0..self.writers.len()).filter(|&o| o != except) {
            self.sweep_if_due(table, other, now_ms);
        }
    }

    /// Sends `writer` an expiry sweep if its shard may hold predictions due at `now_ms`. A
    /// stale figure only delays a sweep: queries ignore expired predictions anyway, and the
    /// writer's own next op sweeps first.
    fn sweep_if_due(&self, table: &Assignment, writer: usize, now_ms: f64) {
        if self.predictions.load(Ordering::Relaxed)
            && now_ms >= f64::from_bits(self.shared.next_due[writer].load(Ordering::Acquire))
        {
            self.send(table, writer, Op::Expire { now_ms });
        }
    }

    /// Approximate mode: records that a request with these local hashes was routed to `rank`,
    /// and returns once the prediction is visible to reads; its blocks are named by their
    /// sequence hashes, as Dynamo's router does. It waits only for this worker's writer.
    pub fn record_routing(&self, rank: Rank, locals: Vec<u64>, now_ms: f64, expires_at_ms: f64) -> Result<(), KvError> {
        let seq_hashes = crate::hashing::sequence_hashes(&locals);
        let ticket = self.record_prediction(rank, locals, seq_hashes, now_ms, expires_at_ms)?;
        self.await_prediction(ticket)
    }

    /// Blocks until every op enqueued before the call is applied. A flush that races with
    /// `close` succeeds: close applies everything queued before its writers stop.
    pub fn flush(&self) -> Result<(), KvError> {
        let targets: Vec<(usize, u64)> =
            self.shared.enqueued.iter().map(|e| e.load(Ordering::Acquire)).enumerate().collect();
        self.wait_until(&targets);
        // A writer retires a batch before counting it applied: every batch waited for is here.
        self.shared.spent.free_all();
        self.check_failure()
    }

    fn check_failure(&self) -> Result<(), KvError> {
        match self.shared.failure.lock().as_ref() {
            Some(detail) => {
                Err(KvError { code: crate::ErrorCode::Internal, message: format!("a writer thread failed: {detail}") })
            }
            None => Ok(()),
        }
    }

    pub fn find_matches(&self, query: &[u64], now_ms: f64) -> Result<Vec<MatchScore>, KvError> {
        self.ensure_open()?;
        Ok(self.matches(query, now_ms))
    }

    /// Every shard's scores, in the tree's order (blocks descending, then rank).
    fn matches(&self, query: &[u64], now_ms: f64) -> Vec<MatchScore> {
        if let [only] = self.shared.shards.as_slice() {
            return only.find_matches(query, now_ms);
        }
        // Every shard's sorted run, then merged (runs hold disjoint ranks).
        let shards = &self.shared.shards;
        merged_runs(shards.len(), |i, out| shards[i].find_matches_into(query, now_ms, out))
    }

    /// For each candidate rank: the leading blocks of `query` it holds, the blocks it holds in
    /// total, and how far its lower tiers continue the match. Each rank's device figures come
    /// from one consistent state of its shard. `positions`, the query's sequence hashes when the
    /// caller has them (a router does), spare the tier walk hashing the query again.
    pub fn overlaps(
        &self,
        query: &[u64],
        positions: Option<&[u64]>,
        now_ms: f64,
        candidates: &[Rank],
    ) -> Result<Vec<Overlap>, KvError> {
        self.ensure_open()?;
        let scores: rustc_hash::FxHashMap<Rank, (u32, u32)> =
            self.matches(query, now_ms).into_iter().map(|s| (s.rank, (s.blocks, s.tree_size))).collect();
        let mut out: Vec<Overlap> = candidates
            .iter()
            .map(|rank| {
                let (device, tree_size) = match scores.get(rank) {
                    Some(pair) => *pair,
                    None => (0, self.shared.shards.iter().map(|s| s.tree_size(*rank) as u32).sum()),
                };
                Overlap { device, tree_size, lower: TierReach::default() }
            })
            .collect();
        self.shared
            .lower
            .extend(&mut out, candidates, || positions.map_or_else(|| sequence_hashes(query).into(), Cow::Borrowed));
        Ok(out)
    }

    /// Every rank's blocks as Stored events: the device tree's, ranks in order, then the lower
    /// tiers' (see [`LowerTierState::dump`](super::lower::LowerTierState::dump)).
    pub fn dump(&self) -> Result<Vec<DumpedStore>, KvError> {
        self.ensure_open()?;
        let mut out = Vec::new();
        for shard in &self.shared.shards {
            out.extend(shard.dump());
        }
        // Stable: each rank's events keep their parent-first order.
        out.sort_by_key(|d| d.rank);
        out.extend(self.shared.lower.dump());
        Ok(out)
    }

    /// Stats summed over the shards (both views counted in `memory_bytes`), plus the number of
    /// ops still queued. Shards share no ranks, so rank, worker and block counts add up; a prefix
    /// that ranks of two shards hold counts once per shard in `tree_nodes` and `tree_blocks`.
    pub fn stats(&self) -> Result<(IndexStats, u64), KvError> {
        self.ensure_open()?;
        let mut total = IndexStats::default();
        for shard in &self.shared.shards {
            total.add(&shard.stats());
        }
        let journals: u64 = self.shared.journal_bytes.iter().map(|b| b.load(Ordering::Relaxed)).sum();
        let (lower, lower_bytes) = self.shared.lower.stats();
        total.lower_tiers = lower;
        total.memory_bytes += journals + self.shared.spent.held_bytes() + self.own_bytes() as u64 + lower_bytes;
        Ok((total, self.queued_ops()))
    }

    /// Heap bytes of the index's own bookkeeping (outside the trees).
    fn own_bytes(&self) -> usize {
        let table = self.assignment.lock();
        table.0.allocation_size() + self.shared.shards.capacity() * std::mem::size_of::<Shard>()
    }

    /// Ops accepted and not applied yet (one per `apply_events` call, removal or prediction):
    /// cheap, for callers that pace themselves against a high-water mark.
    pub fn pending(&self) -> Result<u64, KvError> {
        self.ensure_open()?;
        Ok(self.queued_ops())
    }

    fn queued_ops(&self) -> u64 {
        // Applied first: an op counted as applied was enqueued before, so this never underflows.
        let applied: Vec<u64> = self.shared.applied.iter().map(|a| a.load(Ordering::Acquire)).collect();
        self.shared.enqueued.iter().zip(applied).map(|(e, a)| e.load(Ordering::Acquire) - a).sum()
    }

    /// Heap bytes of the trees as last measured by the writers (at most `MEMORY_REFRESH` old,
    /// 0 after `close`): cheap, for telling a garbage collector about native memory.
    pub fn memory_estimate(&self) -> u64 {
        self.shared.shard_bytes.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// Stops the writers and frees the trees at once (reads in flight finish on the old copy
    /// first). Idempotent; every other call fails with `ERR_CLOSED` afterwards. The memory goes
    /// back to the allocator, which may keep it: see [`Self::close_returning_memory`].
    pub fn close(&self) {
        self.shut();
    }

    /// [`Self::close`], then, if the trees' books held at least a megabyte (`RETURN_PAGES_FROM`),
    /// asks the allocator to give its free pages back to the system
    /// ([`heap::return_free_pages`]), so that the process's resident set drops by the index at
    /// once whatever the allocator's history (see `heap.rs` for why it otherwise may not). Says
    /// whether it asked: false for a small index, or one already closed. What the Node binding's
    /// `close()` calls; dropping an index closes it without this, as a Rust program's allocator
    /// is its own business.
    pub fn close_returning_memory(&self) -> bool {
        let large = self.shut() >= RETURN_PAGES_FROM;
        if large {
            heap::return_free_pages();
        }
        large
    }

    /// Closes the index; returns the bytes its shards' books held (0 if it was closed already).
    fn shut(&self) -> u64 {
        if self.closed.swap(true, Ordering::AcqRel) {
            return 0;
        }
        for tx in &self.writers {
            let _ = tx.send(Op::Stop);
        }
        for handle in self.handles.lock().drain(..) {
            let _ = handle.join();
        }
        self.shared.spent.free_all();
        let mut freed = 0;
        for (id, shard) in self.shared.shards.iter().enumerate() {
            freed += shard.reset() as u64;
            self.shared.shard_bytes[id].store(0, Ordering::Relaxed);
            self.shared.journal_bytes[id].store(0, Ordering::Relaxed);
        }
        freed
    }
}

impl Drop for KvIndex {
    fn drop(&mut self) {
        self.close();
    }
}
