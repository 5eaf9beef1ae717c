//! Harnesses: `index` (see `index_bench.rs`: the `bench:index` workload's write path, reads and
//! memory), `scaling` (see `scaling.rs`: 1, 2 and 4 writers, writes concurrent with reads, memory
//! accounting), `replay` (see `replay_bench.rs`: Dynamo's own offline replay), `replay-disagg` (see
//! `replay_disagg_bench.rs`: its disaggregated replay), `ingest` (below),
//! profiling probes (`probes.rs`), and `clock`: the effective clock of the CPU it runs on
//! (`cpu::effective_ghz`), which the driver measures on each CPU before and after a sitting.
//!
//! `kvroute-vs-dynamo ingest <workload.kviw> [rounds]`: engine payloads → visible in the index,
//! kvroute-core's `EngineIngest` as its source thread drives it (decode, convert and hash each
//! frame, commit each burst of up to `BURST` frames to two writer threads) against
//! Dynamo 1.6.1's `zmq_wire` decoder and normalizer feeding a
//! `ThreadPoolIndexer<ConcurrentRadixTreeCompressed>` with 2 worker threads. The systems
//! alternate over the rounds; every round starts from an empty index. Afterwards both answer
//! every query of the workload and the overlaps are compared. Prints one JSON line.

mod alloc;
mod cpu;
mod index_bench;
mod probes;
mod replay_bench;
mod replay_disagg_bench;
mod scaling;
mod workload;

#[global_allocator]
static ALLOC: alloc::Counting = alloc::Counting;

use dynamo_kv_router::indexer::KvIndexerInterface;
use dynamo_kv_router::protocols::{LocalBlockHash, WorkerWithDpRank};
use dynamo_kv_router::zmq_wire::{decode_event_batch, ZmqEventNormalizer};
use dynamo_kv_router::{ConcurrentRadixTreeCompressed, ThreadPoolIndexer};
use kvroute_core::index::{KvIndex, Rank};
use kvroute_core::ingest::source::BURST;
use kvroute_core::ingest::EngineIngest;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;
use workload::Workload;

const WRITERS: usize = 2;

fn kvroute_round(w: &Workload) -> (f64, Arc<KvIndex>, u64) {
    let index = Arc::new(KvIndex::new(WRITERS).expect("index"));
    let ingest = EngineIngest::new(Arc::clone(&index), w.block_size).expect("ingest");
    let t0 = Instant::now();
    let mut errors = 0;
    // As a source thread does: convert every frame of a burst, commit the burst once.
    let mut pending = Vec::new();
    for burst in w.batches.chunks(BURST) {
        for b in burst {
            let outcome = ingest.convert_payload(Rank::new(b.worker, b.dp_rank), &b.payload, b.seq, &mut pending);
            errors += u64::from(outcome.error.is_some());
        }
        ingest.commit(std::mem::take(&mut pending), 0.0).expect("open");
    }
    index.flush().expect("flush");
    (t0.elapsed().as_secs_f64(), index, errors)
}

async fn dynamo_round(w: &Workload) -> (f64, ThreadPoolIndexer<ConcurrentRadixTreeCompressed>, u64) {
    let indexer = ThreadPoolIndexer::new(ConcurrentRadixTreeCompressed::new(), WRITERS, w.block_size);
    let mut normalizer = ZmqEventNormalizer::new(w.block_size);
    let t0 = Instant::now();
    let mut errors = 0;
    for b in &w.batches {
        let Ok(batch) = decode_event_batch(&b.payload) else {
            errors += 1;
            continue;
        };
        let worker = WorkerWithDpRank::new(b.worker, b.dp_rank);
        for raw in batch.events {
            if let Some(event) = normalizer.normalize(raw, b.seq, worker).and_then(|p| p.into_router_event()) {
                indexer.apply_event(event).await;
            }
        }
    }
    indexer.flush_and_wait().await.expect("flush");
    (t0.elapsed().as_secs_f64(), indexer, errors)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).is_some_and(|a| a == "clock") {
        // The effective clock of the CPU this runs on (pin it with `taskset`), in GHz.
        return println!("{:.3}", cpu::effective_ghz(200));
    }
    assert!(
        args.len() >= 3 && ["ingest", "index", "scaling", "replay", "replay-disagg", "tree", "find", "lockstep", "ingest-only", "ingest-rounds", "ingest-once", "mix", "concurrent"].contains(&args[1].as_str()),
        "usage: kvroute-vs-dynamo ingest|index|scaling|tree|find|lockstep|ingest-only|ingest-rounds|mix|concurrent <workload> [rounds], ingest-once <workload> <kvroute|dynamo>, replay <trace> <kv|round-robin> [arrival speedup] [router config JSON] [engine fields JSON], replay-disagg <trace> <kv|round-robin> <prefill workers> <decode workers> [arrival speedup] [router config JSON] [engine fields JSON], or clock"
    );
    match args[1].as_str() {
        "tree" => return println!("{}", probes::tree_only(&args[2])),
        "mix" => return println!("{}", probes::mix(&args[2])),
        "concurrent" => return probes::concurrent(&args[2]).await,
        "ingest-only" => return println!("{}", probes::ingest_only(&args[2])),
        "ingest-rounds" => return probes::ingest_rounds(&args[2]).await,
        "ingest-once" => return probes::ingest_once(&args[2], args.get(3).map_or("", String::as_str)).await,
        "find" => return println!("{}", probes::find_only(&args[2])),
        "lockstep" => return println!("{}", probes::lockstep_only(&args[2])),
        "replay" => {
            let speedup: f64 = args.get(4).map_or(1.0, |r| r.parse().expect("arrival speedup"));
            let (router, engine) = (args.get(5).cloned(), args.get(6).cloned());
            let (trace, policy) = (args[2].clone(), args[3].clone());
            return println!("{}", replay_bench::run_outside_tasks(trace, policy, speedup, router, engine));
        }
        "replay-disagg" => {
            let workers = |i: usize| args.get(i).and_then(|n| n.parse().ok()).expect("prefill and decode workers");
            let run = replay_disagg_bench::DisaggRun {
                trace: args[2].clone(),
                policy: args.get(3).cloned().expect("a policy"),
                prefill_workers: workers(4),
                decode_workers: workers(5),
                arrival_speedup: args.get(6).map_or(1.0, |r| r.parse().expect("arrival speedup")),
                router_fields: args.get(7).cloned(),
                engine_fields: args.get(8).cloned(),
            };
            return println!("{}", replay_disagg_bench::run_outside_tasks(run));
        }
        "scaling" => {
            let rounds: usize = args.get(3).map_or(3, |r| r.parse().expect("rounds"));
            return println!("{}", scaling::run(&args[2], rounds).await);
        }
        _ => {}
    }
    if args[1] == "index" {
        let rounds: usize = args.get(3).map_or(3, |r| r.parse().expect("rounds"));
        println!("{}", index_bench::run(&args[2], rounds).await);
        return;
    }
    let w = workload::read(&args[2]);
    let rounds: usize = args.get(3).map_or(3, |r| r.parse().expect("rounds"));
    let block_events: u64 = w.batches.iter().map(|b| b.block_events).sum();
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..rounds {
        let (s, index, e1) = kvroute_round(&w);
        ours.push(s);
        let (t, indexer, e2) = dynamo_round(&w).await;
        theirs.push(t);
        last = Some((index, indexer, e1, e2));
    }
    let (index, indexer, kv_errors, dyn_errors) = last.expect("one round");
    // Same overlaps on every query?
    let mut differing = 0usize;
    for q in &w.queries {
        let ours: BTreeMap<(u64, u32), u32> = index
            .find_matches(q, 0.0)
            .expect("open")
            .into_iter()
            .map(|s| ((s.rank.worker_id, s.rank.dp_rank), s.blocks))
            .collect();
        let hashes: Vec<LocalBlockHash> = q.iter().map(|&h| LocalBlockHash(h)).collect();
        let theirs_scores = indexer.find_matches(hashes).await.expect("find");
        let theirs: BTreeMap<(u64, u32), u32> =
            theirs_scores.scores.iter().map(|(k, v)| ((k.worker_id, k.dp_rank), *v)).collect();
        differing += usize::from(ours != theirs);
    }
    let (kv_s, dyn_s) = (median(ours.clone()), median(theirs.clone()));
    let out = serde_json::json!({
        "batches": w.batches.len(),
        "blockEvents": block_events,
        "rounds": rounds,
        "kvrouteSeconds": ours,
        "dynamoSeconds": theirs,
        "kvrouteBatchesPerSec": w.batches.len() as f64 / kv_s,
        "dynamoBatchesPerSec": w.batches.len() as f64 / dyn_s,
        "kvrouteBlockEventsPerSec": block_events as f64 / kv_s,
        "dynamoBlockEventsPerSec": block_events as f64 / dyn_s,
        "ratio": dyn_s / kv_s,
        "kvrouteDecodeErrors": kv_errors,
        "dynamoDecodeErrors": dyn_errors,
        "queries": w.queries.len(),
        "queriesWithDifferentOverlaps": differing,
    });
    println!("{out}");
}
