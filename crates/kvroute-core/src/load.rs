//! Active load per (worker, dp rank): what a router has sent to each rank and not yet seen
//! finish. Routing weighs cache overlap against this load.
//!
//! A booked request counts its uncached prompt tokens as *prefill* load until its first token
//! (`prefill_completed`), and its prompt blocks as *decode* load until it ends (`free`). Blocks are
//! identified by sequence hash and reference-counted per rank, so in-flight requests that share
//! a prefix count its blocks once, as the engine's prefix cache does.
//!
//! Output blocks (Dynamo's `router_track_output_blocks`): as a request generates, the router adds
//! a block of its own each time its sequence crosses a block boundary, and may decay the blocks
//! held by that request alone by the fraction of its expected output still to come, so a request
//! about to finish weighs less than one that has just begun. A rank's active blocks are then the
//! sum of each block's weight (1, or its fraction), rounded, as Dynamo rounds them. A block that
//! another request books stops being decayed: it is no longer the first request's alone (Dynamo
//! keeps the old fraction until a later update).

use crate::index::Rank;
use crate::KvError;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// A router's handle for one request (the TypeScript layer maps request ids to handles).
pub type RequestHandle = u64;

#[derive(Debug, Default, Clone)]
struct RankLoad {
    prefill_tokens: u64,
    /// Sequence hash → number of in-flight requests holding that block.
    blocks: FxHashMap<u64, u32>,
    /// Blocks held by one request whose weight that request decayed below 1.
    fractions: FxHashMap<u64, f64>,
    /// What `fractions` take off `blocks.len()`: the sum of `1 - fraction` (kept, not summed per
    /// query; exactly 0 whenever `fractions` is empty).
    decayed: f64,
    requests: u32,
}

impl RankLoad {
    /// Active blocks: each block's weight, summed and rounded.
    fn active_blocks(&self) -> u64 {
        (self.blocks.len() as f64 - self.decayed).round().max(0.0) as u64
    }

    /// Sets `hash`'s weight to `fraction` (1 removes the decay).
    fn set_fraction(&mut self, hash: u64, fraction: f64) {
        let old = if fraction < 1.0 { self.fractions.insert(hash, fraction) } else { self.fractions.remove(&hash) };
        self.decayed += (1.0 - fraction.min(1.0)) - old.map_or(0.0, |f| 1.0 - f);
        if self.fractions.is_empty() {
            self.decayed = 0.0;
        }
    }

    /// One more request holds `hash`.
    fn hold(&mut self, hash: u64) {
        let count = self.blocks.entry(hash).or_insert(0);
        *count += 1;
        if *count == 2 && self.fractions.contains_key(&hash) {
            self.set_fraction(hash, 1.0);
        }
    }

    /// One request fewer holds `hash`.
    fn release(&mut self, hash: u64) {
        if let Some(count) = self.blocks.get_mut(&hash) {
            *count -= 1;
            if *count == 0 {
                self.blocks.remove(&hash);
                self.set_fraction(hash, 1.0);
            }
        }
    }
}

#[derive(Debug)]
struct Booking {
    rank: Rank,
    blocks: Vec<u64>,
    /// Output blocks added since booking (identities no other request has).
    outputs: Vec<u64>,
    /// Prefill tokens still counted (0 once the first token was seen).
    prefill_tokens: u64,
    booked_at_ms: f64,
}

/// Output blocks one request may hold: a 16 Mi-token output even at block size 1 (the
/// TypeScript layer also bounds the tokens reported), so a corrupt count cannot exhaust memory.
pub const MAX_OUTPUT_BLOCKS: usize = 1 << 24;

/// The identity of a request's `index`-th output block: matches no prompt block (a sequence hash
/// chained from the request's handle with a salt of its own) and no other request's.
fn output_block_id(id: RequestHandle, index: u64) -> u64 {
    crate::hashing::next_sequence_hash(id, index ^ 0x6f75_7470_7574_2121)
}

/// One rank's load figures for a prospective request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadFigures {
    /// Prefill tokens of requests on this rank that have not produced a first token.
    pub active_prefill_tokens: u64,
    /// Distinct blocks held by in-flight requests on this rank.
    pub active_blocks: u64,
    /// Blocks of the prospective request not already held by in-flight requests here.
    pub new_blocks: u64,
    /// In-flight requests on this rank.
    pub requests: u32,
}

#[derive(Debug, Default)]
pub struct ActiveLoad {
    ranks: FxHashMap<Rank, RankLoad>,
    bookings: FxHashMap<RequestHandle, Booking>,
    /// Bookings in booking order, for expiry (entries of finished requests are skipped).
    order: VecDeque<(f64, RequestHandle)>,
}

impl ActiveLoad {
    pub fn figures(&self, rank: Rank, blocks: &[u64]) -> LoadFigures {
        match self.ranks.get(&rank) {
            None => LoadFigures { new_blocks: blocks.len() as u64, ..LoadFigures::default() },
            Some(load) => LoadFigures {
                active_prefill_tokens: load.prefill_tokens,
                active_blocks: load.active_blocks(),
                new_blocks: blocks.iter().filter(|h| !load.blocks.contains_key(h)).count() as u64,
                requests: load.requests,
            },
        }
    }

    /// Books a request on `rank`: its `blocks` count as decode load until `free`, its
    /// `prefill_tokens` as prefill load until `prefill_completed`.
    pub fn book(
        &mut self,
        id: RequestHandle,
        rank: Rank,
        blocks: Vec<u64>,
        prefill_tokens: u64,
        now_ms: f64,
    ) -> Result<(), KvError> {
        if self.bookings.contains_key(&id) {
            return Err(KvError::invalid_arg(format!("request handle {id} is already booked")));
        }
        let load = self.ranks.entry(rank).or_default();
        load.prefill_tokens += prefill_tokens;
        load.requests += 1;
        for &h in &blocks {
            load.hold(h);
        }
        self.bookings.insert(id, Booking { rank, blocks, outputs: Vec::new(), prefill_tokens, booked_at_ms: now_ms });
        self.order.push_back((now_ms, id));
        Ok(())
    }

    /// Whether `id` is booked (and not yet freed).
    pub fn is_booked(&self, id: RequestHandle) -> bool {
        self.bookings.contains_key(&id)
    }

    /// The first token arrived: the request's prefill load ends. `false` for an unknown id.
    pub fn prefill_completed(&mut self, id: RequestHandle) -> bool {
        let Some(booking) = self.bookings.get_mut(&id) else {
            return false;
        };
        let tokens = std::mem::take(&mut booking.prefill_tokens);
        if let Some(load) = self.ranks.get_mut(&booking.rank) {
            load.prefill_tokens -= tokens;
        }
        true
    }

    /// The request's generation crossed `count` more block boundaries: that many blocks of its
    /// own join its decode load. With `decay`, every block held by this request alone then
    /// weighs `decay` (in 0..=1: the share of its expected output still to come). `false` for an
    /// unknown id.
    ///
    /// # Errors
    /// `InvalidArg` for a decay outside 0..=1 (NaN included) or more than [`MAX_OUTPUT_BLOCKS`]
    /// in all, before anything changes.
    pub fn add_output_blocks(&mut self, id: RequestHandle, count: u32, decay: Option<f64>) -> Result<bool, KvError> {
        if let Some(d) = decay {
            if !(0.0..=1.0).contains(&d) {
                return Err(KvError::invalid_arg(format!("an output block decay must be in [0, 1], got {d}")));
            }
        }
        let Some(booking) = self.bookings.get_mut(&id) else {
            return Ok(false);
        };
        if booking.outputs.len() + count as usize > MAX_OUTPUT_BLOCKS {
            return Err(KvError::invalid_arg(format!(
                "a request holds at most {MAX_OUTPUT_BLOCKS} output blocks; {} more were asked for",
                count
            )));
        }
        let Some(load) = self.ranks.get_mut(&booking.rank) else {
            return Ok(true);
        };
        for _ in 0..count {
            let hash = output_block_id(id, booking.outputs.len() as u64);
            booking.outputs.push(hash);
            load.hold(hash);
        }
        if let Some(decay) = decay {
            for &h in booking.blocks.iter().chain(&booking.outputs) {
                if load.blocks.get(&h) == Some(&1) {
                    load.set_fraction(h, decay);
                }
            }
        }
        Ok(true)
    }

    /// Renews the request's lease: expiry counts from `now_ms` now (a long generation that is still
    /// producing tokens must not be freed). `false` for an unknown id.
    pub fn touch(&mut self, id: RequestHandle, now_ms: f64) -> bool {
        let Some(booking) = self.bookings.get_mut(&id) else {
            return false;
        };
        booking.booked_at_ms = now_ms;
        // The older entry in `order` no longer matches and is skipped by `expire`.
        self.order.push_back((now_ms, id));
        true
    }

    /// The request ended (finished, failed or cancelled): all its load ends. `false` if unknown.
    pub fn free(&mut self, id: RequestHandle) -> bool {
        let Some(booking) = self.bookings.remove(&id) else {
            return false;
        };
        if let Some(load) = self.ranks.get_mut(&booking.rank) {
            load.prefill_tokens -= booking.prefill_tokens;
            load.requests -= 1;
            for h in booking.blocks.into_iter().chain(booking.outputs) {
                load.release(h);
            }
            if load.requests == 0 {
                self.ranks.remove(&booking.rank);
            }
        }
        true
    }

    /// Frees every request booked before `cutoff_ms`; returns their handles.
    pub fn expire(&mut self, cutoff_ms: f64) -> Vec<RequestHandle> {
        let mut expired = Vec::new();
        while let Some(&(at, id)) = self.order.front() {
            if at >= cutoff_ms {
                break;
            }
            self.order.pop_front();
            if self.bookings.get(&id).is_some_and(|b| b.booked_at_ms == at) && self.free(id) {
                expired.push(id);
            }
        }
        expired
    }

    /// Frees every request booked on a rank of `worker_id`; returns their handles.
    pub fn remove_worker(&mut self, worker_id: u64) -> Vec<RequestHandle> {
        let ids: Vec<RequestHandle> =
            self.bookings.iter().filter(|(_, b)| b.rank.worker_id == worker_id).map(|(id, _)| *id).collect();
        for &id in &ids {
            self.free(id);
        }
        ids
    }

    /// The block identities a request holds (empty for an unknown id or untracked blocks): what
    /// a router replica publishes so its peers count the same blocks.
    pub fn blocks_of(&self, id: RequestHandle) -> &[u64] {
        self.bookings.get(&id).map_or(&[], |b| b.blocks.as_slice())
    }

    pub fn in_flight(&self) -> usize {
        self.bookings.len()
    }

    /// Per-rank figures of every rank with in-flight requests.
    pub fn snapshot(&self) -> Vec<(Rank, LoadFigures)> {
        let mut out: Vec<(Rank, LoadFigures)> = self
            .ranks
            .iter()
            .map(|(rank, l)| {
                (
                    *rank,
                    LoadFigures {
                        active_prefill_tokens: l.prefill_tokens,
                        active_blocks: l.active_blocks(),
                        new_blocks: 0,
                        requests: l.requests,
                    },
                )
            })
            .collect();
        out.sort_unstable_by_key(|(rank, _)| *rank);
        out
    }
}
