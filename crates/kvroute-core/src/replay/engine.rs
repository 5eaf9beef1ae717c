//! One simulated engine rank, the Rust twin of `ts/replay/engine.ts` (read there for the model):
//! continuous batching with chunked prefill, a prefix-caching block pool, Dynamo's admission
//! rule (a waiting request starts only when its whole context fits), recompute preemption of the
//! newest (or the oldest) running request when blocks run out (`preemption.rs`), loads from host
//! memory beside the passes, speculative decoding's multi-token steps, and Dynamo's mocker
//! timing. Every step mirrors the TypeScript
//! line for line, with the same floating-point operations in the same order, so both give
//! bit-identical reports.

use super::kv_cache::KvCache;
use super::preemption::{preemption_victim, PreemptionMode};
use super::request::SimRequest;
use super::speculative::{BurstSampler, Speculative};
use super::timing::{decode_ms, prefill_ms, TimingModel};
use std::collections::VecDeque;

mod bursts;
mod handoff;
pub(crate) use handoff::HandoffHolds;

/// Engine knobs (vLLM's names).
#[derive(Clone, Copy, Debug)]
pub struct EngineConfig {
    pub block_size: u64,
    pub num_gpu_blocks: u64,
    pub max_num_seqs: u64,
    pub max_num_batched_tokens: u64,
    /// Divides every simulated duration.
    pub speedup: f64,
    /// Divides the decode part of a pass on top of `speedup` (Dynamo's mocker
    /// `decode_speedup_ratio`: an engine that emits several tokens a step, as with speculative
    /// decoding, modelled as a faster step). 1: none.
    pub decode_speedup: f64,
    /// Multi-token decode steps (MTP, EAGLE), as Dynamo's mocker samples them; off by default.
    pub speculative: Speculative,
    pub timing: TimingModel,
    /// Blocks of host memory behind the GPU pool (CPU offload); 0: none.
    pub host_blocks: u64,
    /// Time to load one block from host memory back to the GPU (ms, before `speedup`): the request
    /// waits for its load beside the passes, one load at a time per rank.
    pub host_load_ms_per_block: f64,
    /// Which running request is preempted when blocks run out (`preemption.rs`).
    pub preemption_mode: PreemptionMode,
}

/// What `Engine::ensure_preempting` achieved.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Room {
    /// The request has its blocks.
    Made,
    /// None is left to preempt; the request still runs.
    Full,
    /// The request itself was preempted.
    Preempted,
}

/// What a pass produced, besides the KV events left in the pool's buffer.
#[derive(Default)]
pub(crate) struct PassOutput {
    pub first_tokens: Vec<u32>,
    pub finished: Vec<u32>,
}

pub(crate) struct Engine {
    pub cache: KvCache,
    config: EngineConfig,
    waiting: VecDeque<u32>,
    prefill: VecDeque<u32>,
    decode: Vec<u32>,
    /// Requests whose prefix is loading back from host memory, in the order their loads end (see
    /// the TypeScript twin).
    loading: VecDeque<u32>,
    /// Requests whose load ended, next to prefill (before any waiting request: they hold blocks).
    loaded: VecDeque<u32>,
    /// When the host-to-GPU link is free again (ms).
    link_free_ms: f64,
    /// Requests that left the queue so far: the next one's `admitted_seq`.
    admissions: u64,
    /// Every gap between two consecutive tokens of a request (ms).
    pub token_gaps: Vec<f64>,
    batch: Vec<u32>,
    produced: Vec<u32>,
    /// This pass's first tokens so far (copied to its output at the end): like `produced`, a
    /// request preempted after the decode loop served it has its token taken back.
    pass_first_tokens: Vec<u32>,
    /// Tokens this pass emitted after another of the same request (speculative bursts): each is
    /// an inter-token gap of 0.
    burst_followers: usize,
    bursts: Option<BurstSampler>,
    /// Speculative decode steps of requests past their first token, and the tokens they drew
    /// before a request's end cut a burst: their ratio is the mean accept length Dynamo reports.
    pub decode_steps: u64,
    pub drawn_tokens: u64,
    /// Disaggregated handoffs in progress (`engine/handoff.rs`).
    pub holds: HandoffHolds,
}

impl Engine {
    /// `rank`: the rank's position in its fleet, which seeds its speculative draws.
    pub fn new(config: EngineConfig, worker_id: u64, dp_rank: u32, rank: u32) -> Self {
        Self {
            cache: KvCache::new(config.num_gpu_blocks as usize, config.host_blocks as usize, worker_id, dp_rank),
            config,
            waiting: VecDeque::new(),
            prefill: VecDeque::new(),
            decode: Vec::new(),
            loading: VecDeque::new(),
            loaded: VecDeque::new(),
            link_free_ms: 0.0,
            admissions: 0,
            token_gaps: Vec::new(),
            batch: Vec::new(),
            produced: Vec::new(),
            pass_first_tokens: Vec::new(),
            burst_followers: 0,
            bursts: config.speculative.enabled().then(|| BurstSampler::new(config.speculative, rank)),
            decode_steps: 0,
            drawn_tokens: 0,
            holds: HandoffHolds::default(),
        }
    }

    pub fn idle(&self) -> bool {
        self.waiting.is_empty()
            && self.prefill.is_empty()
            && self.decode.is_empty()
            && self.loading.is_empty()
            && self.loaded.is_empty()
    }

    fn running(&self) -> u64 {
        (self.prefill.len() + self.decode.len()) as u64
    }

    /// When the first load from host memory in flight ends, if any: a pass that ran nothing
    /// (duration 0, no output) while loads are in flight leaves the rank waiting until then, or
    /// until a request arrives, which may run at once beside the loads.
    pub fn next_load_ready_ms(&self, reqs: &[SimRequest]) -> Option<f64> {
        self.loading.front().map(|&uid| reqs[uid as usize].load_ready_ms)
    }

    pub fn enqueue(&mut self, uid: u32) {
        self.waiting.push_back(uid);
    }

    /// Makes `r`'s blocks cover its first `tokens` tokens; false when the pool is full.
    fn ensure(&mut self, r: &mut SimRequest, tokens: u64) -> bool {
        let bs = self.config.block_size;
        let want_prompt = ((tokens / bs) as usize).min(r.prompt.len());
        if r.prompt_taken < want_prompt {
            let parent = if r.prompt_taken > 0 { Some(r.prompt[r.prompt_taken - 1].seq) } else { None };
            let slice = &r.prompt[r.prompt_taken..want_prompt];
            let taken = self.cache.use_blocks(slice, parent);
            r.held.extend_from_slice(&slice[..taken]);
            let short = taken < slice.len();
            r.prompt_taken += taken;
            if short {
                return false;
            }
        }
        let full = tokens / bs;
        while r.prompt_taken as u64 + r.output_full < full {
            if !r.partial {
                if !self.cache.use_private() {
                    return false;
                }
                r.partial = true;
            }
            let block = r.output_block(r.output_full);
            let parent = r.held.last().map(|b| b.seq);
            self.cache.promote(block, parent);
            r.held.push(block);
            r.output_full += 1;
            r.partial = false;
        }
        if !tokens.is_multiple_of(bs) && !r.partial {
            if !self.cache.use_private() {
                return false;
            }
            r.partial = true;
        }
        true
    }

    fn release_all(&mut self, r: &mut SimRequest) {
        self.drop_blocks(r);
        r.forget_blocks();
    }

    /// Gives the request's blocks back to the pool (cached, when full) and forgets which it took.
    fn drop_blocks(&mut self, r: &mut SimRequest) {
        self.cache.release(&r.held);
        if r.partial {
            self.cache.release_private();
        }
        r.held.clear();
        r.partial = false;
        r.prompt_taken = 0;
        r.output_full = 0;
    }

    /// Preempts the running request the rank's mode picks so that `current` can go on (see
    /// `preemption.rs`) and returns it; `None` when there is none. The victim may be `current`.
    fn preempt(&mut self, reqs: &mut [SimRequest], current: Option<u32>) -> Option<u32> {
        let running = self.decode.iter().chain(self.prefill.iter()).copied();
        let victim = preemption_victim(self.config.preemption_mode, running, reqs, current)?;
        self.requeue(reqs, victim);
        Some(victim)
    }

    fn requeue(&mut self, reqs: &mut [SimRequest], uid: u32) {
        let r = &mut reqs[uid as usize];
        if r.in_decode {
            if let Some(i) = self.decode.iter().position(|&x| x == uid) {
                self.decode.remove(i);
            }
        } else if let Some(i) = self.prefill.iter().position(|&x| x == uid) {
            self.prefill.remove(i);
        }
        r.in_decode = false;
        self.release_all(r);
        r.preemptions += 1;
        self.waiting.push_front(uid);
        // Served earlier in this pass (FIFO takes the oldest, which the decode loop serves
        // first): its token is taken back, as vLLM preempts while it schedules.
        if let Some(i) = self.produced.iter().position(|&x| x == uid) {
            self.produced.remove(i);
            r.generated -= 1;
        }
        if let Some(i) = self.pass_first_tokens.iter().position(|&x| x == uid) {
            self.pass_first_tokens.remove(i);
            r.generated = 0;
        }
    }

    /// How many leading blocks of the request may come from a cache: vLLM computes at least the
    /// context's last token (its logits sample the next one), so a context that is all cached
    /// recomputes its last block when it ends on a block boundary (Dynamo's mocker does the same).
    fn cacheable_blocks(&self, r: &SimRequest) -> usize {
        r.prompt.len().min((r.context().saturating_sub(1) / self.config.block_size) as usize)
    }

    /// Blocks of a cached prefix of `found` blocks the request reuses: with speculative decoding
    /// vLLM recomputes the last one (the drafter needs its hidden states), as Dynamo's mocker
    /// models it.
    fn reused_blocks(&self, found: usize) -> usize {
        if self.config.speculative.enabled() {
            found.saturating_sub(1)
        } else {
            found
        }
    }

    /// Takes the request's cached prefix: its GPU hit, then the blocks host memory holds right
    /// after it, loaded back as far as the GPU pool has room. Returns how many were loaded.
    fn admit(&mut self, r: &mut SimRequest, now: f64) -> u64 {
        // A decode leg whose KV arrived into blocks reserved for it (`engine/handoff.rs`).
        if r.kv_reserved {
            self.arrived_started();
            r.kv_reserved = false;
            r.admitted = true;
            r.prefilled = r.input_length;
            return 0;
        }
        let bs = self.config.block_size;
        let limit = self.cacheable_blocks(r);
        let found = self.cache.prefix_hit(&r.prompt).min(limit);
        let found_host = self.cache.host.as_ref().map_or(0, |h| h.prefix_hit(&r.prompt, found).min(limit - found));
        // The block recomputed under speculative decoding is the prefix's last: host memory's
        // when the prefix continues there.
        let reused = self.reused_blocks(found + found_host);
        let hit = found.min(reused);
        let offloaded = reused - hit;
        let first = r.first_admit_ms < 0.0;
        if first {
            r.first_admit_ms = now;
        }
        r.admitted = true;
        // Cached blocks are in the pool already: taking them cannot fail.
        self.ensure(r, hit as u64 * bs);
        if offloaded > 0 {
            if self.config.host_load_ms_per_block > 0.0 {
                self.take_loading(r, hit + offloaded);
            } else {
                self.ensure(r, (hit + offloaded) as u64 * bs);
            }
            if let Some(host) = &mut self.cache.host {
                host.load(&r.prompt[hit..r.prompt_taken]);
            }
        }
        let cached = (r.prompt_taken as u64 * bs).min(r.input_length);
        // The best over admissions, as Dynamo reports it: a decode leg comes here only when it
        // recomputes after a preemption (its first admission, with the KV it received, counts
        // none: see the top of this function).
        r.reused_tokens = r.reused_tokens.max(cached);
        if first {
            r.first_reused_tokens = cached;
        }
        r.prefilled = cached;
        (r.prompt_taken - hit) as u64
    }

    /// Takes the prompt blocks up to `end` that a load from host memory fills: out of other
    /// requests' reach until the load ends (see `KvCache::use_loading`).
    fn take_loading(&mut self, r: &mut SimRequest, end: usize) {
        let parent = if r.prompt_taken > 0 { Some(r.prompt[r.prompt_taken - 1].seq) } else { None };
        let taken = self.cache.use_loading(&r.prompt[r.prompt_taken..end], parent, &mut r.load_stored);
        r.held.extend_from_slice(&r.prompt[r.prompt_taken..r.prompt_taken + taken]);
        r.prompt_taken += taken;
    }

    /// Whether the request's prefix continues in blocks another request is loading from host
    /// memory: it waits until that load ends and then finds them on the GPU (see the TypeScript
    /// twin).
    fn waits_for_a_load(&self, r: &SimRequest) -> bool {
        let limit = self.cacheable_blocks(r);
        let hit = self.cache.prefix_hit(&r.prompt).min(limit);
        hit < limit && self.cache.is_loading(&r.prompt[hit])
    }

    /// The waiting request to start next (its position), or `None`: in order, the first that
    /// does not fit stops the walk (Dynamo's rule), and one waiting for another's load is passed
    /// over.
    fn next_to_start(&self, reqs: &[SimRequest]) -> Option<usize> {
        if self.running() >= self.config.max_num_seqs {
            return None;
        }
        if let Some(i) = self.first_arrived(reqs) {
            return Some(i);
        }
        if !self.may_start() {
            return None;
        }
        for (i, &uid) in self.waiting.iter().enumerate() {
            let r = &reqs[uid as usize];
            if !self.fits(reqs, r) {
                return None;
            }
            if self.loading.is_empty() || !self.waits_for_a_load(r) {
                return Some(i);
            }
        }
        None
    }

    /// Blocks a request needs beyond those it holds to cover its context.
    fn still_needed(&self, r: &SimRequest) -> u64 {
        r.context().div_ceil(self.config.block_size).saturating_sub(r.held.len() as u64 + u64::from(r.partial))
    }

    /// Dynamo's vLLM admission rule: a waiting request starts only when its whole known context
    /// fits in the blocks no running request holds (its prefix blocks that are in use cost
    /// nothing). A request admitted on room for one chunk would be the first preempted when the
    /// running requests grow, and come back to find its own blocks cached.
    fn fits(&self, reqs: &[SimRequest], r: &SimRequest) -> bool {
        // Requests loading from host memory (or loaded, about to prefill) will need the rest of
        // their context: that room is spoken for, as Dynamo reserves it for in-flight loads.
        let promised: u64 =
            self.loading.iter().chain(&self.loaded).map(|&x| self.still_needed(&reqs[x as usize])).sum();
        let room = self.config.num_gpu_blocks.saturating_sub(self.cache.used() as u64).saturating_sub(promised);
        let blocks = r.context().div_ceil(self.config.block_size);
        // Without pressure the whole context fits outright: no need to walk the prefix.
        if blocks <= room {
            return true;
        }
        let hit = self.reused_blocks(self.cache.prefix_hit(&r.prompt).min(self.cacheable_blocks(r)));
        blocks - (self.cache.active_prefix(&r.prompt, hit) as u64) <= room
    }

    /// `ensure`, preempting as the mode says until it succeeds.
    fn ensure_preempting(&mut self, reqs: &mut [SimRequest], uid: u32, tokens: u64) -> Room {
        while !self.ensure(&mut reqs[uid as usize], tokens) {
            match self.preempt(reqs, Some(uid)) {
                None => return Room::Full,
                Some(victim) if victim == uid => return Room::Preempted,
                Some(_) => {}
            }
        }
        Room::Made
    }

    fn dynamo_decode_ms(&self, reqs: &[SimRequest]) -> f64 {
        let bs = self.config.block_size;
        // Without speculation the first token comes from the prefill's forward; with it, the
        // first step after prefill is a decode forward too (Dynamo's mocker).
        let first_from_prefill = !self.config.speculative.enabled();
        let mut blocks = 0u64;
        let mut decoding = false;
        for &uid in &self.decode {
            let r = &reqs[uid as usize];
            // A decode leg's first token needs a forward of its own: the prefill's ran elsewhere.
            if (r.just_prefilled && first_from_prefill && r.remote_tokens == 0) || !r.in_decode {
                continue;
            }
            decoding = true;
            blocks += r.context().div_ceil(bs);
        }
        if decoding {
            decode_ms(blocks as f64 / self.config.num_gpu_blocks as f64)
        } else {
            0.0
        }
    }

    /// One engine pass starting at `now`: a prefill step, then a decode step. Returns its
    /// duration (0 when nothing could run); first tokens and completions go to `out`, KV events
    /// to the pool's buffer.
    pub fn step(&mut self, now: f64, reqs: &mut [SimRequest], out: &mut PassOutput) -> f64 {
        let cfg = self.config;
        let dynamo = cfg.timing == TimingModel::Dynamo;
        let mut budget = cfg.max_num_batched_tokens as i64 - self.decode.len() as i64;
        let mut prefill_time = 0.0;
        let mut prefill_tokens = 0u64;
        // Before anything can be preempted: the lists a preemption takes a token back from.
        self.produced.clear();
        self.pass_first_tokens.clear();
        // Loads that ended: those requests prefill next, their blocks in place.
        while let Some(&uid) = self.loading.front() {
            if reqs[uid as usize].load_ready_ms > now {
                break;
            }
            self.loading.pop_front();
            let r = &mut reqs[uid as usize];
            r.load_ready_ms = -1.0;
            self.cache.loaded(&mut r.load_stored);
            self.loaded.push_back(uid);
        }
        while budget > 0 {
            if self.prefill.is_empty() {
                if let Some(uid) = self.loaded.pop_front() {
                    self.prefill.push_back(uid);
                } else {
                    let Some(i) = self.next_to_start(reqs) else { break };
                    let next = self.waiting.remove(i).expect("next_to_start gives a position in the queue");
                    self.admissions += 1;
                    reqs[next as usize].admitted_seq = self.admissions;
                    self.prefill.push_back(next);
                }
            }
            let uid = self.prefill[0];
            if !reqs[uid as usize].admitted {
                let loaded = self.admit(&mut reqs[uid as usize], now);
                let load_ms = loaded as f64 * cfg.host_load_ms_per_block / cfg.speedup;
                if load_ms > 0.0 {
                    let ready_ms = now.max(self.link_free_ms) + load_ms;
                    reqs[uid as usize].load_ready_ms = ready_ms;
                    self.link_free_ms = ready_ms;
                    self.prefill.pop_front();
                    self.loading.push_back(uid);
                    continue;
                }
            }
            let r = &reqs[uid as usize];
            // Received KV (see `SimRequest::remote_tokens`) is filled in whole, without compute
            // and outside the pass's token budget (a compute budget); what is left is computed,
            // chunked as usual.
            let pulled = r.remote_tokens.min(r.context()).saturating_sub(r.prefilled);
            let computed = (r.context() - r.prefilled - pulled).min(budget as u64);
            let chunk = pulled + computed;
            let target = r.prefilled + chunk;
            match self.ensure_preempting(reqs, uid, target) {
                Room::Made => {}
                // Requests whose KV arrived hold blocks it needs and cannot start behind it: it
                // yields its own (vLLM preempts it and serves the arrived KV first).
                Room::Full if self.has_arrived() => {
                    self.requeue(reqs, uid);
                    continue;
                }
                _ => break,
            }
            if !dynamo {
                prefill_time += prefill_ms(computed as f64);
            }
            prefill_tokens += computed;
            let r = &mut reqs[uid as usize];
            r.prefilled += chunk;
            budget -= computed as i64;
            if r.prefilled < r.context() {
                break;
            }
            self.prefill.pop_front();
            r.just_prefilled = r.generated == 0;
            r.in_decode = true;
            self.decode.push(uid);
        }
        if dynamo {
            prefill_time = prefill_ms(prefill_tokens as f64);
        }
        out.first_tokens.clear();
        out.finished.clear();
        self.burst_followers = 0;
        let mut decode_time = 0.0;
        if self.bursts.is_some() {
            self.reserve_bursts(reqs);
        }
        if !self.decode.is_empty() {
            decode_time = if dynamo {
                self.dynamo_decode_ms(reqs)
            } else {
                decode_ms(self.cache.used() as f64 / cfg.num_gpu_blocks as f64)
            };
            // A snapshot: finishing and preemption remove requests from `decode` during the loop.
            let mut batch = std::mem::take(&mut self.batch);
            batch.clear();
            batch.extend_from_slice(&self.decode);
            for &uid in &batch {
                let r = &mut reqs[uid as usize];
                if !r.in_decode {
                    continue;
                }
                if self.bursts.is_some() {
                    let first = r.just_prefilled;
                    r.just_prefilled = false;
                    let burst = self.speculative_step(reqs, uid, first);
                    reqs[uid as usize].generated += burst;
                    self.burst_followers += (burst - 1) as usize;
                    if first {
                        self.pass_first_tokens.push(uid);
                    } else {
                        self.produced.push(uid);
                    }
                } else if r.just_prefilled {
                    // The pass that completes a prefill produces the first token.
                    r.just_prefilled = false;
                    r.generated = 1;
                    self.pass_first_tokens.push(uid);
                } else {
                    // The pass computes the KV of the last token sampled (the context's last)
                    // and samples one more, whose KV the next pass computes: blocks cover the
                    // context, as in vLLM and Dynamo's mocker.
                    let target = r.context();
                    match self.ensure_preempting(reqs, uid, target) {
                        Room::Made => {}
                        // With none to preempt (LIFO: it is the newest), it yields its own blocks.
                        Room::Full => {
                            self.requeue(reqs, uid);
                            continue;
                        }
                        Room::Preempted => continue,
                    }
                    reqs[uid as usize].generated += 1;
                    self.produced.push(uid);
                }
                let r = &mut reqs[uid as usize];
                if r.generated >= r.output_length {
                    if let Some(i) = self.decode.iter().position(|&x| x == uid) {
                        self.decode.remove(i);
                    }
                    r.in_decode = false;
                    if self.holds.holds_sources {
                        self.hold_source(r);
                    } else {
                        self.release_all(r);
                    }
                    out.finished.push(uid);
                }
            }
            self.batch = batch;
        }
        // As Dynamo's mocker scales them: prefill by the speedup, decode by both ratios.
        let duration = prefill_time / cfg.speedup + decode_time / (cfg.speedup * cfg.decode_speedup);
        let end = now + duration;
        for &uid in &self.produced {
            self.token_gaps.push(end - reqs[uid as usize].last_token_ms);
        }
        self.token_gaps.extend(std::iter::repeat_n(0.0, self.burst_followers));
        out.first_tokens.extend_from_slice(&self.pass_first_tokens);
        for &uid in &out.first_tokens {
            reqs[uid as usize].first_token_ms = end;
        }
        for &uid in &self.decode {
            let r = &mut reqs[uid as usize];
            if r.generated > 0 {
                r.last_token_ms = end;
            }
        }
        for &uid in &out.finished {
            reqs[uid as usize].last_token_ms = end;
        }
        duration
    }
}
