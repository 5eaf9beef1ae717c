//! `kvroute-vs-dynamo scaling <workload.bin> [rounds]`: the `bench:index` workload with 1, 2 and 4
//! writer threads on both systems (ingest: apply every event, then wait until visible; the
//! systems alternate within each round), and the **concurrent** phase with 2 writers: the main
//! thread applies every event (built before the clock starts, as in `index`) while one reader
//! thread queries the trace's prompts in a loop as fast as it can; reported are the writers'
//! block-events/s and the reader's queries/s and latency percentiles while writes run, each the
//! median over the rounds (the systems alternate, as in the other phases). Also
//! checks `stats().memory_bytes` against the counting allocator, and what an empty index
//! allocates. Prints one JSON line.
//!
//! The concurrent phase also reports how the cores were shared: the writers' and the reader's
//! time on CPU as a share of the phase (`writerCores`, `readerCores`), and the writers'
//! block-events per second of their own CPU time. Three busy threads on two cores are split by
//! the scheduler, not by the indexes: kvroute's reader never waits, so it often keeps a core to
//! itself and the two writers share the other, while Dynamo's reader sleeps whenever it meets a
//! node a writer has locked, and its writers get the time it gives up. The per-CPU-second figure
//! is what each index's writers do with the time they get.

use crate::alloc;
use crate::index_bench::{dynamo_apply, dynamo_events, kvroute_apply, kvroute_batches, pct, read, Op, WRITERS};
use dynamo_kv_router::indexer::KvIndexerInterface;
use dynamo_kv_router::protocols::LocalBlockHash;
use dynamo_kv_router::{ConcurrentRadixTreeCompressed, ThreadPoolIndexer};
use kvroute_core::index::KvIndex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

type Dynamo = ThreadPoolIndexer<ConcurrentRadixTreeCompressed>;

fn kvroute_ingest(ops: &[Op], writers: usize) -> f64 {
    let batches = kvroute_batches(ops);
    kvroute_apply(&KvIndex::new(writers).expect("index"), batches)
}

async fn dynamo_ingest(ops: &[Op], writers: usize) -> f64 {
    let events = dynamo_events(ops);
    dynamo_apply(&Dynamo::new(ConcurrentRadixTreeCompressed::new(), writers, 64), events).await
}

/// Reader latencies (µs) and queries, until `stop`.
fn read_until(stop: &AtomicBool, queries: &[Vec<u64>], mut find: impl FnMut(&[u64])) -> Vec<f64> {
    let mut lat = Vec::new();
    'outer: loop {
        for q in queries {
            if stop.load(Ordering::Relaxed) {
                break 'outer;
            }
            let t = Instant::now();
            find(q);
            lat.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    lat
}

/// The threads' time on CPU while the writes ran: the index's writer threads together, the
/// reader, and each kind of thread by name (the writers, the reader, the thread applying events),
/// to see how the two cores were shared.
struct CpuShares {
    writers_ms: f64,
    reader_ms: f64,
    by_name: BTreeMap<String, f64>,
}

impl CpuShares {
    /// Between two snapshots; `writer_prefix` as in [`crate::cpu::index_threads_ms`] (`None` for
    /// Dynamo's pool threads, which carry the process's name).
    fn between(
        before: &BTreeMap<u32, (String, u64)>,
        after: &BTreeMap<u32, (String, u64)>,
        writer_prefix: Option<&str>,
    ) -> Self {
        let by_name = crate::cpu::ran_ms(before, after);
        Self {
            writers_ms: crate::cpu::index_threads_ms(before, after, writer_prefix).iter().sum(),
            reader_ms: by_name.get(READER).copied().unwrap_or(0.0),
            by_name,
        }
    }
}

const READER: &str = "bench-reader";

fn summary(block_events: u64, write_s: f64, mut lat: Vec<f64>, cpu: CpuShares) -> serde_json::Value {
    lat.sort_by(f64::total_cmp);
    if lat.is_empty() {
        lat.push(0.0);
    }
    let wall_ms = write_s * 1e3;
    serde_json::json!({
        "writerBlockEventsPerSec": block_events as f64 / write_s,
        "readerQueriesPerSec": lat.len() as f64 / write_s,
        "readerUs": { "p50": pct(&lat, 50.0), "p99": pct(&lat, 99.0), "p999": pct(&lat, 99.9) },
        "writerCores": cpu.writers_ms / wall_ms,
        "readerCores": cpu.reader_ms / wall_ms,
        "writerBlockEventsPerCpuSec": block_events as f64 / (cpu.writers_ms / 1e3),
        "cpuMs": cpu.by_name,
    })
}

/// Each figure of [`summary`]'s shape, the median over the runs (figure by figure: one run's
/// writers and another's reader may be the medians).
fn medians(runs: &[serde_json::Value]) -> serde_json::Value {
    let median = |get: &dyn Fn(&serde_json::Value) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(get).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let figure = |path: &[&str]| {
        median(&|run: &serde_json::Value| path.iter().fold(run, |v, k| &v[*k]).as_f64().expect("a number"))
    };
    serde_json::json!({
        "writerBlockEventsPerSec": figure(&["writerBlockEventsPerSec"]),
        "readerQueriesPerSec": figure(&["readerQueriesPerSec"]),
        "readerUs": {
            "p50": figure(&["readerUs", "p50"]),
            "p99": figure(&["readerUs", "p99"]),
            "p999": figure(&["readerUs", "p999"]),
        },
        "writerCores": figure(&["writerCores"]),
        "readerCores": figure(&["readerCores"]),
        "writerBlockEventsPerCpuSec": figure(&["writerBlockEventsPerCpuSec"]),
        "runs": runs.len(),
    })
}

pub fn kvroute_concurrent(ops: &[Op], queries: &[Vec<u64>], block_events: u64, writers: usize) -> serde_json::Value {
    let batches = kvroute_batches(ops);
    let index = Arc::new(KvIndex::new(writers).expect("index"));
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (index, stop, queries) = (Arc::clone(&index), Arc::clone(&stop), queries.to_vec());
        std::thread::Builder::new()
            .name(READER.into())
            .spawn(move || {
                read_until(&stop, &queries, |q| {
                    std::hint::black_box(index.find_matches(q, 0.0).expect("open"));
                })
            })
            .expect("reader thread")
    };
    let cpu = crate::cpu::per_thread();
    let write_s = kvroute_apply(&index, batches);
    let cpu = CpuShares::between(&cpu, &crate::cpu::per_thread(), Some("kvr-writer-"));
    stop.store(true, Ordering::Relaxed);
    summary(block_events, write_s, reader.join().expect("reader"), cpu)
}

pub async fn dynamo_concurrent(
    ops: &[Op],
    queries: &[Vec<u64>],
    block_events: u64,
    writers: usize,
) -> serde_json::Value {
    let events = dynamo_events(ops);
    let indexer = Arc::new(Dynamo::new(ConcurrentRadixTreeCompressed::new(), writers, 64));
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (indexer, stop, queries) = (Arc::clone(&indexer), Arc::clone(&stop), queries.to_vec());
        std::thread::Builder::new()
            .name(READER.into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
                read_until(&stop, &queries, |q| {
                    let hashes: Vec<LocalBlockHash> = q.iter().map(|&h| LocalBlockHash(h)).collect();
                    std::hint::black_box(rt.block_on(indexer.find_matches(hashes)).expect("find"));
                })
            })
            .expect("reader thread")
    };
    let cpu = crate::cpu::per_thread();
    let write_s = dynamo_apply(&indexer, events).await;
    let cpu = CpuShares::between(&cpu, &crate::cpu::per_thread(), None);
    stop.store(true, Ordering::Relaxed);
    summary(block_events, write_s, reader.join().expect("reader"), cpu)
}

/// `stats().memory_bytes` against the counting allocator, for the full index and an empty one.
fn memory_accuracy(ops: &[Op]) -> serde_json::Value {
    let before = alloc::live();
    let empty = KvIndex::new(2).expect("index");
    let empty_live = alloc::live() - before;
    let empty_reported = empty.stats().expect("open").0.memory_bytes;
    drop(empty);
    let before = alloc::live();
    let batches = kvroute_batches(ops);
    let index = KvIndex::new(2).expect("index");
    kvroute_apply(&index, batches);
    let live = alloc::live() - before;
    let reported = index.stats().expect("open").0.memory_bytes;
    drop(index);
    let after_close = alloc::live() - before;
    serde_json::json!({
        "emptyIndexLiveBytes": empty_live,
        "emptyIndexReportedBytes": empty_reported,
        "fullIndexLiveBytes": live,
        "fullIndexReportedBytes": reported,
        "reportedOverLive": reported as f64 / live as f64,
        "liveBytesAfterDrop": after_close,
    })
}

pub async fn run(path: &str, rounds: usize) -> serde_json::Value {
    let ops = read(path);
    let block_events = crate::index_bench::block_events(&ops);
    let queries: Vec<Vec<u64>> =
        ops.iter().filter_map(|o| if let Op::Query(q) = o { Some(q.clone()) } else { None }).collect();
    let mut scaling = serde_json::Map::new();
    for writers in [1usize, 2, 4] {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            ours.push(kvroute_ingest(&ops, writers));
            theirs.push(dynamo_ingest(&ops, writers).await);
        }
        ours.sort_by(f64::total_cmp);
        theirs.sort_by(f64::total_cmp);
        let (k, d) = (ours[ours.len() / 2], theirs[theirs.len() / 2]);
        scaling.insert(
            writers.to_string(),
            serde_json::json!({
                "kvrouteBlockEventsPerSec": block_events as f64 / k,
                "dynamoBlockEventsPerSec": block_events as f64 / d,
                "ratio": d / k,
            }),
        );
    }
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        ours.push(kvroute_concurrent(&ops, &queries, block_events, WRITERS));
        theirs.push(dynamo_concurrent(&ops, &queries, block_events, WRITERS).await);
    }
    let concurrent = serde_json::json!({ "kvroute": medians(&ours), "dynamo": medians(&theirs) });
    serde_json::json!({
        "blockEvents": block_events,
        "rounds": rounds,
        "ingestByWriters": scaling,
        "concurrent": concurrent,
        "memory": memory_accuracy(&ops),
    })
}
