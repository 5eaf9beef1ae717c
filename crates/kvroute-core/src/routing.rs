//! The native half of a router: for one request, every candidate's cache overlap and load in one
//! call, and the bookings that follow routing decisions. The cost formula and the choice live
//! in the TypeScript `KvRouter`, which sees the figures of all candidates at once.

use crate::hashing::sequence_hashes;
use crate::index::{KvIndex, PredictionTicket, Rank};
use crate::load::{ActiveLoad, LoadFigures, RequestHandle};
use crate::tiers::TierReach;
use crate::KvError;
use rustc_hash::FxHashMap;

/// What routing weighs for one candidate rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CandidateFigures {
    /// Leading blocks of the request the rank holds (KV cache overlap).
    pub overlap: u32,
    /// Blocks the rank holds in total (tie-breaker: prefer the emptier cache).
    pub tree_size: u32,
    /// Blocks its host, disk and external tiers add past `overlap` (weighed by the router's
    /// lower-tier credits).
    pub lower: TierReach,
    pub load: LoadFigures,
}

/// Bounds the identities a peer's booking may ask for, so a corrupt message cannot allocate
/// gigabytes (2^20 blocks is a 16M-token prompt at block size 16).
pub const MAX_REMOTE_UNSHARED_BLOCKS: usize = 1 << 20;

#[derive(Debug, Default)]
pub struct RouterCore {
    load: ActiveLoad,
    /// Scored requests awaiting `book` or `discard`.
    pending: FxHashMap<RequestHandle, Scored>,
    /// Predictions `book` queued that the next `score` waits for (see [`RouterCore::book`]).
    unseen: Vec<PredictionTicket>,
}

/// What `book` needs of a scored request.
#[derive(Debug)]
struct Scored {
    /// Its block identities for the load tracker (its sequence hashes with KV reuse).
    blocks: Vec<u64>,
    /// Its local block hashes, for a prediction: the ones it was scored with, multimodal content
    /// and all, so the prediction lands where the next request's match looks.
    locals: Vec<u64>,
    /// Whether `blocks` are the sequence hashes of `locals`.
    reuse: bool,
}

/// Block identities that never match another request's: for engines that do not reuse KV across
/// requests (Dynamo's `router_assume_kv_reuse = false`), so nothing is deduplicated.
fn unshared_blocks(handle: RequestHandle, count: usize) -> Vec<u64> {
    (0..count as u64).map(|i| crate::hashing::next_sequence_hash(handle, i ^ 0x6b76_726f_7574_6521)).collect()
}

impl RouterCore {
    /// Scores a request (its local block hashes) against `candidates`, and keeps its block
    /// identities and hashes for a following [`RouterCore::book`].
    pub fn score(
        &mut self,
        index: &KvIndex,
        handle: RequestHandle,
        locals: Vec<u64>,
        candidates: &[Rank],
        now_ms: f64,
        assume_kv_reuse: bool,
    ) -> Result<Vec<CandidateFigures>, KvError> {
        let blocks = if assume_kv_reuse { sequence_hashes(&locals) } else { unshared_blocks(handle, locals.len()) };
        for ticket in self.unseen.drain(..) {
            index.await_prediction(ticket)?;
        }
        let overlaps = index.overlaps(&locals, assume_kv_reuse.then_some(blocks.as_slice()), now_ms, candidates)?;
        let out = candidates
            .iter()
            .zip(overlaps)
            .map(|(rank, o)| CandidateFigures {
                overlap: o.device,
                tree_size: o.tree_size,
                lower: o.lower,
                load: self.load.figures(*rank, &blocks),
            })
            .collect();
        self.pending.insert(handle, Scored { blocks, locals, reuse: assume_kv_reuse });
        Ok(out)
    }

    /// Books the scored request on `rank`. Its blocks count as decode load only when
    /// `track_blocks`. With `predict_until_ms`, its blocks are first recorded in `index` as
    /// predictions on `rank` until then (approximate mode and predict-on-route; the index must be
    /// the one it was scored on); if that fails, nothing is booked. The prediction is queued,
    /// not waited for: the next `score` waits for it before it reads the index, so this router
    /// sees its own decisions while the writer thread applies them in between (waiting here
    /// held up the caller's thread, a JavaScript event loop, for the writer's whole write).
    #[allow(clippy::too_many_arguments)]
    pub fn book(
        &mut self,
        index: &KvIndex,
        handle: RequestHandle,
        rank: Rank,
        prefill_tokens: u64,
        track_blocks: bool,
        now_ms: f64,
        predict_until_ms: Option<f64>,
    ) -> Result<(), KvError> {
        // Refused before anything is recorded (a prediction for a booking that then fails would
        // stay in the index), leaving the scored request pending, as the JavaScript core does.
        if self.pending.contains_key(&handle) && self.load.is_booked(handle) {
            return Err(KvError::invalid_arg(format!("request handle {handle} is already booked")));
        }
        let Scored { blocks, locals, reuse } = self
            .pending
            .remove(&handle)
            .ok_or_else(|| KvError::invalid_arg(format!("request handle {handle} was not scored")))?;
        if let Some(until) = predict_until_ms {
            let names = if reuse { blocks.clone() } else { sequence_hashes(&locals) };
            self.unseen.push(index.record_prediction(rank, locals, names, now_ms, until)?);
        }
        self.load.book(handle, rank, if track_blocks { blocks } else { Vec::new() }, prefill_tokens, now_ms)
    }

    /// Books a request that another router replica routed: `blocks` are the identities that
    /// replica computed (sequence hashes, so shared prefixes still count once per rank), plus
    /// `unshared` identities that match nothing (a replica without KV reuse sends a count, as its
    /// own identities derive from its handles, which collide across replicas). Scoring is skipped:
    /// the peer already chose the rank.
    pub fn book_remote(
        &mut self,
        handle: RequestHandle,
        rank: Rank,
        mut blocks: Vec<u64>,
        unshared: usize,
        prefill_tokens: u64,
        now_ms: f64,
    ) -> Result<(), KvError> {
        if unshared > MAX_REMOTE_UNSHARED_BLOCKS {
            return Err(KvError::invalid_arg(format!(
                "a remote booking holds at most {MAX_REMOTE_UNSHARED_BLOCKS} unshared blocks, got {unshared}"
            )));
        }
        blocks.extend(unshared_blocks(handle, unshared));
        self.pending.remove(&handle);
        self.load.book(handle, rank, blocks, prefill_tokens, now_ms)
    }

    /// The block identities a booked request holds (see [`ActiveLoad::blocks_of`]).
    pub fn booked_blocks(&self, handle: RequestHandle) -> &[u64] {
        self.load.blocks_of(handle)
    }

    /// For scored requests `handles`, how many of each one's leading blocks another of them
    /// already accounts for, so that `Σ (blocks − shared)` counts every distinct block of the
    /// group once (a batch that runs together holds a block once). The requests are sorted by
    /// their block identities and each shares with the one before it: a block's identity names
    /// its whole prefix, so shared blocks are a common prefix, and sorting puts the longest one
    /// beside it. Sorting stops each comparison at the first differing block, where a set of all
    /// the blocks would hash and insert every one. Requests scored without KV reuse share none.
    ///
    /// # Errors
    /// `InvalidArg` when a handle is not scored (or already booked).
    pub fn shared_leading_blocks(&self, handles: &[RequestHandle]) -> Result<Vec<u32>, KvError> {
        let lists = handles
            .iter()
            .map(|handle| {
                self.pending
                    .get(handle)
                    .map(|scored| scored.blocks.as_slice())
                    .ok_or_else(|| KvError::invalid_arg(format!("request handle {handle} was not scored")))
            })
            .collect::<Result<Vec<&[u64]>, KvError>>()?;
        let mut order: Vec<usize> = (0..lists.len()).collect();
        order.sort_unstable_by(|&a, &b| lists[a].cmp(lists[b]));
        let mut shared = vec![0u32; lists.len()];
        for pair in order.windows(2) {
            let (before, this) = (lists[pair[0]], lists[pair[1]]);
            shared[pair[1]] = before.iter().zip(this).take_while(|(a, b)| a == b).count() as u32;
        }
        Ok(shared)
    }

    /// Forgets a scored request that will not be booked.
    pub fn discard(&mut self, handle: RequestHandle) {
        self.pending.remove(&handle);
    }

    pub fn prefill_completed(&mut self, handle: RequestHandle) -> bool {
        self.load.prefill_completed(handle)
    }

    pub fn free(&mut self, handle: RequestHandle) -> bool {
        self.load.free(handle)
    }

    /// Adds output blocks to a booked request (see [`ActiveLoad::add_output_blocks`]).
    ///
    /// # Errors
    /// `InvalidArg` for a decay outside 0..=1.
    pub fn add_output_blocks(
        &mut self,
        handle: RequestHandle,
        count: u32,
        decay: Option<f64>,
    ) -> Result<bool, KvError> {
        self.load.add_output_blocks(handle, count, decay)
    }

    /// Renews a request's expiry lease (see [`crate::load::ActiveLoad::touch`]).
    pub fn touch(&mut self, handle: RequestHandle, now_ms: f64) -> bool {
        self.load.touch(handle, now_ms)
    }

    pub fn expire(&mut self, cutoff_ms: f64) -> Vec<RequestHandle> {
        self.load.expire(cutoff_ms)
    }

    pub fn remove_worker(&mut self, worker_id: u64) -> Vec<RequestHandle> {
        self.load.remove_worker(worker_id)
    }

    pub fn snapshot(&self) -> Vec<(Rank, LoadFigures)> {
        self.load.snapshot()
    }
}
