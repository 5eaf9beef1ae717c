//! `kvroute-vs-dynamo index <workload.bin> [rounds]`: the `bench:index` Mooncake workload (a
//! `KVRW` file: queries and packed event batches, see `bench/index-workload.ts`) through
//! kvroute-core's `KvIndex` and Dynamo 1.6.1's `ThreadPoolIndexer<ConcurrentRadixTreeCompressed>`,
//! both with 2 writer threads, events parsed before timing.
//!
//! Every timed region starts with its events already built: each system gets its own copy of the
//! events before the clock starts (parsing and copying events is the producer's work, the same
//! for both, not the index's). Until 2026-12-02 the ingest phases cloned each event inside the
//! timed loop; that variant is still measured, as `ingestRatioCloningInLoop`, for continuity.
//!
//! Phases: **ingest** (apply every event, then wait until visible; also each index thread's time
//! on CPU, since a round's wall time is its slowest writer's and the two virtual CPUs of a
//! shared VM do not run equally fast: the CPU-time ratio does not depend on which writer drew
//! the slower one), **lockstep** (the trace walk: each op's events visible before the next
//! query; each system walks alone, alternating over the rounds, and both answer from the same
//! states, overlaps compared), **idle find** (every query on the full index: p50/p99/p99.9),
//! and **memory** (live heap from the counting allocator per held (rank, block)). Prints one
//! JSON line.

use crate::alloc;
use dynamo_kv_router::indexer::KvIndexerInterface;
use dynamo_kv_router::protocols::{
    ExternalSequenceBlockHash, KvCacheEvent, KvCacheEventData, KvCacheRemoveData, KvCacheStoreData,
    KvCacheStoredBlockData, LocalBlockHash, RouterEvent as DynEvent,
};
use dynamo_kv_router::{ConcurrentRadixTreeCompressed, ThreadPoolIndexer};
use kvroute_core::index::{packed, EventData, KvIndex, RouterEvent};
use std::collections::BTreeMap;
use std::time::Instant;

pub const WRITERS: usize = 2;

pub enum Op {
    Query(Vec<u64>),
    Events(Vec<RouterEvent>, Vec<DynEvent>, u64),
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"))
}

pub fn to_dynamo(e: &RouterEvent) -> DynEvent {
    let data = match &e.data {
        EventData::Stored { parent, blocks } => KvCacheEventData::Stored(KvCacheStoreData {
            parent_hash: parent.map(ExternalSequenceBlockHash),
            start_position: None,
            blocks: blocks
                .iter()
                .map(|b| KvCacheStoredBlockData {
                    block_hash: ExternalSequenceBlockHash(b.ext),
                    tokens_hash: LocalBlockHash(b.local),
                    mm_extra_info: None,
                })
                .collect(),
        }),
        EventData::Removed { hashes } => KvCacheEventData::Removed(KvCacheRemoveData {
            block_hashes: hashes.iter().map(|&h| ExternalSequenceBlockHash(h)).collect(),
        }),
        EventData::Cleared => KvCacheEventData::Cleared,
    };
    DynEvent::new(e.rank.worker_id, KvCacheEvent { event_id: e.event_id, data, dp_rank: e.rank.dp_rank })
}

pub fn read(path: &str) -> Vec<Op> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    assert_eq!(&b[..4], b"KVRW", "{path} is not an index workload");
    let count = u32_at(&b, 16) as usize;
    let mut o = 20;
    let mut ops = Vec::with_capacity(count);
    for _ in 0..count {
        let kind = u32_at(&b, o);
        o += 4;
        if kind == 1 {
            let n = u32_at(&b, o) as usize;
            o += 4;
            ops.push(Op::Query(
                (0..n).map(|i| u64::from_le_bytes(b[o + 8 * i..o + 8 * i + 8].try_into().expect("8"))).collect(),
            ));
            o += 8 * n;
        } else {
            let (m, w) = (u32_at(&b, o) as usize, u32_at(&b, o + 4) as usize);
            o += 8;
            let meta: Vec<u32> = (0..m).map(|i| u32_at(&b, o + 4 * i)).collect();
            o += 4 * m;
            let words: Vec<u64> =
                (0..w).map(|i| u64::from_le_bytes(b[o + 8 * i..o + 8 * i + 8].try_into().expect("8"))).collect();
            o += 8 * w;
            let events = packed::decode(&meta, &words).expect("valid packed batch");
            let block_events = meta.chunks_exact(4).map(|m| u64::from(m[3])).sum();
            let dyn_events = events.iter().map(to_dynamo).collect();
            ops.push(Op::Events(events, dyn_events, block_events));
        }
    }
    ops
}

/// The block-events of a workload's event ops (what every rate divides by).
pub fn block_events(ops: &[Op]) -> u64 {
    ops.iter().map(|o| if let Op::Events(_, _, n) = o { *n } else { 0 }).sum()
}

/// kvroute's copy of every `Events` op's batch, in order, built before a timed region.
pub fn kvroute_batches(ops: &[Op]) -> Vec<Vec<RouterEvent>> {
    ops.iter().filter_map(|o| if let Op::Events(e, _, _) = o { Some(e.clone()) } else { None }).collect()
}

/// Dynamo's copy of the same batches.
fn dynamo_batches(ops: &[Op]) -> Vec<Vec<DynEvent>> {
    ops.iter().filter_map(|o| if let Op::Events(_, e, _) = o { Some(e.clone()) } else { None }).collect()
}

/// Dynamo's copy of the same events, one `RouterEvent` at a time as its indexer takes them.
pub fn dynamo_events(ops: &[Op]) -> Vec<DynEvent> {
    dynamo_batches(ops).into_iter().flatten().collect()
}

/// Applies prebuilt batches to a new kvroute index and waits until they are visible; seconds.
pub fn kvroute_apply(index: &KvIndex, batches: Vec<Vec<RouterEvent>>) -> f64 {
    let t0 = Instant::now();
    for batch in batches {
        index.apply_events(batch, 0.0).expect("open");
    }
    index.flush().expect("flush");
    t0.elapsed().as_secs_f64()
}

/// The same through Dynamo's indexer.
pub async fn dynamo_apply(indexer: &ThreadPoolIndexer<ConcurrentRadixTreeCompressed>, events: Vec<DynEvent>) -> f64 {
    let t0 = Instant::now();
    for event in events {
        indexer.apply_event(event).await;
    }
    indexer.flush_and_wait().await.expect("flush");
    t0.elapsed().as_secs_f64()
}

/// kvroute's ingest as measured until 2026-12-02: each batch cloned inside the timed loop.
fn kvroute_apply_cloning(index: &KvIndex, ops: &[Op]) -> f64 {
    let t0 = Instant::now();
    for op in ops {
        if let Op::Events(e, _, _) = op {
            index.apply_events(e.clone(), 0.0).expect("open");
        }
    }
    index.flush().expect("flush");
    t0.elapsed().as_secs_f64()
}

/// Dynamo's ingest as measured until 2026-12-02.
async fn dynamo_apply_cloning(indexer: &ThreadPoolIndexer<ConcurrentRadixTreeCompressed>, ops: &[Op]) -> f64 {
    let t0 = Instant::now();
    for op in ops {
        if let Op::Events(_, e, _) = op {
            for ev in e {
                indexer.apply_event(ev.clone()).await;
            }
        }
    }
    indexer.flush_and_wait().await.expect("flush");
    t0.elapsed().as_secs_f64()
}

fn ours(index: &KvIndex, q: &[u64]) -> BTreeMap<(u64, u32), u32> {
    index
        .find_matches(q, 0.0)
        .expect("open")
        .into_iter()
        .map(|s| ((s.rank.worker_id, s.rank.dp_rank), s.blocks))
        .collect()
}

async fn theirs(indexer: &ThreadPoolIndexer<ConcurrentRadixTreeCompressed>, q: &[u64]) -> BTreeMap<(u64, u32), u32> {
    let scores = indexer.find_matches(q.iter().map(|&h| LocalBlockHash(h)).collect()).await.expect("find");
    scores.scores.iter().map(|(k, v)| ((k.worker_id, k.dp_rank), *v)).collect()
}

pub fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((p / 100.0 * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
}

type Answers = Vec<BTreeMap<(u64, u32), u32>>;

/// kvroute's lockstep walk: seconds, and every query's overlaps.
pub fn kvroute_walk(ops: &[Op]) -> (f64, Answers) {
    let index = KvIndex::new(WRITERS).expect("index");
    let (mut seconds, mut answers) = (0.0, Vec::new());
    let mut batches = kvroute_batches(ops).into_iter();
    for op in ops {
        let t = Instant::now();
        match op {
            Op::Events(..) => {
                index.apply_events(batches.next().expect("one batch per op"), 0.0).expect("open");
                index.flush().expect("flush");
                seconds += t.elapsed().as_secs_f64();
            }
            Op::Query(q) => {
                let a = ours(&index, q);
                seconds += t.elapsed().as_secs_f64();
                answers.push(a);
            }
        }
    }
    (seconds, answers)
}

/// The same walk through Dynamo's indexer.
async fn dynamo_walk(ops: &[Op]) -> (f64, Answers) {
    let indexer = ThreadPoolIndexer::new(ConcurrentRadixTreeCompressed::new(), WRITERS, 64);
    let (mut seconds, mut answers) = (0.0, Vec::new());
    let mut batches = dynamo_batches(ops).into_iter();
    for op in ops {
        let t = Instant::now();
        match op {
            Op::Events(..) => {
                for ev in batches.next().expect("one batch per op") {
                    indexer.apply_event(ev).await;
                }
                indexer.flush_and_wait().await.expect("flush");
                seconds += t.elapsed().as_secs_f64();
            }
            Op::Query(q) => {
                let a = theirs(&indexer, q).await;
                seconds += t.elapsed().as_secs_f64();
                answers.push(a);
            }
        }
    }
    (seconds, answers)
}

pub async fn run(path: &str, rounds: usize) -> serde_json::Value {
    let ops = read(path);
    let block_events = block_events(&ops);
    let queries: Vec<&Vec<u64>> =
        ops.iter().filter_map(|o| if let Op::Query(q) = o { Some(q) } else { None }).collect();
    let (mut kv_ingest, mut dyn_ingest, mut kv_bytes, mut dyn_bytes) = (Vec::new(), Vec::new(), 0isize, 0isize);
    let mut held = 0u64;
    let (mut kv_find, mut dyn_find) = (Vec::new(), Vec::new());
    let (mut kv_cloning, mut dyn_cloning) = (Vec::new(), Vec::new());
    let (mut kv_faults, mut dyn_faults) = (Vec::new(), Vec::new());
    // Each round's time on CPU of each index thread (kvroute's writers, Dynamo's pool threads).
    let (mut kv_cpu, mut dyn_cpu): (Vec<Vec<f64>>, Vec<Vec<f64>>) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        // The events are built after `before`: the index consumes and frees them, so what is
        // live once they are visible is the index alone.
        let before = alloc::live();
        let batches = kvroute_batches(&ops);
        let index = KvIndex::new(WRITERS).expect("index");
        let (faults, cpu) = (alloc::minor_faults(), crate::cpu::per_thread());
        kv_ingest.push(kvroute_apply(&index, batches));
        kv_faults.push(alloc::minor_faults() - faults);
        kv_cpu.push(crate::cpu::index_threads_ms(&cpu, &crate::cpu::per_thread(), Some("kvr-writer-")));
        kv_bytes = alloc::live() - before;
        held = index.stats().expect("open").0.blocks;
        if round + 1 == rounds {
            for q in &queries {
                let t = Instant::now();
                std::hint::black_box(index.find_matches(q, 0.0).expect("open"));
                kv_find.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
        drop(index);

        let before = alloc::live();
        let events = dynamo_events(&ops);
        let indexer = ThreadPoolIndexer::new(ConcurrentRadixTreeCompressed::new(), WRITERS, 64);
        let (faults, cpu) = (alloc::minor_faults(), crate::cpu::per_thread());
        dyn_ingest.push(dynamo_apply(&indexer, events).await);
        dyn_faults.push(alloc::minor_faults() - faults);
        dyn_cpu.push(crate::cpu::index_threads_ms(&cpu, &crate::cpu::per_thread(), None));
        dyn_bytes = alloc::live() - before;
        if round + 1 == rounds {
            for q in &queries {
                let t = Instant::now();
                std::hint::black_box(
                    indexer.find_matches(q.iter().map(|&h| LocalBlockHash(h)).collect()).await.expect("find"),
                );
                dyn_find.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
        drop(indexer);

        kv_cloning.push(kvroute_apply_cloning(&KvIndex::new(WRITERS).expect("index"), &ops));
        let indexer = ThreadPoolIndexer::new(ConcurrentRadixTreeCompressed::new(), WRITERS, 64);
        dyn_cloning.push(dynamo_apply_cloning(&indexer, &ops).await);
    }
    // Lockstep: each system walks the trace with each op's events visible before the next query,
    // alone (the other's threads do not exist meanwhile: interleaving the two walks op by op made
    // each pay for the other's idle threads), alternating over the rounds; the answers of the
    // last round are compared query by query.
    let (mut kv_walks, mut dyn_walks) = (Vec::new(), Vec::new());
    let (mut kv_answers, mut dyn_answers) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (t, answers) = kvroute_walk(&ops);
        kv_walks.push(t);
        kv_answers = answers;
        let (t, answers) = dynamo_walk(&ops).await;
        dyn_walks.push(t);
        dyn_answers = answers;
    }
    let differing = kv_answers.iter().zip(&dyn_answers).filter(|(a, b)| a != b).count();
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    kv_find.sort_by(f64::total_cmp);
    dyn_find.sort_by(f64::total_cmp);
    let (ki, di) = (median(kv_ingest.clone()), median(dyn_ingest.clone()));
    let (kv_walk, dyn_walk) = (median(kv_walks.clone()), median(dyn_walks.clone()));
    serde_json::json!({
        "blockEvents": block_events,
        "queries": queries.len(),
        "rounds": rounds,
        "ingestSeconds": { "kvroute": kv_ingest, "dynamo": dyn_ingest },
        "ingestBlockEventsPerSec": { "kvroute": block_events as f64 / ki, "dynamo": block_events as f64 / di },
        "ingestRatio": di / ki,
        "ingestMinorFaults": { "kvroute": kv_faults, "dynamo": dyn_faults },
        "ingestThreadCpuMs": { "kvroute": kv_cpu, "dynamo": dyn_cpu },
        "ingestCpuRatio": median(dyn_cpu.iter().map(|t| t.iter().sum()).collect()) / median(kv_cpu.iter().map(|t| t.iter().sum()).collect()),
        "ingestRatioCloningInLoop": median(dyn_cloning.clone()) / median(kv_cloning.clone()),
        "lockstepSeconds": { "kvroute": kv_walks, "dynamo": dyn_walks },
        "lockstepTimeRatio": kv_walk / dyn_walk,
        "idleFindUs": {
            "kvroute": { "p50": pct(&kv_find, 50.0), "p99": pct(&kv_find, 99.0), "p999": pct(&kv_find, 99.9) },
            "dynamo": { "p50": pct(&dyn_find, 50.0), "p99": pct(&dyn_find, 99.0), "p999": pct(&dyn_find, 99.9) }
        },
        "heldBlocks": held,
        "liveBytesPerHeldBlock": { "kvroute": kv_bytes as f64 / held as f64, "dynamo": dyn_bytes as f64 / held as f64 },
        "queriesWithDifferentOverlaps": differing,
    })
}
