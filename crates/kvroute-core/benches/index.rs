//! The index benchmark workload in pure Rust: the same file and the same measurements as the
//! Node runs (`bench/index-run.ts`), so the cost of crossing into Node shows as a ratio.
//! Usage: `cargo bench -p kvroute-core --bench index [-- <workload file>]`; the default file is the
//! W = 16 workload that `npm run bench:index` writes.

use kvroute_core::index::{packed, IndexStats, KvIndex, RouterEvent};
use std::time::Instant;

const BATCH: usize = 512;

enum Op {
    Query(Vec<u64>),
    Events(Vec<RouterEvent>, u64),
}

fn u32_at(b: &[u8], o: &mut usize) -> u32 {
    let v = u32::from_le_bytes(b[*o..*o + 4].try_into().unwrap());
    *o += 4;
    v
}

fn u64s(b: &[u8], o: &mut usize, n: usize) -> Vec<u64> {
    let out = b[*o..*o + 8 * n].chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
    *o += 8 * n;
    out
}

fn read(path: &str) -> Vec<Op> {
    let b = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!(
                "cannot read the workload {path}: {e}\nrun `npm run bench:index` first: it writes the workload files"
            );
            std::process::exit(2);
        }
    };
    assert_eq!(&b[..4], b"KVRW", "not a kvroute workload file");
    let mut o = 4;
    assert_eq!(u32_at(&b, &mut o), 1);
    let (_workers, _block_size, count) = (u32_at(&b, &mut o), u32_at(&b, &mut o), u32_at(&b, &mut o));
    (0..count)
        .map(|_| match u32_at(&b, &mut o) {
            1 => {
                let n = u32_at(&b, &mut o) as usize;
                Op::Query(u64s(&b, &mut o, n))
            }
            _ => {
                let (m, w) = (u32_at(&b, &mut o) as usize, u32_at(&b, &mut o) as usize);
                let meta: Vec<u32> = (0..m).map(|_| u32_at(&b, &mut o)).collect();
                let words = u64s(&b, &mut o, w);
                let block_events = meta.chunks_exact(4).map(|c| u64::from(c[3])).sum();
                Op::Events(packed::decode(&meta, &words).expect("valid packed events"), block_events)
            }
        })
        .collect()
}

/// Peak resident set size in bytes (VmHWM), 0 where /proc is absent.
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l.split_whitespace().nth(1).unwrap_or("0").parse().unwrap_or(0))
        })
        .map_or(0, |kb: u64| kb * 1024)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[i.clamp(1, sorted.len()) - 1]
}

fn main() {
    let default = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/results/index-workload-w16.bin");
    let path = std::env::args().skip(1).find(|a| !a.starts_with("--")).unwrap_or_else(|| default.to_owned());
    let ops = read(&path);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
    let events: Vec<RouterEvent> =
        ops.iter().flat_map(|op| if let Op::Events(e, _) = op { e.clone() } else { Vec::new() }).collect();
    let block_events: u64 = ops.iter().map(|op| if let Op::Events(_, n) = op { *n } else { 0 }).sum();
    let rss_before = peak_rss();
    let ingest = KvIndex::new(threads).unwrap();
    let t0 = Instant::now();
    for chunk in events.chunks(BATCH) {
        ingest.apply_events(chunk.to_vec(), 0.0).unwrap();
    }
    ingest.flush().unwrap();
    let ingest_seconds = t0.elapsed().as_secs_f64();
    drop(ingest);

    let index = KvIndex::new(threads).unwrap();
    let mut latencies = Vec::new();
    let t0 = Instant::now();
    for op in &ops {
        match op {
            Op::Query(q) => {
                let start = Instant::now();
                std::hint::black_box(index.find_matches(q, 0.0).unwrap());
                latencies.push(start.elapsed().as_nanos() as f64);
            }
            Op::Events(e, _) => index.apply_events(e.clone(), 0.0).unwrap(),
        }
    }
    index.flush().unwrap();
    let interleaved_seconds = t0.elapsed().as_secs_f64();
    let (stats, _): (IndexStats, u64) = index.stats().unwrap();
    let query_seconds: f64 = latencies.iter().sum::<f64>() / 1e9;
    latencies.sort_by(f64::total_cmp);
    println!(
        "{{\"backend\":\"rust\",\"events\":{},\"blockEvents\":{},\"queries\":{},\"ingestSeconds\":{},\"eventsPerSec\":{},\"blockEventsPerSec\":{},\"interleavedSeconds\":{},\"findMatchesPerSec\":{},\"p50us\":{},\"p99us\":{},\"p999us\":{},\"heldBlocks\":{},\"treeNodes\":{},\"memoryBytes\":{},\"bytesPerHeldBlock\":{},\"peakRssDeltaMiB\":{}}}",
        events.len(),
        block_events,
        latencies.len(),
        ingest_seconds,
        events.len() as f64 / ingest_seconds,
        block_events as f64 / ingest_seconds,
        interleaved_seconds,
        latencies.len() as f64 / query_seconds,
        percentile(&latencies, 50.0) / 1000.0,
        percentile(&latencies, 99.0) / 1000.0,
        percentile(&latencies, 99.9) / 1000.0,
        stats.blocks,
        stats.tree_nodes,
        stats.memory_bytes,
        stats.memory_bytes as f64 / stats.blocks.max(1) as f64,
        (peak_rss().saturating_sub(rss_before)) as f64 / 1048576.0,
    );
}
