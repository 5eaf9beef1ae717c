//! Engine KV-event ingestion: vLLM, SGLang and TensorRT-LLM publish their KV cache's stores and
//! evictions as msgpack batches over ZeroMQ; this module turns them into index events.
//!
//! * [`msgpack`]: a zero-copy pull reader over msgpack bytes (markers from `rmp`).
//! * [`decode`]: msgpack → [`types::DecodedBatch`], for every engine version's layout (vLLM
//!   array ≤ 0.23 and map ≥ 0.24 events, SGLang array ≤ 0.5.19 and map ≥ 0.5.20, TensorRT-LLM's
//!   vLLM-wire events); u64, i64 and 32-byte hashes all folded to one u64 identity.
//! * [`convert`]: decoded events → index events per (worker, dp rank), hashing `token_ids` with
//!   kvroute's Dynamo-compatible block hashes (LoRA, cache salt and multimodal keys included),
//!   filtering what the prefix tree must not hold (and counting why).
//! * [`engine`]: decode + convert + enqueue, with per-rank state and counters, shared by
//!   sockets and by callers with their own transport.
//! * [`cursor`]: the per-rank sequence state machine (gaps, replay, restarts, resync).
//! * [`source`]: the socket runner: one thread per engine worker, SUB per rank, DEALER for replay.
//!
//! What kvroute does where Dynamo 1.6.1's converter fails: it folds bytes-mode hashes instead
//! of failing the batch; it detects a restart (seq back to 0) and clears the rank instead of
//! dropping every batch as stale and keeping the old incarnation's blocks; its replay wait has a
//! deadline and a failed replay clears the rank instead of applying over the hole; vLLM's own
//! `cache_salt` and vLLM 0.11's `lora_id` key the blocks; `group_idx` ≠ 0 never touches the main
//! group; one unknown event is skipped, not its whole batch; a block-size mismatch fails the
//! source loudly instead of yielding empty stores.

pub mod convert;
pub mod counters;
pub mod cursor;
pub mod decode;
pub mod endpoint;
pub mod engine;
pub mod msgpack;
pub mod source;
pub mod types;

pub use counters::{FilterReason, IngestCounters, Tier};
pub use cursor::{RankState, StreamCounters};
pub use decode::{decode_batch, DecodeError};
pub use engine::{BatchOutcome, EngineIngest};
pub use source::{EngineSource, RankStatus, SourceConfig, StateChange};
pub use types::{DecodedBatch, EngineEvent, EngineRemoved, EngineStored, ExtraKey, Layout};
