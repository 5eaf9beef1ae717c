//! `NativeKvIndex.applySnapshotJson`: a warm start's snapshot document, parsed and enqueued in
//! Rust (kvroute-core's `index::json::parse_snapshot`) on libuv's thread pool, so no JavaScript
//! object is built for it and the JavaScript thread goes on meanwhile.

use crate::convert::coded;
use crate::index::NativeKvIndex;
use crate::memory::ExternalMemory;
use kvroute_core::index::{json, KvIndex};
use napi::bindgen_prelude::{AsyncTask, BigInt, Either};
use napi::{Env, Result, Task};
use napi_derive::napi;
use std::sync::Arc;

/// Where one rank's engine stream stood when the snapshot began.
#[napi(object)]
pub struct NativeEngineSeq {
    pub worker_id: BigInt,
    /// A u64 in the document; as a number, as the TypeScript reader takes it.
    pub dp_rank: f64,
    pub seq: BigInt,
    /// Digest of the batch applied at `seq`, when the snapshot kept it.
    pub digest: Option<BigInt>,
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
    /// against `blockSize`, and enqueues its events, all on libuv's thread pool: a million-block
    /// document takes about half a second to read, which would otherwise hold up the JavaScript
    /// thread. Resolves to the document's figures, or to "CODE: message" (a malformed document
    /// `ERR_INVALID_EVENT`, another block size `ERR_INVALID_ARG`; either way nothing is enqueued).
    #[napi(js_name = "applySnapshotJson")]
    pub fn apply_snapshot_json(
        &self,
        text: String,
        model: Option<String>,
        block_size: u32,
        now_ms: f64,
    ) -> AsyncTask<SnapshotTask> {
        AsyncTask::new(SnapshotTask {
            index: Arc::clone(&self.inner),
            memory: Arc::clone(&self.memory),
            text,
            model,
            block_size,
            now_ms,
        })
    }
}

pub struct SnapshotTask {
    index: Arc<KvIndex>,
    memory: Arc<ExternalMemory>,
    text: String,
    model: Option<String>,
    block_size: u32,
    now_ms: f64,
}

/// What a snapshot held, before its conversion to JavaScript values.
pub struct SnapshotOutcome {
    event_count: usize,
    cache_owner_events: u64,
    engine_seqs: Vec<json::EngineSeq>,
}

impl Task for SnapshotTask {
    type Output = std::result::Result<SnapshotOutcome, String>;
    type JsValue = Either<NativeSnapshotInfo, String>;

    fn compute(&mut self) -> Result<Self::Output> {
        let text = std::mem::take(&mut self.text);
        Ok(coded(|| {
            let snap = json::parse_snapshot(&text, self.model.as_deref(), self.block_size)?;
            drop(text);
            if !snap.events.events.is_empty() {
                self.index.apply_events(snap.events.events, self.now_ms)?;
            }
            Ok(SnapshotOutcome {
                event_count: snap.event_count,
                cache_owner_events: snap.events.cache_owner_events,
                engine_seqs: snap.engine_seqs,
            })
        }))
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> Result<Self::JsValue> {
        self.memory.sync(&env, &self.index);
        Ok(match output {
            Err(message) => Either::B(message),
            Ok(snap) => Either::A(NativeSnapshotInfo {
                events: snap.event_count as f64,
                cache_owner_events: snap.cache_owner_events as f64,
                engine_seqs: snap
                    .engine_seqs
                    .into_iter()
                    .map(|s| NativeEngineSeq {
                        worker_id: BigInt::from(s.worker_id),
                        dp_rank: s.dp_rank as f64,
                        seq: BigInt::from(s.seq),
                        digest: s.digest.map(BigInt::from),
                    })
                    .collect(),
            }),
        })
    }
}
