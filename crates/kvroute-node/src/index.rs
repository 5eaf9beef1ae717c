//! The `NativeKvIndex` class: kvroute-core's threaded index behind a handle. Events arrive as
//! packed columns (`kvroute_core::index::packed`), one Node-API call per batch; match results leave as one
//! `BigUint64Array`. The TypeScript wrapper owns validation and the public shapes.

use crate::convert::{coded, guard, invalid_arg, to_node_error};
use crate::memory::ExternalMemory;
use kvroute_core::index::{json, packed, KvIndex, Rank};
use kvroute_core::ingest::EngineIngest;
use napi::bindgen_prelude::ObjectFinalize;
use napi::bindgen_prelude::{
    AsyncTask, BigInt, BigUint64Array, BigUint64ArraySlice, Float64ArraySlice, Uint32Array, Uint32ArraySlice,
};
use napi::{Env, Result, Task};
use napi_derive::napi;
use std::sync::{Arc, OnceLock};

#[napi(custom_finalize)]
pub struct NativeKvIndex {
    pub(crate) inner: Arc<KvIndex>,
    /// What V8 has been told about the trees' native memory (see `memory.rs`).
    pub(crate) memory: Arc<ExternalMemory>,
    /// Engine-event ingestion into this index, created on first use (see `ingest.rs`).
    pub(crate) ingest: OnceLock<Arc<EngineIngest>>,
}

/// Counters and sizes, as plain numbers (exact below 2^53, far beyond any real count).
#[napi(object)]
pub struct NativeIndexStats {
    pub workers: f64,
    pub ranks: f64,
    pub blocks: f64,
    pub tree_nodes: f64,
    pub tree_blocks: f64,
    pub memory_bytes: f64,
    pub pending: f64,
    pub stored: f64,
    pub removed: f64,
    pub cleared: f64,
    pub parent_block_not_found: f64,
    pub block_not_found: f64,
    pub invalid_block: f64,
    pub ignored_tier: f64,
    pub duplicate_stores: f64,
    pub expired_blocks: f64,
    /// Per lower tier (host pinned, disk, external): blocks, stored, removed, unanchored,
    /// conflicting, not found.
    pub lower_tiers: Vec<f64>,
}

/// A dump in the packed layout of `applyPacked` (every event is a Stored).
#[napi(object)]
pub struct NativeDump {
    pub meta: Uint32Array,
    pub words: BigUint64Array,
}

pub(crate) fn u64_arg(value: &BigInt, name: &str) -> Result<u64, &'static str> {
    let (negative, v, lossless) = value.get_u64();
    if negative || !lossless {
        return Err(invalid_arg(format!("{name} must be in [0, 2^64)")));
    }
    Ok(v)
}

#[napi]
impl NativeKvIndex {
    #[napi(constructor)]
    pub fn new(writer_threads: u32) -> Result<Self, &'static str> {
        guard(|| {
            Ok(Self {
                inner: Arc::new(KvIndex::new(writer_threads as usize).map_err(to_node_error)?),
                memory: Arc::default(),
                ingest: OnceLock::new(),
            })
        })
    }

    #[napi(js_name = "applyPacked")]
    pub fn apply_packed(&self, env: Env, meta: &[u32], words: &[u64], now_ms: f64) -> Result<(), &'static str> {
        self.memory.sync(&env, &self.inner);
        guard(|| {
            let events = packed::decode(meta, words).map_err(to_node_error)?;
            self.inner.apply_events(events, now_ms).map_err(to_node_error)
        })
    }

    /// Parses events from JSON text in Rust (exact u64s; `batch`: an array or NDJSON, else one
    /// event), then enqueues them. Returns how many valid events were left out as a cache
    /// owner's. Invalid text throws `ERR_INVALID_EVENT` and enqueues nothing.
    #[napi(js_name = "applyJson")]
    pub fn apply_json(&self, env: Env, text: String, batch: bool, now_ms: f64) -> Result<f64, &'static str> {
        self.memory.sync(&env, &self.inner);
        guard(|| {
            let parsed =
                if batch { json::parse_events(&text) } else { json::parse_event(&text) }.map_err(to_node_error)?;
            if !parsed.events.is_empty() {
                self.inner.apply_events(parsed.events, now_ms).map_err(to_node_error)?;
            }
            Ok(parsed.cache_owner_events as f64)
        })
    }

    #[napi(js_name = "removeWorker")]
    pub fn remove_worker(&self, worker_id: BigInt, dp_rank: Option<u32>) -> Result<(), &'static str> {
        guard(|| self.inner.remove_worker(u64_arg(&worker_id, "workerId")?, dp_rank).map_err(to_node_error))
    }

    #[napi(js_name = "recordRouting")]
    pub fn record_routing(
        &self,
        worker_id: BigInt,
        dp_rank: u32,
        locals: &[u64],
        now_ms: f64,
        expires_at_ms: f64,
    ) -> Result<(), &'static str> {
        guard(|| {
            let rank = Rank::new(u64_arg(&worker_id, "workerId")?, dp_rank);
            self.inner.record_routing(rank, locals.to_vec(), now_ms, expires_at_ms).map_err(to_node_error)
        })
    }

    /// Matches into caller-owned buffers: worker ids into `ids`, (dp rank, blocks, tree size)
    /// triples into `nums`. Returns the number of scores; when it exceeds the buffers' room,
    /// nothing is written and the caller retries with larger ones. Reusing buffers spares an
    /// allocation and a finaliser per call on the hottest read path.
    #[napi(js_name = "findMatchesInto")]
    pub fn find_matches_into(
        &self,
        locals: &[u64],
        now_ms: f64,
        mut ids: BigUint64ArraySlice<'_>,
        mut nums: Uint32ArraySlice<'_>,
    ) -> Result<u32, &'static str> {
        guard(|| {
            let scores = self.inner.find_matches(locals, now_ms).map_err(to_node_error)?;
            if scores.len() <= ids.len() && 3 * scores.len() <= nums.len() {
                // Safety: this call runs synchronously on the JavaScript thread, so no JavaScript
                // can touch the buffers while they are written; they are private to the wrapper
                // in ts/native/index.ts and never exposed to users.
                let (ids, nums) = unsafe { (ids.as_mut(), nums.as_mut()) };
                for (i, s) in scores.iter().enumerate() {
                    ids[i] = s.rank.worker_id;
                    nums[3 * i] = s.rank.dp_rank;
                    nums[3 * i + 1] = s.blocks;
                    nums[3 * i + 2] = s.tree_size;
                }
            }
            Ok(scores.len() as u32)
        })
    }

    /// For each rank (`workers[i]`, `ranks[i]`): the leading blocks of `locals` it holds in device
    /// memory, then the blocks its host, disk and external tiers add past them: 4 numbers each
    /// into `out`.
    #[napi]
    pub fn tiered_matches(
        &self,
        locals: &[u64],
        now_ms: f64,
        workers: &[u64],
        ranks: &[u32],
        mut out: Float64ArraySlice<'_>,
    ) -> Result<(), &'static str> {
        guard(|| {
            if workers.len() != ranks.len() || out.len() < 4 * ranks.len() {
                return Err(invalid_arg("rank arrays and output do not match"));
            }
            let candidates: Vec<Rank> = workers.iter().zip(ranks).map(|(&w, &r)| Rank::new(w, r)).collect();
            let overlaps = self.inner.overlaps(locals, None, now_ms, &candidates).map_err(to_node_error)?;
            // Safety: this call runs synchronously on the JavaScript thread, so no JavaScript can
            // touch `out` while it is written; the wrapper owns it and never exposes it.
            let out = unsafe { out.as_mut() };
            for (i, o) in overlaps.iter().enumerate() {
                out[4 * i..4 * (i + 1)].copy_from_slice(&[
                    f64::from(o.device),
                    f64::from(o.lower.host_pinned),
                    f64::from(o.lower.disk),
                    f64::from(o.lower.external),
                ]);
            }
            Ok(())
        })
    }

    /// Resolves to "" once every event accepted so far is applied, or to "CODE: message".
    /// (An async task can only reject with napi's generic status, so the code travels as data.)
    #[napi]
    pub fn flush(&self) -> AsyncTask<FlushTask> {
        AsyncTask::new(FlushTask { index: Arc::clone(&self.inner), memory: Arc::clone(&self.memory) })
    }

    /// Blocks the calling thread until queued events are applied; for restoring a dump.
    #[napi(js_name = "flushBlocking")]
    pub fn flush_blocking(&self, env: Env) -> Result<(), &'static str> {
        let outcome = guard(|| self.inner.flush().map_err(to_node_error));
        self.memory.sync(&env, &self.inner);
        outcome
    }

    #[napi]
    pub fn dump(&self) -> Result<NativeDump, &'static str> {
        guard(|| {
            let (meta, words) = packed::encode_dump(&self.inner.dump().map_err(to_node_error)?);
            Ok(NativeDump { meta: Uint32Array::new(meta), words: BigUint64Array::new(words) })
        })
    }

    #[napi]
    pub fn stats(&self, env: Env) -> Result<NativeIndexStats, &'static str> {
        guard(|| {
            let (s, pending) = self.inner.stats().map_err(to_node_error)?;
            self.memory.sync_to(&env, s.memory_bytes);
            let e = s.events;
            Ok(NativeIndexStats {
                workers: s.workers as f64,
                ranks: s.ranks as f64,
                blocks: s.blocks as f64,
                tree_nodes: s.tree_nodes as f64,
                tree_blocks: s.tree_blocks as f64,
                memory_bytes: s.memory_bytes as f64,
                pending: pending as f64,
                stored: e.stored as f64,
                removed: e.removed as f64,
                cleared: e.cleared as f64,
                parent_block_not_found: e.parent_block_not_found as f64,
                block_not_found: e.block_not_found as f64,
                invalid_block: e.invalid_block as f64,
                ignored_tier: e.ignored_tier as f64,
                duplicate_stores: e.duplicate_stores as f64,
                expired_blocks: e.expired_blocks as f64,
                lower_tiers: s
                    .lower_tiers
                    .iter()
                    .flat_map(|t| {
                        let c = t.counters;
                        [t.blocks, c.stored, c.removed, c.unanchored, c.conflicting, c.not_found]
                    })
                    .map(|v| v as f64)
                    .collect(),
            })
        })
    }

    /// Ops queued and not applied yet.
    #[napi]
    pub fn pending(&self, env: Env) -> Result<f64, &'static str> {
        self.memory.sync(&env, &self.inner);
        guard(|| Ok(self.inner.pending().map_err(to_node_error)? as f64))
    }

    /// Stops the writers and frees the trees, handing a large index's pages back to the system;
    /// V8 hears at once that the memory is gone.
    #[napi]
    pub fn close(&self, env: Env) -> Result<(), &'static str> {
        let outcome = guard(|| {
            self.inner.close_returning_memory();
            Ok(())
        });
        self.memory.release(&env);
        outcome
    }
}

impl ObjectFinalize for NativeKvIndex {
    /// Collected without `close()`: V8 must still forget the memory it was told about. The
    /// trees go when the last handle to the index (an event source may hold one) drops.
    fn finalize(self, env: Env) -> Result<()> {
        self.memory.release(&env);
        Ok(())
    }
}

pub struct FlushTask {
    index: Arc<KvIndex>,
    memory: Arc<ExternalMemory>,
}

impl Task for FlushTask {
    type Output = String;
    type JsValue = String;

    fn compute(&mut self) -> Result<String> {
        Ok(coded(|| self.index.flush()).err().unwrap_or_default())
    }

    fn resolve(&mut self, env: Env, output: String) -> Result<String> {
        self.memory.sync(&env, &self.index);
        Ok(output)
    }
}
