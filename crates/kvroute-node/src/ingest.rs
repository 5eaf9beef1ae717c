//! Engine KV-event ingestion behind napi: `applyEngineBatch` and the counters on
//! `NativeKvIndex`, the `NativeEngineSource` class (a socket thread per engine worker, see
//! kvroute-core's `ingest::source`), and `decodeEngineBatch`. Conversion only: values in and
//! out; every rule lives in kvroute-core.

use crate::convert::{guard, to_node_error};
use crate::index::{u64_arg, NativeKvIndex};
use kvroute_core::index::Rank;
use kvroute_core::ingest::{
    decode_batch, EngineEvent, EngineIngest, EngineSource, ExtraKey, IngestCounters, RankStatus, SourceConfig,
    StateChange,
};
use napi::bindgen_prelude::{BigInt, BigUint64Array, Float64ArraySlice, Uint32Array, Uint8Array};
use napi::Result;
use napi_derive::napi;
use std::sync::Arc;
use std::time::Duration;

/// Counters as plain numbers; `filtered` follows kvroute-core's `FilterReason::ALL` order and
/// the tier arrays its lower tiers (host pinned, disk, external).
#[napi(object)]
pub struct NativeIngestCounters {
    pub batches: f64,
    pub stored_events: f64,
    pub removed_events: f64,
    pub cleared_events: f64,
    pub stored_blocks: f64,
    pub removed_hashes: f64,
    pub tier_stored: Vec<f64>,
    pub tier_removed: Vec<f64>,
    pub tier_blocks: Vec<f64>,
    pub filtered: Vec<f64>,
    pub unknown_events: f64,
    pub extra_fields: f64,
    pub folded_hashes: f64,
    pub odd_length_hashes: f64,
    pub short_tokens: f64,
    pub dp_rank_mismatches: f64,
    pub decode_errors: f64,
    pub first_decode_error: Option<String>,
}

fn counters_out(c: &IngestCounters, tiers: [u64; 3]) -> NativeIngestCounters {
    let f = |v: &[u64]| v.iter().map(|&x| x as f64).collect();
    NativeIngestCounters {
        batches: c.batches as f64,
        stored_events: c.stored_events as f64,
        removed_events: c.removed_events as f64,
        cleared_events: c.cleared_events as f64,
        stored_blocks: c.stored_blocks as f64,
        removed_hashes: c.removed_hashes as f64,
        tier_stored: f(&c.tier_stored),
        tier_removed: f(&c.tier_removed),
        tier_blocks: f(&tiers),
        filtered: f(&c.filtered),
        unknown_events: c.unknown_events as f64,
        extra_fields: c.extra_fields as f64,
        folded_hashes: c.folded_hashes as f64,
        odd_length_hashes: c.odd_length_hashes as f64,
        short_tokens: c.short_tokens as f64,
        dp_rank_mismatches: c.dp_rank_mismatches as f64,
        decode_errors: c.decode_errors as f64,
        first_decode_error: c.first_decode_error.clone(),
    }
}

/// Figures of one batch's result written by `applyEngineBatchInto`: index events, the
/// mismatching engine and router block sizes (-1 when none), then the counters in
/// [`flat_counters`] order.
const BATCH_FIGURES: usize = 3 + 13 + 3 + 3 + 12;

/// Counters flattened: the scalars in `NativeIngestCounters` field order (batches … decode
/// errors), then tier stored ×3, tier removed ×3, filtered ×12. Mirrored by
/// `ts/native/ingest.ts`.
fn flat_counters(c: &IngestCounters, out: &mut Vec<f64>) {
    out.extend(
        [
            c.batches,
            c.stored_events,
            c.removed_events,
            c.cleared_events,
            c.stored_blocks,
            c.removed_hashes,
            c.unknown_events,
            c.extra_fields,
            c.folded_hashes,
            c.odd_length_hashes,
            c.short_tokens,
            c.dp_rank_mismatches,
            c.decode_errors,
        ]
        .map(|v| v as f64),
    );
    out.extend(c.tier_stored.iter().chain(&c.tier_removed).chain(&c.filtered).map(|&v| v as f64));
}

impl NativeKvIndex {
    fn ingest(&self, block_size: u32) -> Result<Arc<EngineIngest>, &'static str> {
        if let Some(existing) = self.ingest.get() {
            return Ok(Arc::clone(existing));
        }
        let created = Arc::new(EngineIngest::new(Arc::clone(&self.inner), block_size).map_err(to_node_error)?);
        Ok(Arc::clone(self.ingest.get_or_init(|| created)))
    }
}

#[napi]
impl NativeKvIndex {
    /// Applies one payload and writes its figures into the caller's `out` (a reused buffer of
    /// `BATCH_FIGURES` numbers: no allocation or finaliser per call on this per-batch path).
    /// Returns the decode error, if any.
    #[napi(js_name = "applyEngineBatchInto")]
    pub fn apply_engine_batch_into(
        &self,
        worker_id: BigInt,
        dp_rank: u32,
        payload: &[u8],
        block_size: u32,
        now_ms: f64,
        mut out: Float64ArraySlice<'_>,
    ) -> Result<Option<String>, &'static str> {
        guard(|| {
            if out.len() < BATCH_FIGURES {
                return Err(crate::convert::invalid_arg(format!(
                    "result buffer holds {} numbers, needs {BATCH_FIGURES}",
                    out.len()
                )));
            }
            let rank = Rank::new(u64_arg(&worker_id, "workerId")?, dp_rank);
            let outcome = self.ingest(block_size)?.apply_payload(rank, payload, 0, now_ms).map_err(to_node_error)?;
            let (engine, router) =
                outcome.convert.block_size_mismatch.map_or((-1.0, -1.0), |(e, r)| (e as f64, f64::from(r)));
            let mut figures = Vec::with_capacity(BATCH_FIGURES);
            figures.extend([outcome.index_events as f64, engine, router]);
            flat_counters(&outcome.counters, &mut figures);
            // Safety: this call runs synchronously on the JavaScript thread, so no JavaScript can
            // touch the buffer while it is written; it is private to ts/native/ingest.ts.
            let out = unsafe { out.as_mut() };
            out[..BATCH_FIGURES].copy_from_slice(&figures);
            Ok(outcome.error)
        })
    }

    /// Counters of one rank, a worker, or everything.
    #[napi(js_name = "ingestCounters")]
    pub fn ingest_counters(
        &self,
        block_size: u32,
        worker_id: Option<BigInt>,
        dp_rank: Option<u32>,
    ) -> Result<NativeIngestCounters, &'static str> {
        guard(|| {
            let worker = worker_id.map(|w| u64_arg(&w, "workerId")).transpose()?;
            let (c, tiers) = self.ingest(block_size)?.counters(worker, dp_rank);
            Ok(counters_out(&c, tiers))
        })
    }

    #[napi(js_name = "forgetEngineWorker")]
    pub fn forget_engine_worker(&self, block_size: u32, worker_id: BigInt) -> Result<(), &'static str> {
        guard(|| {
            self.ingest(block_size)?.forget_worker(u64_arg(&worker_id, "workerId")?);
            Ok(())
        })
    }
}

#[napi(object)]
pub struct NativeSourceConfig {
    pub worker_id: BigInt,
    pub ranks: Vec<u32>,
    pub endpoints: Vec<String>,
    pub replay_endpoints: Option<Vec<String>>,
    pub bind: bool,
    pub topic: String,
    pub replay_timeout_ms: f64,
    pub max_held: u32,
    pub receive_hwm: i32,
    pub block_size: u32,
    /// Per rank, the engine seq already applied (a warm start); `-1` for none.
    pub resume_after: Option<Vec<BigInt>>,
    /// Per rank, the digest of the batch applied at that seq; `-1` for none.
    pub resume_digests: Option<Vec<BigInt>>,
}

#[napi(object)]
pub struct NativeStreamCounters {
    pub frames: f64,
    pub gaps: f64,
    pub replay_requests: f64,
    pub replayed: f64,
    pub replay_failures: f64,
    pub replay_timeouts: f64,
    pub restarts: f64,
    pub resyncs: f64,
    pub duplicates: f64,
    pub ignored: f64,
    pub stale_replies: f64,
}

#[napi(object)]
pub struct NativeRankStatus {
    pub dp_rank: u32,
    pub endpoint: String,
    pub replay_endpoint: Option<String>,
    pub state: String,
    pub reason: String,
    pub last_seq: Option<BigInt>,
    pub last_digest: Option<BigInt>,
    pub incarnation: f64,
    pub stream: NativeStreamCounters,
    pub held: f64,
    pub malformed_frames: f64,
    pub last_batch_ms: Option<f64>,
    pub lag_ms: Option<f64>,
}

fn status_out(s: RankStatus) -> NativeRankStatus {
    let c = s.stream;
    NativeRankStatus {
        dp_rank: s.dp_rank,
        endpoint: s.endpoint,
        replay_endpoint: s.replay_endpoint,
        state: s.state.as_str().to_owned(),
        reason: s.reason,
        last_seq: s.last_seq.map(BigInt::from),
        last_digest: s.last_digest.map(BigInt::from),
        incarnation: s.incarnation as f64,
        stream: NativeStreamCounters {
            frames: c.frames as f64,
            gaps: c.gaps as f64,
            replay_requests: c.replay_requests as f64,
            replayed: c.replayed as f64,
            replay_failures: c.replay_failures as f64,
            replay_timeouts: c.replay_timeouts as f64,
            restarts: c.restarts as f64,
            resyncs: c.resyncs as f64,
            duplicates: c.duplicates as f64,
            ignored: c.ignored as f64,
            stale_replies: c.stale_replies as f64,
        },
        held: s.held as f64,
        malformed_frames: s.malformed_frames as f64,
        last_batch_ms: s.last_batch_ms,
        lag_ms: s.lag_ms,
    }
}

#[napi(object)]
pub struct NativeStateChange {
    pub dp_rank: u32,
    pub state: String,
    pub reason: String,
    pub at_ms: f64,
}

#[napi]
pub struct NativeEngineSource {
    inner: EngineSource,
}

#[napi]
impl NativeEngineSource {
    #[napi(constructor)]
    pub fn new(index: &NativeKvIndex, config: NativeSourceConfig) -> Result<Self, &'static str> {
        guard(|| {
            let ingest = index.ingest(config.block_size)?;
            let source = EngineSource::start(
                ingest,
                SourceConfig {
                    worker_id: u64_arg(&config.worker_id, "workerId")?,
                    ranks: config.ranks,
                    endpoints: config.endpoints,
                    replay_endpoints: config.replay_endpoints,
                    bind: config.bind,
                    topic: config.topic,
                    replay_timeout: Duration::from_secs_f64(config.replay_timeout_ms.max(0.0) / 1000.0),
                    max_held: config.max_held as usize,
                    receive_hwm: config.receive_hwm,
                    resume_after: resume_after(config.resume_after.as_deref(), "resumeAfterSeq")?,
                    resume_digests: resume_after(config.resume_digests.as_deref(), "resumeDigests")?,
                },
            )
            .map_err(to_node_error)?;
            Ok(Self { inner: source })
        })
    }

    #[napi]
    pub fn status(&self) -> Result<Vec<NativeRankStatus>, &'static str> {
        guard(|| Ok(self.inner.status().into_iter().map(status_out).collect()))
    }

    #[napi(js_name = "takeChanges")]
    pub fn take_changes(&self) -> Result<Vec<NativeStateChange>, &'static str> {
        guard(|| {
            Ok(self
                .inner
                .take_changes()
                .into_iter()
                .map(|c: StateChange| NativeStateChange {
                    dp_rank: c.dp_rank,
                    state: c.state.as_str().to_owned(),
                    reason: c.reason,
                    at_ms: c.at_ms,
                })
                .collect())
        })
    }

    #[napi]
    pub fn close(&self) -> Result<(), &'static str> {
        guard(|| {
            self.inner.close();
            Ok(())
        })
    }
}

#[napi(object)]
pub struct NativeExtraKey {
    pub kind: String,
    pub text: Option<String>,
    pub int: Option<BigInt>,
    pub offset: Option<f64>,
    pub bytes: Option<Uint8Array>,
}

#[napi(object)]
pub struct NativeEngineEvent {
    pub r#type: String,
    pub block_hashes: Option<BigUint64Array>,
    pub parent_block_hash: Option<BigInt>,
    pub token_ids: Option<Uint32Array>,
    pub eagle: Option<bool>,
    pub block_size: Option<f64>,
    pub lora_id: Option<BigInt>,
    pub medium: Option<String>,
    pub lora_name: Option<String>,
    pub cache_salt: Option<String>,
    pub extra_keys: Option<Vec<Option<Vec<NativeExtraKey>>>>,
    pub group_idx: Option<f64>,
    pub kv_cache_spec_kind: Option<String>,
    pub kv_cache_spec_sliding_window: Option<f64>,
    pub locality: Option<String>,
    pub ownership: Option<String>,
    pub session_id: Option<String>,
}

#[napi(object)]
pub struct NativeDecodedBatch {
    pub error: Option<String>,
    pub ts: f64,
    pub dp_rank: Option<f64>,
    pub layout: String,
    pub events: Vec<NativeEngineEvent>,
    pub unknown_events: f64,
    pub extra_fields: f64,
    pub folded_hashes: f64,
    pub odd_length_hashes: f64,
}

fn int_out(v: i128) -> BigInt {
    match i64::try_from(v) {
        Ok(i) => BigInt::from(i),
        Err(_) => BigInt::from(v as u64),
    }
}

fn key_out(k: ExtraKey) -> NativeExtraKey {
    let mut out = NativeExtraKey { kind: String::new(), text: None, int: None, offset: None, bytes: None };
    out.kind = match k {
        ExtraKey::Text(t) => {
            out.text = Some(t);
            "text"
        }
        ExtraKey::Int(i) => {
            out.int = Some(int_out(i));
            "int"
        }
        ExtraKey::Pair(id, offset) => {
            out.text = Some(id);
            out.offset = Some(offset as f64);
            "pair"
        }
        ExtraKey::Bytes(b) => {
            out.bytes = Some(Uint8Array::new(b));
            "bytes"
        }
        ExtraKey::Other => "other",
    }
    .to_owned();
    out
}

fn empty_event(kind: &str) -> NativeEngineEvent {
    NativeEngineEvent {
        r#type: kind.to_owned(),
        block_hashes: None,
        parent_block_hash: None,
        token_ids: None,
        eagle: None,
        block_size: None,
        lora_id: None,
        medium: None,
        lora_name: None,
        cache_salt: None,
        extra_keys: None,
        group_idx: None,
        kv_cache_spec_kind: None,
        kv_cache_spec_sliding_window: None,
        locality: None,
        ownership: None,
        session_id: None,
    }
}

fn event_out(e: EngineEvent) -> NativeEngineEvent {
    match e {
        EngineEvent::Stored(s) => {
            let s = *s;
            NativeEngineEvent {
                block_hashes: Some(BigUint64Array::new(s.block_hashes)),
                parent_block_hash: s.parent_block_hash.map(BigInt::from),
                token_ids: Some(Uint32Array::new(s.token_ids)),
                eagle: Some(s.eagle),
                block_size: Some(s.block_size as f64),
                lora_id: s.lora_id.map(int_out),
                medium: s.medium,
                lora_name: s.lora_name,
                cache_salt: s.cache_salt,
                extra_keys: s.extra_keys.map(|blocks| {
                    blocks.into_iter().map(|b| b.map(|keys| keys.into_iter().map(key_out).collect())).collect()
                }),
                group_idx: s.group_idx.map(|g| g as f64),
                kv_cache_spec_kind: s.kv_cache_spec_kind,
                kv_cache_spec_sliding_window: s.kv_cache_spec_sliding_window.map(|w| w as f64),
                locality: s.locality,
                ownership: s.ownership,
                session_id: s.session_id,
                ..empty_event("BlockStored")
            }
        }
        EngineEvent::Removed(r) => NativeEngineEvent {
            block_hashes: Some(BigUint64Array::new(r.block_hashes)),
            medium: r.medium,
            group_idx: r.group_idx.map(|g| g as f64),
            locality: r.locality,
            ownership: r.ownership,
            ..empty_event("BlockRemoved")
        },
        EngineEvent::Cleared { ownership } => NativeEngineEvent { ownership, ..empty_event("AllBlocksCleared") },
    }
}

/// Decodes one payload for inspection; a decode failure is returned as `error`, not thrown, so
/// callers see exactly what the ingest path would have counted.
#[napi(js_name = "decodeEngineBatch")]
pub fn decode_engine_batch(payload: &[u8]) -> Result<NativeDecodedBatch, &'static str> {
    guard(|| {
        Ok(match decode_batch(payload) {
            Ok(b) => NativeDecodedBatch {
                error: None,
                ts: b.ts,
                dp_rank: b.dp_rank.map(|r| r as f64),
                layout: b.layout.as_str().to_owned(),
                events: b.events.into_iter().map(event_out).collect(),
                unknown_events: f64::from(b.notes.unknown_events),
                extra_fields: f64::from(b.notes.extra_fields),
                folded_hashes: f64::from(b.notes.folded_hashes),
                odd_length_hashes: f64::from(b.notes.odd_length_hashes),
            },
            Err(e) => NativeDecodedBatch {
                error: Some(e.0),
                ts: 0.0,
                dp_rank: None,
                layout: String::from("empty"),
                events: Vec::new(),
                unknown_events: 0.0,
                extra_fields: 0.0,
                folded_hashes: 0.0,
                odd_length_hashes: 0.0,
            },
        })
    })
}

/// Per-rank resume seqs or digests from JavaScript: a negative BigInt means none for that rank.
fn resume_after(values: Option<&[BigInt]>, what: &str) -> Result<Vec<Option<u64>>, &'static str> {
    values.unwrap_or_default().iter().map(|b| if b.sign_bit { Ok(None) } else { u64_arg(b, what).map(Some) }).collect()
}
