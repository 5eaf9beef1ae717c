//! A rank's side of the disaggregated handoff, as Dynamo's vLLM scheduler runs it (source first):
//! a prefill rank holds a finished leg's blocks until its KV has reached the decode rank; a decode
//! rank reserves the prompt's blocks before the transfer starts, in the order requests came, the
//! first one that finds no room holding back the rest (no running request is preempted for it),
//! and the request joins the waiting queue, its KV in place, once the transfer ends. Holding both
//! ends costs memory on both pools while the KV is in flight, which a plain delay does not (and
//! the transfer waits for room on the decode rank). The Rust twin of `ts/replay/handoff-holds.ts`
//! (and of the engine's calls into it in `ts/replay/engine.ts`); the clock's side is in
//! `fleet.rs`.

use super::Engine;
use crate::replay::kv_cache::Block;
use crate::replay::request::SimRequest;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// What a rank holds for handoffs in progress.
#[derive(Default)]
pub(crate) struct HandoffHolds {
    /// Prefill rank: a finished leg's blocks stay in use until its KV has been sent.
    pub holds_sources: bool,
    /// uid → (blocks, whether a partial block is held too).
    sources: FxHashMap<u32, (Vec<Block>, bool)>,
    /// Decode rank: requests handed over and waiting for room to receive their KV into.
    pending: VecDeque<u32>,
    /// Requests whose blocks are reserved and whose KV is on its way.
    in_transit: usize,
    /// Requests whose KV has arrived, waiting to run.
    arrived: usize,
    /// Requests accepted so far: the next one's `transfer_seq`.
    accepted: u64,
}

impl Engine {
    /// Whether an event will come that changes what this rank can run: the end of a transfer
    /// it sends (a held source) or receives (a reservation). A pass that runs nothing waits for it.
    pub(crate) fn awaits_transfers(&self) -> bool {
        !self.holds.sources.is_empty() || self.holds.in_transit > 0
    }

    /// Whether a handed-over request still waits for room to receive its KV into.
    pub(crate) fn has_pending_destinations(&self) -> bool {
        !self.holds.pending.is_empty()
    }

    /// A prefill leg finished: its blocks stay in use until [`Engine::release_source`].
    pub(super) fn hold_source(&mut self, r: &mut SimRequest) {
        let blocks = std::mem::take(&mut r.held);
        self.holds.sources.insert(r.uid, (blocks, r.partial));
        r.partial = false;
        r.forget_blocks();
    }

    /// The KV of a held leg has reached its decode rank: its blocks go back to the pool (cached).
    pub(crate) fn release_source(&mut self, uid: u32) {
        if let Some((blocks, partial)) = self.holds.sources.remove(&uid) {
            self.cache.release(&blocks);
            if partial {
                self.cache.release_private();
            }
        }
    }

    /// A request handed over to this decode rank waits for its reservation (`reserve_pending`).
    pub(crate) fn accept_destination(&mut self, r: &mut SimRequest) {
        self.holds.accepted += 1;
        r.transfer_seq = self.holds.accepted;
        self.holds.pending.push_back(r.uid);
    }

    /// Reserves the blocks of the pending requests, in order, while the rank runs fewer than
    /// `max_num_seqs` requests and the pool has room (a block cached here already is reused;
    /// cached blocks no request uses are evicted; none in use is taken). Puts in `reserved` each
    /// request whose transfer may start, with the prompt tokens this rank lacked (its fresh
    /// blocks, whole).
    pub(crate) fn reserve_pending(&mut self, reqs: &mut [SimRequest], reserved: &mut Vec<(u32, u64)>) {
        while let Some(&uid) = self.holds.pending.front() {
            if self.running() >= self.config.max_num_seqs {
                return;
            }
            let r = &mut reqs[uid as usize];
            let prompt = r.input_length;
            let resident = self.cache.prefix_hit(&r.prompt);
            if !self.ensure(r, prompt) {
                self.drop_blocks(r);
                return;
            }
            self.holds.pending.pop_front();
            self.holds.in_transit += 1;
            r.kv_reserved = true;
            let fresh = (r.held.len() - resident) as u64 + u64::from(r.partial);
            reserved.push((uid, fresh * self.config.block_size));
        }
    }

    /// A reserved request's KV has arrived: it waits among the others whose KV arrived in the
    /// order the handoffs came ([`Engine::first_arrived`] starts them before any other).
    pub(crate) fn activate(&mut self, reqs: &[SimRequest], uid: u32) {
        self.holds.in_transit -= 1;
        self.holds.arrived += 1;
        let seq = reqs[uid as usize].transfer_seq;
        let at = self
            .waiting
            .iter()
            .position(|&w| reqs[w as usize].kv_reserved && reqs[w as usize].transfer_seq > seq)
            .unwrap_or(self.waiting.len());
        self.waiting.insert(at, uid);
    }

    /// The first waiting request whose KV has arrived (its position): it starts before any
    /// other, wherever a preemption put those (vLLM serves the requests whose remote KV arrived
    /// before its waiting queue). It holds its blocks, so it always fits.
    pub(super) fn first_arrived(&self, reqs: &[SimRequest]) -> Option<usize> {
        if self.holds.arrived == 0 {
            return None;
        }
        self.waiting.iter().position(|&w| reqs[w as usize].kv_reserved)
    }

    /// Whether requests whose KV has arrived wait to run.
    pub(super) fn has_arrived(&self) -> bool {
        self.holds.arrived > 0
    }

    /// An arrived request leaves the waiting queue.
    pub(super) fn arrived_started(&mut self) {
        self.holds.arrived -= 1;
    }

    /// Whether a waiting request that must compute its KV may start now: not while a handoff
    /// waits for room here (the reservation comes first, as in Dynamo's scheduler).
    pub(super) fn may_start(&self) -> bool {
        self.holds.pending.is_empty()
    }
}
