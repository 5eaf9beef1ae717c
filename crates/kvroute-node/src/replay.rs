//! The `NativeReplayFleet` class: kvroute-core's replay `Fleet` (the engine ranks of one
//! simulated policy run). The TypeScript loop wakes it with `run` and reads what a pass
//! produced; quiet engine passes never cross into JavaScript.

use crate::convert::{guard, invalid_arg, to_node_error};
use crate::index::NativeKvIndex;
use kvroute_core::replay::{
    EngineConfig, Fleet, FleetRank, HandoffDelay, PreemptionMode, RankRole, Speculative, TimingModel, Wake,
    MAX_DRAFT_TOKENS,
};
use napi::bindgen_prelude::{Float64Array, Float64ArraySlice, Uint32Array};
use napi::Result;
use napi_derive::napi;
use std::sync::Arc;

/// Numbers per request in `outcomes`: arrival, first token, last token (ms), reused prompt
/// tokens (the best over admissions, then at the first), preemptions.
const OUTCOME_FIGURES: usize = 6;

fn count_arg(value: f64, name: &str) -> Result<u64, &'static str> {
    if !(value >= 0.0 && value.fract() == 0.0 && value < 9_007_199_254_740_992.0) {
        return Err(invalid_arg(format!("{name} must be a non-negative safe integer")));
    }
    Ok(value as u64)
}

/// Draft tokens, seed, then the drafts' acceptance rates (range checks are the core's).
fn speculative_arg(numbers: &[f64]) -> Result<Speculative, &'static str> {
    let [draft_tokens, seed, rates @ ..] = numbers else {
        return Err(invalid_arg("speculative config must start with the draft tokens and the seed"));
    };
    let draft_tokens = count_arg(*draft_tokens, "speculative draftTokens")?;
    if draft_tokens as usize > MAX_DRAFT_TOKENS || rates.len() != draft_tokens as usize {
        return Err(invalid_arg(format!(
            "speculative config must have at most {MAX_DRAFT_TOKENS} draft tokens (0: none), each with its acceptance rate"
        )));
    }
    let seed = count_arg(*seed, "speculative seed")?;
    let Ok(seed) = u32::try_from(seed) else {
        return Err(invalid_arg("speculative seed must be below 2^32"));
    };
    let mut accept_rates = [0.0; MAX_DRAFT_TOKENS];
    accept_rates[..rates.len()].copy_from_slice(rates);
    Ok(Speculative { draft_tokens: draft_tokens as u32, accept_rates, seed })
}

#[napi]
pub struct NativeReplayFleet {
    inner: Fleet,
}

#[napi]
impl NativeReplayFleet {
    /// `engine`: block size, GPU blocks, max sequences, max batched tokens (integers), the
    /// speedup, host-memory blocks (an integer; 0: no CPU offload), the ms to load one block
    /// back from host memory and the decode speedup; `speculative`: draft tokens (0: none), the
    /// seed, then one acceptance rate per draft; `timing`: "dynamo" or "classic"; `preemption`:
    /// "lifo" or "fifo"; one rank per (`workers[i]`, `dpRanks[i]`), serving as `roles[i]` says
    /// (0 aggregated, 1 prefill, 2 decode).
    #[napi(constructor)]
    #[allow(clippy::too_many_arguments)] // flat arguments: a JS constructor call, converted once
    pub fn new(
        engine: &[f64],
        speculative: &[f64],
        timing: String,
        preemption: String,
        workers: &[f64],
        dp_ranks: &[u32],
        roles: &[u32],
        requests: u32,
        publish_events: bool,
    ) -> Result<Self, &'static str> {
        guard(|| {
            let &[block_size, gpu, seqs, batched, speedup, host_blocks, host_load_ms_per_block, decode_speedup] =
                engine
            else {
                return Err(invalid_arg("engine config must have 8 numbers"));
            };
            let timing = match timing.as_str() {
                "dynamo" => TimingModel::Dynamo,
                "classic" => TimingModel::Classic,
                other => return Err(invalid_arg(format!("timing must be 'dynamo' or 'classic', got {other:?}"))),
            };
            let preemption_mode = match preemption.as_str() {
                "lifo" => PreemptionMode::Lifo,
                "fifo" => PreemptionMode::Fifo,
                other => return Err(invalid_arg(format!("preemptionMode must be 'lifo' or 'fifo', got {other:?}"))),
            };
            if workers.len() != dp_ranks.len() || workers.len() != roles.len() {
                return Err(invalid_arg("workers, dp ranks and roles differ in length"));
            }
            let ranks = workers
                .iter()
                .zip(dp_ranks)
                .zip(roles)
                .map(|((&w, &dp_rank), &role)| {
                    let role = match role {
                        0 => RankRole::Aggregated,
                        1 => RankRole::Prefill,
                        2 => RankRole::Decode,
                        _ => return Err(invalid_arg(format!("a rank's role must be 0, 1 or 2, got {role}"))),
                    };
                    Ok(FleetRank { worker_id: count_arg(w, "worker id")?, dp_rank, role })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let speculative = speculative_arg(speculative)?;
            let config = EngineConfig {
                block_size: count_arg(block_size, "blockSize")?,
                num_gpu_blocks: count_arg(gpu, "numGpuBlocks")?,
                max_num_seqs: count_arg(seqs, "maxNumSeqs")?,
                max_num_batched_tokens: count_arg(batched, "maxNumBatchedTokens")?,
                speedup,
                decode_speedup,
                speculative,
                timing,
                host_blocks: count_arg(host_blocks, "cpuOffloadBlocks")?,
                host_load_ms_per_block,
                preemption_mode,
            };
            let inner = Fleet::new(config, &ranks, requests as usize, publish_events).map_err(to_node_error)?;
            Ok(Self { inner })
        })
    }

    /// Disaggregated: a prefill leg's KV reaches its decode rank `fixed_ms` + `ms_per_token` per
    /// prompt token (per token that rank lacked, with `destination_missing`) after the rank
    /// reserved room for it.
    #[napi(js_name = "setHandoffDelay")]
    pub fn set_handoff_delay(
        &mut self,
        fixed_ms: f64,
        ms_per_token: f64,
        destination_missing: bool,
    ) -> Result<(), &'static str> {
        guard(|| {
            self.inner
                .set_handoff_delay(HandoffDelay { fixed_ms, ms_per_token, destination_missing })
                .map_err(to_node_error)
        })
    }

    /// Delivers every pass's KV events to this index (one per router replica).
    #[napi(js_name = "attachIndex")]
    pub fn attach_index(&mut self, index: &NativeKvIndex) {
        self.inner.attach_index(Arc::clone(&index.inner));
    }

    #[napi]
    pub fn load(&mut self, at: &[f64], uids: &[u32]) -> Result<(), &'static str> {
        guard(|| self.inner.load(at, uids).map_err(to_node_error))
    }

    #[napi(js_name = "setNextTurn")]
    pub fn set_next_turn(&mut self, prev: u32, next: u32, delay_ms: f64) -> Result<(), &'static str> {
        guard(|| self.inner.set_next_turn(prev, next, delay_ms).map_err(to_node_error))
    }

    #[napi(js_name = "addRequest")]
    pub fn add_request(
        &mut self,
        uid: u32,
        input_length: f64,
        output_length: f64,
        seqs: &[u64],
        locals: &[u64],
    ) -> Result<(), &'static str> {
        guard(|| {
            let input = count_arg(input_length, "inputLength")?;
            let output = count_arg(output_length, "outputLength")?;
            self.inner.add_request(uid, input, output, seqs, locals).map_err(to_node_error)
        })
    }

    #[napi]
    pub fn enqueue(&mut self, rank: u32, uid: u32) -> Result<(), &'static str> {
        guard(|| self.inner.enqueue(rank as usize, uid).map_err(to_node_error))
    }

    /// Runs to the next wake: 0 done, 1 an arrival, 2 a pass with output, 3 a handoff. `header`
    /// gets the clock and the subject (the arriving or handed-over uid, or the rank whose pass
    /// ended).
    #[napi]
    pub fn run(&mut self, mut header: Float64ArraySlice<'_>) -> Result<u32, &'static str> {
        guard(|| {
            if header.len() < 2 {
                return Err(invalid_arg("run needs a header of 2 numbers"));
            }
            let wake = self.inner.run().map_err(to_node_error)?;
            // Safety: this call runs synchronously on the JavaScript thread, so no JavaScript can
            // touch `header` while it is written; the TypeScript wrapper owns it.
            let header = unsafe { header.as_mut() };
            header[0] = self.inner.clock();
            let (kind, subject) = match wake {
                Wake::Done => (0, 0.0),
                Wake::Arrival(uid) => (1, f64::from(uid)),
                Wake::Output(rank) => (2, rank as f64),
                Wake::Handoff(uid) => (3, f64::from(uid)),
            };
            header[1] = subject;
            Ok(kind)
        })
    }

    #[napi(js_name = "firstTokens")]
    pub fn first_tokens(&self, rank: u32) -> Uint32Array {
        Uint32Array::new(self.inner.first_tokens(rank as usize).to_vec())
    }

    #[napi]
    pub fn finished(&self, rank: u32) -> Uint32Array {
        Uint32Array::new(self.inner.finished(rank as usize).to_vec())
    }

    /// Waits until the KV events sent so far are visible in the indexes.
    #[napi(js_name = "syncIndexes")]
    pub fn sync_indexes(&mut self) -> Result<(), &'static str> {
        guard(|| self.inner.sync_indexes().map_err(to_node_error))
    }

    #[napi(js_name = "upperBoundHitRatio")]
    pub fn upper_bound_hit_ratio(&self) -> f64 {
        self.inner.upper_bound_hit_ratio()
    }

    /// `OUTCOME_FIGURES` numbers per request, by uid.
    #[napi]
    pub fn outcomes(&self) -> Float64Array {
        let mut out = Vec::with_capacity(OUTCOME_FIGURES * self.inner.outcomes().len());
        for o in self.inner.outcomes() {
            out.extend([
                o.arrival_ms,
                o.first_token_ms,
                o.last_token_ms,
                o.reused_tokens as f64,
                o.first_reused_tokens as f64,
                f64::from(o.preemptions),
            ]);
        }
        Float64Array::new(out)
    }

    #[napi(js_name = "hostLoadedBlocks")]
    pub fn host_loaded_blocks(&self) -> f64 {
        self.inner.host_loaded_blocks() as f64
    }

    /// Speculative decode steps past first tokens, and the tokens they drew.
    #[napi(js_name = "speculativeSteps")]
    pub fn speculative_steps(&self) -> Float64Array {
        let (steps, tokens) = self.inner.speculative_steps();
        Float64Array::new(vec![steps as f64, tokens as f64])
    }

    #[napi(js_name = "tokenGaps")]
    pub fn token_gaps(&self) -> Float64Array {
        Float64Array::new(self.inner.token_gaps())
    }
}
