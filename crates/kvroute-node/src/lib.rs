//! napi-rs binding of kvroute-core. It converts JavaScript values to core types and core errors
//! to JavaScript errors, and nothing else: behaviour belongs in `kvroute-core`.
//!
//! Every entry point runs inside [`guard`], so a Rust panic becomes an `ERR_INTERNAL` error
//! in JavaScript instead of aborting the host process.

mod convert;
mod hashing;
mod index;
mod ingest;
mod memory;
mod panic_probe;
mod replay;
mod router;
mod snapshot;
mod tokenizer;
