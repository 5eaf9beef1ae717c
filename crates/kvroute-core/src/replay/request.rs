//! A request as a simulated engine rank sees it (see `engine.rs`): its prompt's blocks, its
//! progress through prefill and decode, the blocks it holds, and what the report reads back.

use super::kv_cache::Block;

const OUTPUT_TAG: u64 = 0x6f75_7470_7574_5f62;

/// A request as an engine sees it.
#[derive(Default)]
pub(crate) struct SimRequest {
    pub uid: u32,
    pub input_length: u64,
    pub output_length: u64,
    pub prompt: Vec<Block>,
    pub arrival_ms: f64,
    pub first_admit_ms: f64,
    pub first_token_ms: f64,
    pub last_token_ms: f64,
    pub reused_tokens: u64,
    /// Prompt tokens found in a cache at the first admission, before any preemption (Dynamo's
    /// `first_admission_prefix_cache_reused_ratio` counts these).
    pub first_reused_tokens: u64,
    pub generated: u64,
    pub prefilled: u64,
    pub admitted: bool,
    /// The request's place in its rank's running order: set each time it leaves the queue (see
    /// `preemption.rs`).
    pub admitted_seq: u64,
    pub preemptions: u32,
    pub held: Vec<Block>,
    pub prompt_taken: usize,
    pub output_full: u64,
    pub partial: bool,
    pub just_prefilled: bool,
    pub in_decode: bool,
    /// While its prefix loads back from host memory: when the load ends (ms); -1 otherwise.
    pub load_ready_ms: f64,
    /// While it loads: the parent and blocks its load fills, announced when it ends.
    pub load_stored: (Option<u64>, Vec<Block>),
    /// Disaggregated: the output the decode leg generates, kept while the prefill leg asks for
    /// one token (`handoff.rs`); 0 otherwise.
    pub decode_output_length: u64,
    /// Prompt tokens whose KV a prefill rank computed and this rank receives (a decode leg):
    /// they are filled in whole, outside the pass's token budget, with no compute time (Dynamo's
    /// decode workers skip prefill time), and the first token after them takes a decode step (the
    /// prefill's forward ran elsewhere). Lost at a preemption (the prefill rank freed them after
    /// the transfer).
    pub remote_tokens: u64,
    /// Disaggregated: the prefill leg ended and this is the decode leg.
    pub handed_over: bool,
    /// Decode leg: its prompt's blocks are reserved on its rank and hold the KV received, until
    /// it is admitted (`engine/handoff.rs`).
    pub kv_reserved: bool,
    /// Decode leg: its place in its rank's handoffs, which orders it among the waiting requests.
    pub transfer_seq: u64,
    /// Disaggregated: the prefill rank that holds the leg's KV until the transfer ends, and the
    /// decode rank that receives it.
    pub source_rank: usize,
    pub destination_rank: usize,
}

impl SimRequest {
    pub fn new(uid: u32, input_length: u64, output_length: u64, prompt: Vec<Block>, arrival_ms: f64) -> Self {
        Self {
            uid,
            input_length,
            output_length,
            prompt,
            arrival_ms,
            first_admit_ms: -1.0,
            first_token_ms: -1.0,
            last_token_ms: -1.0,
            load_ready_ms: -1.0,
            ..Self::default()
        }
    }

    /// Makes this the prefill leg of a disaggregated request: its prompt and one token.
    pub(crate) fn start_prefill_leg(&mut self) {
        self.decode_output_length = self.output_length;
        self.output_length = 1;
    }

    /// After the prefill leg ended (its blocks held by the prefill rank): the decode leg, the whole
    /// output to generate again from the prompt's KV received by transfer. What the report reads
    /// (arrival, reused tokens at the best and the first admission, preemptions) carries over; the
    /// decode leg's first admission adds no reused tokens, a recompute after a preemption adds
    /// what it finds (see `Engine::admit`).
    pub(crate) fn start_decode_leg(&mut self) {
        self.output_length = self.decode_output_length;
        self.generated = 0;
        self.first_token_ms = -1.0;
        self.last_token_ms = -1.0;
        self.remote_tokens = self.input_length;
        self.handed_over = true;
    }

    /// What the request knew of its blocks, once it holds none.
    pub(crate) fn forget_blocks(&mut self) {
        self.prompt_taken = 0;
        self.output_full = 0;
        self.prefilled = 0;
        self.remote_tokens = 0;
        self.admitted = false;
        self.kv_reserved = false;
    }

    pub(crate) fn context(&self) -> u64 {
        self.input_length + self.generated
    }

    /// The `index`-th output block: unique to the request (generated tokens are unique).
    pub(crate) fn output_block(&self, index: u64) -> Block {
        let base = u64::from(self.uid) << 24;
        Block {
            key: -(i64::from(self.uid) * (1 << 24) + index as i64 + 1),
            seq: base ^ index ^ OUTPUT_TAG,
            local: base ^ index,
        }
    }
}
