//! kvroute-core: the logic of kvroute, with no Node dependency.
//!
//! * [`hashing`]: block and sequence hashes, bit-compatible with NVIDIA Dynamo's kv-router, so a
//!   router built on this crate understands the hashes that Dynamo-instrumented engines publish.
//! * [`index`]: the concurrent compressed radix tree of which worker holds which KV blocks.
//! * [`ingest`]: engine KV events over ZeroMQ (vLLM, SGLang, TensorRT-LLM): decoding,
//!   conversion, gap repair and restarts, on Rust threads.
//! * [`replay`]: the engine fleet simulation of `kvroute replay`.
//! * [`heap`]: handing freed memory back to the system when a large index closes.
//! * [`load`] and [`routing`]: per-rank active load, and the per-request figures a router weighs.
//! * [`tiers`]: the lower storage tiers (host, disk, external) a rank's match continues into.
//! * `tokenize` (feature `tokenizer`): a model's `tokenizer.json`, text to token ids, for a
//!   gateway's local tokenizer.
//!
//! The napi binding (`kvroute-node`) only converts types and errors; everything that decides
//! behaviour lives here and is tested here.

pub mod error;
pub mod hashing;
pub mod heap;
pub mod index;
pub mod ingest;
pub mod load;
pub mod replay;
pub mod routing;
pub mod tiers;
#[cfg(feature = "tokenizer")]
pub mod tokenize;

pub use error::{ErrorCode, KvError};
