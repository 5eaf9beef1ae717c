//! The cost of approximate-mode predictions (`record_routing`, which predict-on-route calls once
//! per decision) on the Mooncake conversation trace: each request is routed to the rank with the
//! longest overlap (ties to the next in turn) and its blocks recorded there, as the router does.
//! Usage: `cargo bench -p kvroute-core --bench predict [-- [--bare] [--spread] <trace.jsonl> [requests] [writers]]`;
//! the default trace is `../shared/traces/conversation_trace.jsonl` beside the repository.
//! Prints one JSON line: microseconds per `record_routing` and per `overlaps` query. `--bare`
//! runs the single-threaded tree instead of the index (no writer threads, no second copy of the
//! view): the cost of the tree's own work. `--confirm` also plays each rank's engine: after each
//! prediction, the rank reports what it newly cached as a Stored event (the request's blocks past
//! the longest prefix it cached before, no eviction), which confirms the predicted blocks; its
//! cost per request is reported apart (`confirmUs`).

use kvroute_core::hashing::sequence_hashes;
use kvroute_core::index::event::{EventData, RouterEvent, StoredBlock};
use kvroute_core::index::tree::Tree;
use kvroute_core::index::{KvIndex, Rank};
use std::collections::HashSet;
use std::time::Instant;

/// Mooncake's hash ids stand for 512 tokens; at 64 tokens a block each is eight blocks.
const BLOCKS_PER_HASH_ID: u64 = 8;
const RANKS: u64 = 16;
const TTL_MS: f64 = 120_000.0;

struct Request {
    at_ms: f64,
    locals: Vec<u64>,
}

fn field<'a>(line: &'a str, name: &str) -> &'a str {
    let start = line.find(name).map(|i| i + name.len()).expect("field present");
    &line[start..]
}

fn read(path: &str, limit: usize) -> Vec<Request> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("cannot read the trace {path}: {e}\nit ships in ../shared/traces beside the repository");
            std::process::exit(2);
        }
    };
    text.lines()
        .take(limit)
        .map(|line| {
            let at = field(line, "\"timestamp\": ");
            let at_ms: f64 = at[..at.find(',').unwrap()].parse().unwrap();
            let ids = field(line, "\"hash_ids\": [");
            let ids = &ids[..ids.find(']').unwrap()];
            let locals = ids
                .split(", ")
                .filter(|s| !s.is_empty())
                .flat_map(|id| {
                    let id: u64 = id.parse().unwrap();
                    (0..BLOCKS_PER_HASH_ID)
                        .map(move |j| (id * BLOCKS_PER_HASH_ID + j).wrapping_mul(0x9E37_79B9_7F4A_7C15))
                })
                .collect();
            Request { at_ms, locals }
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let default = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/traces/conversation_trace.jsonl");
    let path = args.first().cloned().unwrap_or_else(|| default.to_owned());
    let limit = args.get(1).map_or(4000, |s| s.parse().unwrap());
    let writers = args.get(2).map_or(2, |s| s.parse().unwrap());
    let requests = read(&path, limit);
    let ranks: Vec<Rank> = (0..RANKS).map(|w| Rank { worker_id: w, dp_rank: 0 }).collect();
    let bare = std::env::args().any(|a| a == "--bare");
    let spread = std::env::args().any(|a| a == "--spread");
    let confirm = std::env::args().any(|a| a == "--confirm");
    // Each rank's engine cache, by sequence hash (`--confirm`).
    let mut cached: Vec<HashSet<u64>> = vec![HashSet::new(); ranks.len()];
    let mut confirm_ns = 0u128;
    let index = KvIndex::new(writers).unwrap();
    let mut tree = Tree::new();
    let (mut record_ns, mut query_ns, mut blocks) = (0u128, 0u128, 0usize);
    for (i, r) in requests.iter().enumerate() {
        let t = Instant::now();
        let overlaps: Vec<u32> = if bare {
            let scores = tree.find_matches(&r.locals, r.at_ms);
            ranks.iter().map(|rank| scores.iter().find(|s| s.rank == *rank).map_or(0, |s| s.blocks)).collect()
        } else {
            index.overlaps(&r.locals, None, r.at_ms, &ranks).unwrap().into_iter().map(|o| o.device).collect()
        };
        query_ns += t.elapsed().as_nanos();
        // The longest overlap; ties go to the next rank in turn. `--spread`: every rank in turn,
        // as a router weighing load spreads requests (most predicted blocks are then new).
        let turn = i % ranks.len();
        let best = if spread {
            turn
        } else {
            (0..ranks.len()).map(|k| (k + turn) % ranks.len()).rev().max_by_key(|&k| overlaps[k]).unwrap()
        };
        let t = Instant::now();
        if bare {
            let seq = sequence_hashes(&r.locals);
            tree.record_prediction(ranks[best], &r.locals, &seq, r.at_ms, r.at_ms + TTL_MS);
        } else {
            index.record_routing(ranks[best], r.locals.clone(), r.at_ms, r.at_ms + TTL_MS).unwrap();
        }
        record_ns += t.elapsed().as_nanos();
        blocks += r.locals.len();
        if confirm {
            let seq = sequence_hashes(&r.locals);
            let engine = &mut cached[best];
            let hit = seq.iter().take_while(|h| engine.contains(h)).count();
            if hit < seq.len() {
                engine.extend(&seq[hit..]);
                let blocks =
                    seq[hit..].iter().zip(&r.locals[hit..]).map(|(&ext, &local)| StoredBlock { ext, local }).collect();
                let parent = hit.checked_sub(1).map(|k| seq[k]);
                let event = RouterEvent {
                    rank: ranks[best],
                    event_id: i as u64,
                    lower_tier: None,
                    data: EventData::Stored { parent, blocks },
                };
                let t = Instant::now();
                if bare {
                    tree.apply_event(&event, r.at_ms);
                } else {
                    index.apply_events(vec![event], r.at_ms).unwrap();
                    index.flush().unwrap();
                }
                confirm_ns += t.elapsed().as_nanos();
            }
        }
    }
    let stats = if bare { tree.stats() } else { index.stats().unwrap().0 };
    let n = requests.len() as f64;
    println!(
        "{{\"mode\":\"{}\",\"spread\":{},\"requests\":{},\"meanBlocks\":{:.1},\"writers\":{},\"recordUs\":{:.2},\"recordNsPerBlock\":{:.1},\"overlapsUs\":{:.2},\"confirmUs\":{:.2},\"heldBlocks\":{},\"memoryBytes\":{}}}",
        if bare { "bare tree" } else { "index" },
        spread,
        requests.len(),
        blocks as f64 / n,
        writers,
        record_ns as f64 / n / 1e3,
        record_ns as f64 / blocks as f64,
        query_ns as f64 / n / 1e3,
        confirm_ns as f64 / n / 1e3,
        stats.blocks,
        stats.memory_bytes,
    );
}
