//! The simulation clock of a replay: every rank of every worker, the queue of arrivals and
//! engine passes in (time, sequence) order, and the rule for when a rank's next pass starts.
//! It runs engine passes by itself and wakes its caller (the TypeScript loop that owns the
//! routers) only when a request arrives or a pass produced something a router must hear.
//! The order of events, including ties, is exactly that of `ts/replay/fleet.ts`.

use super::engine::{Engine, EngineConfig, PassOutput};
use super::event_queue::{EventQueue, Kind};
use super::handoff::{HandoffDelay, RankRole};
use super::kv_cache::{Block, PackedEvents};
use super::request::SimRequest;
use super::timing::TimingModel;
use crate::index::{packed, KvIndex};
use crate::KvError;
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// A rank of the fleet: (worker id, data-parallel rank).
#[derive(Clone, Copy, Debug)]
pub struct FleetRank {
    pub worker_id: u64,
    pub dp_rank: u32,
    pub role: RankRole,
}

/// Why [`Fleet::run`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// Every event is handled.
    Done,
    /// Request `uid` arrives: add it, route it and enqueue it on a rank, then run again. The
    /// indexes are up to date.
    Arrival(u32),
    /// The pass of this rank ended with first tokens or completions to tell the router
    /// ([`Fleet::first_tokens`], [`Fleet::finished`]). The indexes may lag: call
    /// [`Fleet::sync_indexes`] first if telling the router may make it route. A prefill rank's
    /// completions are prefill legs: their requests are handed over ([`Wake::Handoff`]), not done.
    Output(usize),
    /// Disaggregated: request `uid`'s prefill leg ended (its rank holds the KV): route it to the
    /// decode pool and enqueue it on a decode rank, then run again. Its KV is transferred once
    /// that rank has reserved room for it.
    Handoff(u32),
}

/// A request's figures at the end of the simulation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RequestOutcome {
    pub arrival_ms: f64,
    pub first_token_ms: f64,
    pub last_token_ms: f64,
    pub reused_tokens: u64,
    /// Prompt tokens found in a cache at the first admission (`reused_tokens` is the best over
    /// all admissions: a preempted request often comes back to its own blocks).
    pub first_reused_tokens: u64,
    pub preemptions: u32,
}

struct RankState {
    engine: Engine,
    role: RankRole,
    busy: bool,
    output: PassOutput,
    /// The KV events of the pass in flight.
    events: PackedEvents,
    /// When a [`Kind::LoadReady`] wake of this rank is queued for (NaN for none), so a rank
    /// that sleeps again on the same load queues it once.
    wake_at: f64,
}

/// What the previous wake left to do before the next event (besides starting the passes
/// deferred to the end of the instant).
#[derive(Clone, Copy)]
enum Resume {
    Nothing,
    /// The pass of this rank ended: the rank may start its next one.
    PassOf(usize),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum RequestState {
    Unknown,
    Added,
    Enqueued,
}

pub struct Fleet {
    config: EngineConfig,
    /// The routers' indexes: each pass's KV events go to every one, as each router replica
    /// subscribes to every engine.
    indexes: Vec<Arc<KvIndex>>,
    /// Whether events were sent to the indexes since their last flush. Nothing reads an index
    /// between two wakes, so it is flushed only when a router is about to read
    /// ([`Fleet::sync_indexes`]): one wait for the writer threads per routed request, not per pass.
    unflushed: bool,
    /// Sequence hash → the small key the pools use.
    keys: FxHashMap<u64, u32>,
    /// Each request's prompt block keys, by uid (for the hit-ratio ceiling).
    prompt_keys: Vec<Vec<u32>>,
    /// Where each request is in its life, by uid (a request is added once, then enqueued once).
    states: Vec<RequestState>,
    ranks: Vec<RankState>,
    reqs: Vec<SimRequest>,
    queue: EventQueue,
    /// Later turns of sessions: uid of the previous turn → (next uid, delay in virtual ms).
    next_turn: FxHashMap<u32, (u32, f64)>,
    /// Ranks whose next pass waits for the end of the current instant, in request order.
    to_start: Vec<usize>,
    in_to_start: Vec<bool>,
    publish_events: bool,
    /// Disaggregated: how long a prefill leg's KV takes to reach the decode pool.
    handoff: HandoffDelay,
    /// Scratch for the requests whose transfer starts, with the prompt tokens their decode rank
    /// lacked.
    reserved: Vec<(u32, u64)>,
    clock: f64,
    resume: Resume,
}

impl Fleet {
    /// A fleet of `ranks` engines for `requests` requests (uids `0..requests`).
    pub fn new(
        config: EngineConfig,
        ranks: &[FleetRank],
        requests: usize,
        publish_events: bool,
    ) -> Result<Self, KvError> {
        if config.block_size == 0
            || config.num_gpu_blocks == 0
            || config.max_num_seqs == 0
            || config.max_num_batched_tokens == 0
        {
            return Err(KvError::invalid_arg("engine sizes must be positive integers"));
        }
        if !(config.speedup.is_finite() && config.speedup > 0.0) {
            return Err(KvError::invalid_arg("speedup must be a positive number"));
        }
        if !(config.decode_speedup.is_finite() && config.decode_speedup > 0.0) {
            return Err(KvError::invalid_arg("decodeSpeedup must be a positive number"));
        }
        if !(config.host_load_ms_per_block.is_finite() && config.host_load_ms_per_block >= 0.0) {
            return Err(KvError::invalid_arg("the host load time must be a number >= 0"));
        }
        config.speculative.validate()?;
        let ranks = ranks
            .iter()
            .enumerate()
            .map(|(i, r)| RankState {
                engine: {
                    let mut engine = Engine::new(config, r.worker_id, r.dp_rank, i as u32);
                    engine.holds.holds_sources = r.role == RankRole::Prefill;
                    engine
                },
                role: r.role,
                busy: false,
                output: PassOutput::default(),
                events: PackedEvents::default(),
                wake_at: f64::NAN,
            })
            .collect::<Vec<_>>();
        let n = ranks.len();
        Ok(Self {
            config,
            indexes: Vec::new(),
            unflushed: false,
            keys: FxHashMap::default(),
            prompt_keys: vec![Vec::new(); requests],
            states: vec![RequestState::Unknown; requests],
            ranks,
            reqs: (0..requests).map(|_| SimRequest::default()).collect(),
            queue: EventQueue::default(),
            next_turn: FxHashMap::default(),
            to_start: Vec::new(),
            in_to_start: vec![false; n],
            publish_events,
            handoff: HandoffDelay::default(),
            reserved: Vec::new(),
            clock: 0.0,
            resume: Resume::Nothing,
        })
    }

    fn uid_arg(&self, uid: u32) -> Result<usize, KvError> {
        let i = uid as usize;
        if i >= self.reqs.len() {
            return Err(KvError::invalid_arg(format!("request uid {uid} is out of range (0..{})", self.reqs.len())));
        }
        Ok(i)
    }

    /// Queues the arrivals known up front (virtual ms); call once, before running.
    pub fn load(&mut self, at: &[f64], uids: &[u32]) -> Result<(), KvError> {
        if at.len() != uids.len() {
            return Err(KvError::invalid_arg("arrival times and uids differ in length"));
        }
        for &uid in uids {
            self.uid_arg(uid)?;
        }
        if at.iter().any(|t| !t.is_finite()) {
            return Err(KvError::invalid_arg("arrival times must be finite"));
        }
        self.queue.load(at, uids);
        Ok(())
    }

    /// Request `next` arrives `delay_ms` after request `prev` finished.
    pub fn set_next_turn(&mut self, prev: u32, next: u32, delay_ms: f64) -> Result<(), KvError> {
        self.uid_arg(prev)?;
        self.uid_arg(next)?;
        if !(delay_ms.is_finite() && delay_ms >= 0.0) {
            return Err(KvError::invalid_arg("a turn's delay must be a finite number >= 0"));
        }
        self.next_turn.insert(prev, (next, delay_ms));
        Ok(())
    }

    /// Disaggregated: how long a prefill leg's KV takes to reach the decode pool (default none).
    pub fn set_handoff_delay(&mut self, delay: HandoffDelay) -> Result<(), KvError> {
        delay.validate()?;
        self.handoff = delay;
        Ok(())
    }

    /// Delivers every pass's KV events to this index from now on.
    pub fn attach_index(&mut self, index: Arc<KvIndex>) {
        self.indexes.push(index);
    }

    /// The request that just arrived (after [`Wake::Arrival`]): its lengths and the sequence
    /// and local hashes of its full prompt blocks at the engine block size.
    pub fn add_request(
        &mut self,
        uid: u32,
        input_length: u64,
        output_length: u64,
        seqs: &[u64],
        locals: &[u64],
    ) -> Result<(), KvError> {
        let i = self.uid_arg(uid)?;
        if self.states[i] != RequestState::Unknown {
            return Err(KvError::invalid_arg(format!("request {uid} was added already")));
        }
        if seqs.len() != locals.len() {
            return Err(KvError::invalid_arg("sequence and local hashes differ in length"));
        }
        let mut keys = Vec::with_capacity(seqs.len());
        let prompt = seqs
            .iter()
            .zip(locals)
            .map(|(&seq, &local)| {
                let next = self.keys.len() as u32;
                let key = *self.keys.entry(seq).or_insert(next);
                keys.push(key);
                Block { key: i64::from(key), seq, local }
            })
            .collect();
        self.prompt_keys[i] = keys;
        self.reqs[i] = SimRequest::new(uid, input_length, output_length, prompt, self.clock);
        self.states[i] = RequestState::Added;
        Ok(())
    }

    /// Prompt tokens a single infinite prefix cache would have served over the requests added,
    /// in uid (trace) order: the ceiling of any policy's hit ratio.
    pub fn upper_bound_hit_ratio(&self) -> f64 {
        let mut seen = vec![false; self.keys.len()];
        let (mut hit, mut total) = (0u64, 0u64);
        for (keys, r) in self.prompt_keys.iter().zip(&self.reqs) {
            let n = keys.iter().take_while(|&&k| seen[k as usize]).count() as u64;
            hit += (n * self.config.block_size).min(r.input_length);
            total += r.input_length;
            for &k in keys {
                seen[k as usize] = true;
            }
        }
        if total > 0 {
            hit as f64 / total as f64
        } else {
            0.0
        }
    }

    /// Sends a pass's KV events to every index at once, stamped with the pass's end time: the
    /// indexes' writer threads apply them while the simulation runs on (measured: holding them
    /// for one burst per arrival took 1.3-1.5× as long on the conversation trace).
    fn deliver(&mut self, i: usize) -> Result<(), KvError> {
        let rank = &mut self.ranks[i];
        let events = &mut rank.events;
        // Decode ranks publish to no router: the decode pool's does not weigh overlap.
        if !self.publish_events || self.indexes.is_empty() || events.is_empty() || rank.role == RankRole::Decode {
            events.clear();
            return Ok(());
        }
        let decoded = packed::decode(&events.meta, &events.words)?;
        events.clear();
        if let Some((last, rest)) = self.indexes.split_last() {
            for index in rest {
                index.apply_events(decoded.clone(), self.clock)?;
            }
            last.apply_events(decoded, self.clock)?;
        }
        self.unflushed = true;
        Ok(())
    }

    /// Waits until every KV event sent so far is visible in the indexes. Done before each
    /// arrival wake; the caller asks for it before completions that may release queued routes.
    /// (Waiting before every wake cost a thread handoff per completion.)
    pub fn sync_indexes(&mut self) -> Result<(), KvError> {
        if self.unflushed {
            for index in &self.indexes {
                index.flush()?;
            }
            self.unflushed = false;
        }
        Ok(())
    }

    /// Puts a routed request in a rank's waiting queue: an arrival on an aggregated or a prefill
    /// rank, a request handed over ([`Wake::Handoff`]) on a decode rank.
    pub fn enqueue(&mut self, rank: usize, uid: u32) -> Result<(), KvError> {
        if rank >= self.ranks.len() {
            return Err(KvError::invalid_arg(format!("rank {rank} is out of range (0..{})", self.ranks.len())));
        }
        let i = self.uid_arg(uid)?;
        match self.states[i] {
            RequestState::Unknown => return Err(KvError::invalid_arg(format!("request {uid} was not added"))),
            RequestState::Enqueued => return Err(KvError::invalid_arg(format!("request {uid} is enqueued already"))),
            RequestState::Added => {}
        }
        let role = self.ranks[rank].role;
        let handed_over = self.reqs[i].handed_over;
        if handed_over != (role == RankRole::Decode) {
            return Err(KvError::invalid_arg(if handed_over {
                format!("request {uid} was handed over: it goes to a decode rank, not rank {rank}")
            } else {
                format!("rank {rank} is a decode rank: request {uid} must go through a prefill rank first")
            }));
        }
        if role == RankRole::Prefill {
            self.reqs[i].start_prefill_leg();
        }
        if role == RankRole::Decode {
            return self.accept_destination(rank, uid);
        }
        self.states[i] = RequestState::Enqueued;
        self.ranks[rank].engine.enqueue(uid);
        self.request_pass(rank)
    }

    /// A decode rank takes a handed-over request: it reserves the prompt's blocks now, or when a
    /// pass of its frees room (not while a pass is in flight, as Dynamo's scheduler), and the
    /// transfer starts once they are reserved (`engine/handoff.rs`).
    fn accept_destination(&mut self, rank: usize, uid: u32) -> Result<(), KvError> {
        let r = &mut self.reqs[uid as usize];
        let blocks = r.input_length.div_ceil(self.config.block_size);
        if blocks > self.config.num_gpu_blocks {
            return Err(KvError::invalid_arg(format!(
                "request {uid}'s prompt of {blocks} blocks cannot fit worker {}'s KV cache of {} blocks (raise --num-gpu-blocks)",
                self.ranks[rank].engine.cache.worker_id, self.config.num_gpu_blocks
            )));
        }
        r.destination_rank = rank;
        self.states[uid as usize] = RequestState::Enqueued;
        self.ranks[rank].engine.accept_destination(r);
        if !self.ranks[rank].busy {
            self.start_transfers(rank);
        }
        Ok(())
    }

    /// Reserves what a decode rank can of its pending handoffs; each transfer ends after the
    /// handoff delay.
    fn start_transfers(&mut self, rank: usize) {
        let mut reserved = std::mem::take(&mut self.reserved);
        reserved.clear();
        self.ranks[rank].engine.reserve_pending(&mut self.reqs, &mut reserved);
        for &(uid, missing_tokens) in &reserved {
            let delay = self.handoff.of(self.reqs[uid as usize].input_length, missing_tokens);
            self.queue.push(self.clock + delay, Kind::Transfer(uid));
        }
        self.reserved = reserved;
    }

    /// A transfer ended: the decode rank may run the request, the prefill rank frees its blocks.
    fn end_transfer(&mut self, uid: u32) -> Result<(), KvError> {
        let (source, destination) = {
            let r = &self.reqs[uid as usize];
            (r.source_rank, r.destination_rank)
        };
        self.ranks[destination].engine.activate(&self.reqs, uid);
        self.request_pass(destination)?;
        self.ranks[source].engine.release_source(uid);
        self.request_pass(source)?;
        self.start_deferred()
    }

    pub fn clock(&self) -> f64 {
        self.clock
    }

    fn start_pass(&mut self, i: usize) -> Result<(), KvError> {
        let rank = &mut self.ranks[i];
        if rank.busy || rank.engine.idle() {
            return Ok(());
        }
        let duration = rank.engine.step(self.clock, &mut self.reqs, &mut rank.output);
        std::mem::swap(&mut rank.events, &mut rank.engine.cache.events);
        rank.engine.cache.events.clear();
        if duration == 0.0 && rank.output.first_tokens.is_empty() && rank.output.finished.is_empty() {
            return self.sleep_on_loads(i);
        }
        rank.busy = true;
        self.queue.push(self.clock + duration, Kind::Pass(i));
        Ok(())
    }

    /// A pass that ran nothing: the rank waits for its first load from host memory to end, idle,
    /// so that a request arriving meanwhile starts at once beside the loads (Dynamo's simulator
    /// settles loads as deadlines of their own, apart from passes). The blocks the pass took for
    /// the loads are published now. With no load in flight nothing can ever run: a request is
    /// too large for the cache.
    fn sleep_on_loads(&mut self, i: usize) -> Result<(), KvError> {
        let Some(ready) = self.ranks[i].engine.next_load_ready_ms(&self.reqs) else {
            let rank = &self.ranks[i];
            // Room held for a transfer comes back when it ends, and the rank's next pass with it.
            if rank.engine.awaits_transfers() {
                return self.deliver(i);
            }
            return Err(KvError::invalid_arg(format!(
                "a request cannot fit worker {}'s KV cache of {} blocks (raise --num-gpu-blocks)",
                rank.engine.cache.worker_id, self.config.num_gpu_blocks
            )));
        };
        self.deliver(i)?;
        if self.ranks[i].wake_at != ready {
            self.ranks[i].wake_at = ready;
            self.queue.push(ready, Kind::LoadReady(i));
        }
        Ok(())
    }

    fn request_pass(&mut self, i: usize) -> Result<(), KvError> {
        if self.config.timing == TimingModel::Classic {
            return self.start_pass(i);
        }
        if !self.in_to_start[i] {
            self.in_to_start[i] = true;
            self.to_start.push(i);
        }
        Ok(())
    }

    /// Dynamo timing: passes start once every event of the current instant is handled.
    fn start_deferred(&mut self) -> Result<(), KvError> {
        if self.to_start.is_empty() || self.queue.next_at().is_some_and(|next| next <= self.clock) {
            return Ok(());
        }
        let starting = std::mem::take(&mut self.to_start);
        for &i in &starting {
            self.in_to_start[i] = false;
        }
        let mut result = Ok(());
        for &i in &starting {
            if result.is_ok() {
                result = self.start_pass(i);
            }
        }
        self.to_start = starting;
        self.to_start.clear();
        result
    }

    /// Runs until the caller must act (see [`Wake`]).
    pub fn run(&mut self) -> Result<Wake, KvError> {
        if let Resume::PassOf(i) = std::mem::replace(&mut self.resume, Resume::Nothing) {
            self.request_pass(i)?;
        }
        self.start_deferred()?;
        while let Some(e) = self.queue.pop() {
            self.clock = e.at;
            match e.kind {
                Kind::Arrival(uid) => {
                    self.sync_indexes()?;
                    return Ok(Wake::Arrival(uid));
                }
                Kind::Pass(i) => {
                    self.ranks[i].busy = false;
                    if self.ranks[i].role == RankRole::Decode {
                        self.start_transfers(i);
                    }
                    self.deliver(i)?;
                    let output = &self.ranks[i].output;
                    if !output.first_tokens.is_empty() || !output.finished.is_empty() {
                        for k in 0..output.finished.len() {
                            let uid = self.ranks[i].output.finished[k];
                            if self.ranks[i].role == RankRole::Prefill {
                                self.hand_over(i, uid);
                                continue;
                            }
                            // Finished requests are done with their blocks.
                            self.reqs[uid as usize].prompt = Vec::new();
                            if let Some(&(next, delay)) = self.next_turn.get(&uid) {
                                self.queue.push(self.clock + delay, Kind::Arrival(next));
                            }
                        }
                        self.resume = Resume::PassOf(i);
                        return Ok(Wake::Output(i));
                    }
                    self.request_pass(i)?;
                    self.start_deferred()?;
                }
                Kind::Handoff(uid) => return Ok(Wake::Handoff(uid)),
                Kind::Transfer(uid) => self.end_transfer(uid)?,
                Kind::LoadReady(i) => {
                    if self.ranks[i].wake_at == e.at {
                        self.ranks[i].wake_at = f64::NAN;
                    }
                    self.request_pass(i)?;
                    self.start_deferred()?;
                }
            }
        }
        if let Some(rank) = self.ranks.iter().find(|r| r.engine.has_pending_destinations()) {
            return Err(KvError::invalid_arg(format!(
                "a handed-over request found no room in worker {}'s KV cache of {} blocks (raise --num-gpu-blocks)",
                rank.engine.cache.worker_id, self.config.num_gpu_blocks
            )));
        }
        self.sync_indexes()?;
        Ok(Wake::Done)
    }

    /// A prefill leg ended on rank `source`, which holds its KV: the decode pool's router places
    /// the request at once.
    fn hand_over(&mut self, source: usize, uid: u32) {
        let r = &mut self.reqs[uid as usize];
        r.start_decode_leg();
        r.source_rank = source;
        self.states[uid as usize] = RequestState::Added;
        self.queue.push(self.clock, Kind::Handoff(uid));
    }

    /// First tokens of the pass that woke the caller.
    pub fn first_tokens(&self, rank: usize) -> &[u32] {
        self.ranks.get(rank).map_or(&[], |r| &r.output.first_tokens)
    }

    /// Completions of the pass that woke the caller.
    pub fn finished(&self, rank: usize) -> &[u32] {
        self.ranks.get(rank).map_or(&[], |r| &r.output.finished)
    }

    /// Each request's figures, by uid.
    pub fn outcomes(&self) -> Vec<RequestOutcome> {
        self.reqs
            .iter()
            .map(|r| RequestOutcome {
                arrival_ms: r.arrival_ms,
                first_token_ms: r.first_token_ms,
                last_token_ms: r.last_token_ms,
                reused_tokens: r.reused_tokens,
                first_reused_tokens: r.first_reused_tokens,
                preemptions: r.preemptions,
            })
            .collect()
    }

    /// Every inter-token gap, rank by rank.
    /// Blocks loaded back from host memory instead of recomputed, all ranks (CPU offload).
    pub fn host_loaded_blocks(&self) -> u64 {
        self.ranks.iter().filter_map(|r| r.engine.cache.host.as_ref()).map(|h| h.loaded).sum()
    }

    /// Speculative decode steps past first tokens and the tokens they drew, all ranks.
    pub fn speculative_steps(&self) -> (u64, u64) {
        self.ranks.iter().fold((0, 0), |(s, t), r| (s + r.engine.decode_steps, t + r.engine.drawn_tokens))
    }

    pub fn token_gaps(&self) -> Vec<f64> {
        self.ranks.iter().flat_map(|r| r.engine.token_gaps.iter().copied()).collect()
    }
}
