//! The engine simulation behind `kvroute replay`: a fleet of vLLM-like engine ranks (continuous
//! batching, chunked prefill, a prefix-caching block pool, recompute preemption) stepped in
//! virtual time with Dynamo's mocker timing model, optionally with host memory behind each
//! pool (CPU offload, `--cpu-offload-blocks`), aggregated or as the prefill and decode pools of a
//! disaggregated fleet (`handoff.rs`).
//!
//! This is the Rust twin of `ts/replay/{engine,kv-cache,host-pool,lru-blocks,event-queue}.ts`
//! and of the pass scheduling in `ts/replay/fleet.ts`; the two must give identical results (the
//! TypeScript suite runs every replay scenario on both). Why Rust: a replay of the conversation
//! trace is 3.9 million engine passes, of which only 3–4% produce anything the router must hear
//! (KV events, first tokens, completions). In TypeScript each pass cost about 5 µs of queue, promise and map work; here
//! the quiet passes never leave Rust, and the caller is woken only for arrivals and for passes
//! with output ([`Fleet::run`]).

mod engine;
mod event_queue;
mod fleet;
#[cfg(test)]
mod fleet_tests;
mod handoff;
mod host_pool;
mod kv_cache;
mod lru;
mod preemption;
mod request;
mod speculative;
mod timing;

pub use engine::EngineConfig;
pub use fleet::{Fleet, FleetRank, RequestOutcome, Wake};
pub use handoff::{HandoffDelay, RankRole};
pub use preemption::PreemptionMode;
pub use speculative::{Speculative, MAX_DRAFT_TOKENS};
pub use timing::{decode_ms, prefill_ms, TimingModel};
