//! `NativeKvIndex.applySnapshotJson`: a warm start's snapshot document, parsed and enqueued in
//! Rust (kvroute-core's `index::json::parse_snapshot`), so no JavaScript object is built for it.

use crate::convert::{guard, to_node_error};
use crate::index::NativeKvIndex;
use kvroute_core::index::json;
use napi::bindgen_prelude::BigInt;
use napi::{Env, Result};
use napi_derive::napi;

/// Where one rank's engine stream stood when the snapshot began.
#[napi(object)]
pub struct NativeEngineSeq {
    pub worker_id: BigInt,
    /// A u64 in the document; as a number, as the TypeScript reader takes it.
    pub dp_rank: f64,
    pub seq: BigInt,
}

#[napi(object)]
pub struct NativeSnapshotInfo {
    /// Events in the document (those of a cache owner's lane included).
    pub events: f64,
    /// Valid events left out as a cache owner's lane.
    pub cache_owner_events: f64,
    pub engine_seqs: Vec<NativeEngineSeq>,
}

#[napi]
impl NativeKvIndex {
    /// Parses a snapshot document (the entry of `model`, or the only one), checks its block size
    /// against `blockSize`, and enqueues its events. A malformed document throws
    /// `ERR_INVALID_EVENT`, another block size `ERR_INVALID_ARG`; either way nothing is enqueued.
    #[napi(js_name = "applySnapshotJson")]
    pub fn apply_snapshot_json(
        &self,
        env: Env,
        text: String,
        model: Option<String>,
        block_size: u32,
        now_ms: f64,
    ) -> Result<NativeSnapshotInfo, &'static str> {
        self.memory.sync(&env, &self.inner);
        guard(|| {
            let snap = json::parse_snapshot(&text, model.as_deref(), block_size).map_err(to_node_error)?;
            if !snap.events.events.is_empty() {
                self.inner.apply_events(snap.events.events, now_ms).map_err(to_node_error)?;
            }
            Ok(NativeSnapshotInfo {
                events: snap.event_count as f64,
                cache_owner_events: snap.events.cache_owner_events as f64,
                engine_seqs: snap
                    .engine_seqs
                    .into_iter()
                    .map(|s| NativeEngineSeq {
                        worker_id: BigInt::from(s.worker_id),
                        dp_rank: s.dp_rank as f64,
                        seq: BigInt::from(s.seq),
                    })
                    .collect(),
            })
        })
    }
}
