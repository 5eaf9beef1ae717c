//! Profiling probes on the `bench:index` workload, kvroute only: `tree` (the bare single-threaded
//! tree: no threads, no second copy; block-events/s), `find` (mean µs per query on the full
//! index), `lockstep` (seconds for the trace walk) and `ingest` (`KvIndex` with 2 writers,
//! block-events/s). Run under `perf record` to see where time
//! goes; the comparison itself is `index`.

use crate::index_bench::{read, Op, WRITERS};
use kvroute_core::index::KvIndex;
use std::time::Instant;

/// Probe: the bare single-threaded tree on the same events (no threads, no second copy).
pub fn tree_only(path: &str) -> f64 {
    let ops = read(path);
    let block_events: u64 = ops.iter().map(|o| if let Op::Events(_, _, n) = o { *n } else { 0 }).sum();
    let mut rates = Vec::new();
    for _ in 0..repeat() {
        let before = crate::alloc::live();
        let mut tree = kvroute_core::index::Tree::new();
        let t0 = Instant::now();
        for op in &ops {
            if let Op::Events(e, _, _) = op {
                for ev in e {
                    tree.apply_event(ev, 0.0);
                }
            }
        }
        rates.push(block_events as f64 / t0.elapsed().as_secs_f64());
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

/// Probe: kvroute's ingest alone (2 writers, apply every event then flush); block-events/s.
pub fn ingest_only(path: &str) -> f64 {
    let ops = read(path);
    let block_events: u64 = ops.iter().map(|o| if let Op::Events(_, _, n) = o { *n } else { 0 }).sum();
    let mut rates = Vec::new();
    for _ in 0..repeat() {
        let index = KvIndex::new(writers()).expect("index");
        rates.push(block_events as f64 / crate::scaling::kvroute_apply_all(&index, &ops));
        let stats = index.stats().expect("open").0;
        eprintln!(
            "held {} memoryBytes {} bytes/held {:.1}",
            stats.blocks,
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
    let queries: Vec<&Vec<u64>> = ops.iter().filter_map(|op| if let Op::Query(q) = op { Some(q) } else { None }).collect();
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
