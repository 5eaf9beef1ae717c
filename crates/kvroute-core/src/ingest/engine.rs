//! [`EngineIngest`]: decode → convert → enqueue into a [`KvIndex`], with the per-rank conversion
//! state and counters. Shared by every event source of one index and by
//! `applyEngineBatch` (users with their own transport), so both see one consistent state.

use super::convert::{ConvertOutcome, RankConverter};
use super::counters::IngestCounters;
use super::decode::decode_batch;
use crate::index::{EventData, KvIndex, Rank, RouterEvent, WorkerId};
use crate::KvError;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// The result of one batch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchOutcome {
    /// The decode error, when the batch was skipped whole.
    pub error: Option<String>,
    /// Index events handed to the index.
    pub index_events: u64,
    pub convert: ConvertOutcome,
    /// What this batch alone added to the rank's counters.
    pub counters: IngestCounters,
    /// The batch's own timestamp (engine clock, seconds).
    pub ts: Option<f64>,
}

/// Largest payload accepted (64 MiB): far above any engine step, low enough that a corrupted
/// length cannot make the decoder walk gigabytes.
pub const MAX_PAYLOAD_BYTES: usize = 64 << 20;

pub struct EngineIngest {
    index: Arc<KvIndex>,
    block_size: u32,
    ranks: Mutex<FxHashMap<Rank, RankConverter>>,
}

impl EngineIngest {
    pub fn new(index: Arc<KvIndex>, block_size: u32) -> Result<Self, KvError> {
        crate::hashing::validate_block_size(block_size)?;
        Ok(Self { index, block_size, ranks: Mutex::new(FxHashMap::default()) })
    }

    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// Decodes one payload and applies it to `rank`; a batch that does not decode is skipped
    /// whole and counted. `Err` only when the index is closed.
    pub fn apply_payload(
        &self,
        rank: Rank,
        payload: &[u8],
        event_id: u64,
        now_ms: f64,
    ) -> Result<BatchOutcome, KvError> {
        let mut events = Vec::new();
        let outcome = self.convert_payload(rank, payload, event_id, &mut events);
        let committed = self.commit(events, now_ms);
        self.add_counters(rank, &outcome.counters);
        committed?;
        Ok(outcome)
    }

    /// Hands converted events to the index (one writer message per worker, however many
    /// batches they came from). `Err` only when the index is closed.
    pub fn commit(&self, events: Vec<RouterEvent>, now_ms: f64) -> Result<(), KvError> {
        if events.is_empty() {
            return Ok(());
        }
        self.index.apply_events(events, now_ms)
    }

    /// [`EngineIngest::apply_payload`] without the commit: the index events are appended to
    /// `out`, so that a source draining a burst of frames wakes the index writers once per burst
    /// instead of once per batch (profiling showed the wake-ups costing more than the work for
    /// small batches). Conversion state is updated at once; the batch's counters come back in
    /// the outcome, for the caller to add with [`EngineIngest::add_counters`] once the events
    /// are committed. Counters that ran ahead of the index let a caller see `batches` grow,
    /// flush the index, and still miss the batch's blocks.
    pub fn convert_payload(
        &self,
        rank: Rank,
        payload: &[u8],
        event_id: u64,
        out: &mut Vec<RouterEvent>,
    ) -> BatchOutcome {
        let decoded = if payload.len() > MAX_PAYLOAD_BYTES {
            Err(format!("payload of {} bytes exceeds the {MAX_PAYLOAD_BYTES}-byte limit", payload.len()))
        } else {
            decode_batch(payload).map_err(|e| e.0)
        };
        let before = out.len();
        let mut outcome = BatchOutcome::default();
        {
            let mut ranks = self.ranks.lock();
            let conv = ranks.entry(rank).or_default();
            match decoded {
                Err(message) => {
                    outcome.counters.decode_error(&message);
                    outcome.error = Some(message);
                    return outcome;
                }
                Ok(batch) => {
                    outcome.ts = Some(batch.ts);
                    let totals = std::mem::take(&mut conv.counters);
                    let c = &mut conv.counters;
                    c.batches += 1;
                    c.unknown_events += u64::from(batch.notes.unknown_events);
                    c.extra_fields += u64::from(batch.notes.extra_fields);
                    c.folded_hashes += u64::from(batch.notes.folded_hashes);
                    c.odd_length_hashes += u64::from(batch.notes.odd_length_hashes);
                    if batch.dp_rank.is_some_and(|r| r != i64::from(rank.dp_rank)) {
                        c.dp_rank_mismatches += 1;
                    }
                    outcome.convert = conv.convert(rank, self.block_size, event_id, &batch.events, out);
                    outcome.counters = std::mem::replace(&mut conv.counters, totals);
                }
            }
        }
        outcome.index_events = (out.len() - before) as u64;
        outcome
    }

    /// Adds a converted batch's counters to its rank's (see [`EngineIngest::convert_payload`]).
    pub fn add_counters(&self, rank: Rank, counters: &IngestCounters) {
        self.ranks.lock().entry(rank).or_default().counters.add(counters);
    }

    /// Drops everything of `rank` (index blocks, lower tiers, namespaces): an engine restart or
    /// an unrecoverable gap. The index's Cleared is appended to `out`, after the rank's events
    /// converted before it.
    pub fn reset_rank(&self, rank: Rank, out: &mut Vec<RouterEvent>) {
        if let Some(conv) = self.ranks.lock().get_mut(&rank) {
            conv.reset();
        }
        out.push(RouterEvent { rank, event_id: 0, lower_tier: None, data: EventData::Cleared });
    }

    /// Forgets a worker's conversion state (its index blocks are removed by the caller).
    pub fn forget_worker(&self, worker_id: WorkerId) {
        self.ranks.lock().retain(|rank, _| rank.worker_id != worker_id);
    }

    /// Counters and lower-tier block counts of one rank, or of every rank of the worker
    /// (`dp_rank: None`), or of everything (`worker_id: None`).
    pub fn counters(&self, worker_id: Option<WorkerId>, dp_rank: Option<u32>) -> (IngestCounters, [u64; 3]) {
        let ranks = self.ranks.lock();
        let mut total = IngestCounters::default();
        let mut tiers = [0u64; 3];
        for (rank, conv) in ranks.iter() {
            if worker_id.is_some_and(|w| w != rank.worker_id) || dp_rank.is_some_and(|d| d != rank.dp_rank) {
                continue;
            }
            total.add(&conv.counters);
            for (t, n) in tiers.iter_mut().zip(conv.tier_blocks()) {
                *t += n;
            }
        }
        (total, tiers)
    }
}
