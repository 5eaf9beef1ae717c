//! Active load per (worker, dp rank): what a router has sent to each rank and not yet seen
//! finish. Routing weighs cache overlap against this load.
//!
//! A booked request counts its uncached prompt tokens as *prefill* load until its first token
//! (`prefill_completed`), and its prompt blocks as *decode* load until it ends (`free`). Blocks are
//! identified by sequence hash and reference-counted per rank, so in-flight requests that share
//! a prefix count its blocks once, as the engine's prefix cache does.

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
    requests: u32,
}

#[derive(Debug)]
struct Booking {
    rank: Rank,
    blocks: Vec<u64>,
    /// Prefill tokens still counted (0 once the first token was seen).
    prefill_tokens: u64,
    booked_at_ms: f64,
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
                active_blocks: load.blocks.len() as u64,
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
            *load.blocks.entry(h).or_insert(0) += 1;
        }
        self.bookings.insert(id, Booking { rank, blocks, prefill_tokens, booked_at_ms: now_ms });
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
            for h in booking.blocks {
                if let Some(count) = load.blocks.get_mut(&h) {
                    *count -= 1;
                    if *count == 0 {
                        load.blocks.remove(&h);
                    }
                }
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
                        active_blocks: l.blocks.len() as u64,
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
