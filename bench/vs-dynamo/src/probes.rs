//! Profiling probes on the `bench:index` workload: `tree` (the bare single-threaded tree: no
//! threads, no second copy; block-events/s), `find` (mean µs per query on the full index),
//! `lockstep` (seconds for the trace walk), `ingest-only` (`KvIndex` with 2 writers,
//! block-events/s), `ingest-rounds` (the comparison's ingest rounds alone, each round's
//! seconds and page faults), `concurrent` (the comparison's concurrent phase alone, both systems
//! alternating), `mix` (the workload's event mix and how it splits over the writers) and
//! `ingest-once` (one system's ingest, to count its instructions under callgrind). Run under
//! `perf record` to see where time goes; the comparison itself is `index`.

use crate::index_bench::{read, Op, WRITERS};
use kvroute_core::index::KvIndex;
use std::time::Instant;

/// Probe: the bare single-threaded tree on the same events (no threads, no second copy).
pub fn tree_only(path: &str) -> f64 {
    let ops = read(path);
    let block_events = crate::index_bench::block_events(&ops);
    let mut rates = Vec::new();
    for _ in 0..repeat() {
        let before = crate::alloc::live();
        let mut tree = kvroute_core::index::Tree::new();
        let faults = crate::alloc::minor_faults();
        let t0 = Instant::now();
        for op in &ops {
            if let Op::Events(e, _, _) = op {
                for ev in e {
                    tree.apply_event(ev, 0.0);
                }
            }
        }
        let seconds = t0.elapsed().as_secs_f64();
        rates.push(block_events as f64 / seconds);
        eprint!("{seconds:.4} s, {} faults: ", crate::alloc::minor_faults() - faults);
        eprintln!("tree live bytes {} reported {}", crate::alloc::live() - before, tree.stats().memory_bytes);
    }
    best(rates)
}

/// How many times a probe repeats its timed part (`REPEAT`, default 1), for profiling runs
/// long enough that reading the workload does not dominate the samples.
fn repeat() -> usize {
    std::env::var("REPEAT").map_or(1, |r| r.parse().expect("REPEAT"))
}

/// Writer threads of the probe's index (`WRITERS`, default the comparison's 2).
fn writers() -> usize {
    std::env::var("WRITERS").map_or(WRITERS, |w| w.parse().expect("WRITERS"))
}

/// The best of the repeated rates (the one least disturbed by other tenants of the machine).
fn best(rates: Vec<f64>) -> f64 {
    rates.into_iter().fold(0.0, f64::max)
}

/// Probe: kvroute's ingest alone (2 writers, apply every prebuilt event then flush); block-events/s.
pub fn ingest_only(path: &str) -> f64 {
    let ops = read(path);
    let block_events = crate::index_bench::block_events(&ops);
    let mut rates = Vec::new();
    for _ in 0..repeat() {
        let batches = crate::index_bench::kvroute_batches(&ops);
        let index = KvIndex::new(writers()).expect("index");
        let faults = crate::alloc::minor_faults();
        let seconds = crate::index_bench::kvroute_apply(&index, batches);
        let faults = crate::alloc::minor_faults() - faults;
        rates.push(block_events as f64 / seconds);
        let stats = index.stats().expect("open").0;
        eprintln!(
            "{seconds:.4} s, {faults} faults: held {} positions {} nodes {} memoryBytes {} bytes/held {:.1}",
            stats.blocks,
            stats.tree_blocks,
            stats.tree_nodes,
            stats.memory_bytes,
            stats.memory_bytes as f64 / stats.blocks as f64
        );
    }
    best(rates)
}

/// Probe: kvroute's lockstep walk alone, as the comparison times it (for profiling); seconds.
pub fn lockstep_only(path: &str) -> f64 {
    crate::index_bench::kvroute_walk(&read(path)).0
}

/// Probe: every query on the full index, `REPEAT` passes (at least 9); the best pass, in mean µs per query.
pub fn find_only(path: &str) -> f64 {
    let ops = read(path);
    let index = KvIndex::new(writers()).expect("index");
    for op in &ops {
        if let Op::Events(e, _, _) = op {
            index.apply_events(e.clone(), 0.0).expect("open");
        }
    }
    index.flush().expect("flush");
    // The best of several passes: this VM's other tenants slow whole passes down.
    let queries: Vec<&Vec<u64>> =
        ops.iter().filter_map(|op| if let Op::Query(q) = op { Some(q) } else { None }).collect();
    let mut best = f64::MAX;
    for _ in 0..repeat().max(9) {
        let t0 = Instant::now();
        for q in &queries {
            std::hint::black_box(index.find_matches(q, 0.0).expect("open"));
        }
        best = best.min(t0.elapsed().as_secs_f64() * 1e6 / queries.len() as f64);
    }
    best
}

/// Probe: the workload's event mix (events and blocks per kind, blocks per event), to reason
/// about where a writer's time can go.
pub fn mix(path: &str) -> String {
    use kvroute_core::index::EventData;
    let ops = read(path);
    let (mut stored, mut stored_blocks, mut removed, mut removed_blocks, mut cleared) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut hist = [0u64; 8];
    let (mut batches, mut queries) = (0u64, 0u64);
    // Block-events per writer when workers are pinned round robin on first sight (as `KvIndex`
    // pins them), for `WRITERS` writers: how evenly the work splits.
    let mut pinned: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    let mut per_writer = vec![0u64; writers()];
    for op in &ops {
        match op {
            Op::Query(_) => queries += 1,
            Op::Events(e, _, _) => {
                batches += 1;
                for ev in e {
                    let n = pinned.len();
                    let w = *pinned.entry(ev.rank.worker_id).or_insert(n % per_writer.len());
                    per_writer[w] += match &ev.data {
                        EventData::Stored { blocks, .. } => {
                            stored += 1;
                            stored_blocks += blocks.len() as u64;
                            hist[(64 - (blocks.len() as u64).leading_zeros()).min(7) as usize] += 1;
                            blocks.len() as u64
                        }
                        EventData::Removed { hashes } => {
                            removed += 1;
                            removed_blocks += hashes.len() as u64;
                            hashes.len() as u64
                        }
                        EventData::Cleared => {
                            cleared += 1;
                            0
                        }
                    };
                }
            }
        }
    }
    format!(
        "batches {batches} queries {queries} stored {stored} ({stored_blocks} blocks) removed {removed} ({removed_blocks} blocks) cleared {cleared}; stored sizes by log2 bucket [0,1,2-3,4-7,8-15,16-31,32-63,64+]: {hist:?}; block-events per writer (round robin on first sight): {per_writer:?}"
    )
}

/// Probe: the comparison's concurrent phase alone (`WRITERS` writers, default 2, applying every
/// event while one reader queries in a loop), kvroute and Dynamo alternating for `REPEAT` rounds
/// (default 3); one JSON line per run. `ONLY=kvroute` or `ONLY=dynamo` runs one system (for
/// profiling). `WRITERS=1` leaves a core to each of the two busy threads on a 2-core machine:
/// the phase as it would run with a core per thread.
pub async fn concurrent(path: &str) {
    let only = std::env::var("ONLY").ok();
    let runs = |system: &str| only.as_deref().is_none_or(|o| o == system);
    let ops = read(path);
    let block_events = crate::index_bench::block_events(&ops);
    let queries: Vec<Vec<u64>> =
        ops.iter().filter_map(|o| if let Op::Query(q) = o { Some(q.clone()) } else { None }).collect();
    for _ in 0..repeat().max(3) {
        if runs("kvroute") {
            println!("kvroute {}", crate::scaling::kvroute_concurrent(&ops, &queries, block_events, writers()));
        }
        if runs("dynamo") {
            println!("dynamo  {}", crate::scaling::dynamo_concurrent(&ops, &queries, block_events, writers()).await);
        }
    }
}

/// Probe: the comparison's ingest rounds alone, as `index` runs them (kvroute, then Dynamo, for
/// `REPEAT` rounds, default 3), each round's seconds, minor page faults and each thread's time
/// on CPU printed (kvroute's writers are named; Dynamo's pool threads are not); with
/// `ONLY=kvroute` Dynamo's rounds are skipped, to see what running after it does to kvroute's.
pub async fn ingest_rounds(path: &str) {
    use dynamo_kv_router::{ConcurrentRadixTreeCompressed, ThreadPoolIndexer};
    let only_kvroute = std::env::var("ONLY").is_ok_and(|o| o == "kvroute");
    let ops = read(path);
    for round in 0..repeat().max(3) {
        let batches = crate::index_bench::kvroute_batches(&ops);
        let index = KvIndex::new(writers()).expect("index");
        let (faults, cpu) = (crate::alloc::minor_faults(), crate::cpu::per_thread());
        let seconds = crate::index_bench::kvroute_apply(&index, batches);
        let faults = crate::alloc::minor_faults() - faults;
        let ran = crate::cpu::ran_ms(&cpu, &crate::cpu::per_thread());
        drop(index);
        print!("round {round}: kvroute {seconds:.4} s ({faults} faults; ms on CPU {ran:.1?})");
        if !only_kvroute {
            let events = crate::index_bench::dynamo_events(&ops);
            let indexer = ThreadPoolIndexer::new(ConcurrentRadixTreeCompressed::new(), WRITERS, 64);
            let (faults, cpu) = (crate::alloc::minor_faults(), crate::cpu::per_thread());
            let seconds = crate::index_bench::dynamo_apply(&indexer, events).await;
            let faults = crate::alloc::minor_faults() - faults;
            let ran = crate::cpu::index_threads_ms(&cpu, &crate::cpu::per_thread(), None);
            drop(indexer);
            print!(", dynamo {seconds:.4} s ({faults} faults; ms on CPU per pool thread {ran:.1?})");
        }
        println!();
    }
}

/// Probe: one system's ingest as the comparison runs it (`kvroute` or `dynamo`: its events
/// built first, then applied by `WRITERS` writer threads, default 2, and waited for), printing
/// the block-events.
/// The index is never torn down, so that the writer threads' work is the ingest alone:
/// `bench/vs-dynamo-instructions.ts` runs this under callgrind, one file per thread, and counts
/// the instructions of each system's writer threads (this VM has no hardware counters to ask).
pub async fn ingest_once(path: &str, system: &str) {
    use dynamo_kv_router::{ConcurrentRadixTreeCompressed, ThreadPoolIndexer};
    let ops = read(path);
    let block_events = crate::index_bench::block_events(&ops);
    match system {
        "kvroute" => {
            let batches = crate::index_bench::kvroute_batches(&ops);
            let index = KvIndex::new(writers()).expect("index");
            crate::index_bench::kvroute_apply(&index, batches);
            std::mem::forget(index);
        }
        "dynamo" => {
            let events = crate::index_bench::dynamo_events(&ops);
            let indexer = ThreadPoolIndexer::new(ConcurrentRadixTreeCompressed::new(), writers(), 64);
            crate::index_bench::dynamo_apply(&indexer, events).await;
            std::mem::forget(indexer);
        }
        other => panic!("ingest-once: unknown system {other:?} (kvroute or dynamo)"),
    }
    println!("{block_events}");
}
