//! Disaggregated serving in the replay: a request's prefill on a prefill rank, its decode on a
//! decode rank, the KV cache handed over between them, as Dynamo's offline disaggregated replay
//! models it. A prefill rank runs the request as if it asked for one output token (its prefill
//! and the token that ends it); when that token is out, the rank holds the request's blocks and
//! the decode pool's router places it at once. The decode rank reserves the prompt's blocks, the
//! transfer takes the delay below, and when it ends the prefill rank frees its blocks and the
//! decode rank runs the request whole (`engine/handoff.rs`, `Fleet::end_transfer`). There the
//! prompt's KV is in place (`SimRequest::remote_tokens`): no prefill time, none of the pass's
//! token budget (Dynamo's decode workers skip prefill compute), and the first token takes a
//! decode step; a recompute after a preemption there is computed as any other. The Rust twin of
//! the handoff in `ts/replay/fleet.ts` and `ts/replay/handoff-holds.ts`.

use crate::KvError;

/// What a rank of the fleet serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RankRole {
    /// Whole requests (no disaggregation).
    #[default]
    Aggregated,
    /// Prefill legs: the prompt and one token, then the handoff.
    Prefill,
    /// Decode legs: the prompt's KV received, then every output token. Publishes no KV events
    /// (the decode pool's router does not weigh overlap, as in Dynamo's replay).
    Decode,
}

/// How long the KV cache takes to reach the decode rank once it has reserved room for it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HandoffDelay {
    /// Per request (ms, the transfer's setup).
    pub fixed_ms: f64,
    /// Per prompt token (ms: KV bytes per token over the link's bandwidth).
    pub ms_per_token: f64,
    /// Count only the prompt tokens the decode rank does not hold already (the blocks its
    /// reservation could not reuse, whole; Dynamo's `destination_missing` timing), not the whole
    /// prompt (its default `full_prompt`).
    pub destination_missing: bool,
}

impl HandoffDelay {
    pub(crate) fn validate(&self) -> Result<(), KvError> {
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        if !ok(self.fixed_ms) || !ok(self.ms_per_token) {
            return Err(KvError::invalid_arg("the handoff delays must be finite numbers >= 0"));
        }
        Ok(())
    }

    /// The delay of a prompt of `input_length` tokens of which the decode rank lacked
    /// `missing_tokens` (ms).
    pub(crate) fn of(&self, input_length: u64, missing_tokens: u64) -> f64 {
        let tokens = if self.destination_missing { missing_tokens } else { input_length };
        self.fixed_ms + tokens as f64 * self.ms_per_token
    }
}
