//! `kvroute-vs-dynamo replay <trace.jsonl> <kv|round-robin> [arrival_speedup]`: Dynamo 1.6.1's own
//! offline replay (`dynamo-mocker`, simulator in `aisimulate-core` 0.13.0) on a Mooncake trace
//! with the settings `bench/replay-vs-dynamo.ts` gives kvroute: 16 workers, block size 64, trace
//! block size 512, 16,384 GPU blocks, max_num_seqs 256, max_num_batched_tokens 8192, speedup 1,
//! default router config. Prints one JSON line: the wall time and Dynamo's report.

use dynamo_kv_router::config::KvRouterConfig;
use dynamo_mocker::common::protocols::MockerConfig;
use dynamo_mocker::replay::{simulate_trace_file_with_router_mode, ReplayRouterMode};
use std::path::Path;
use std::time::Instant;

pub fn run(trace: &str, policy: &str, arrival_speedup: f64) -> serde_json::Value {
    let config = MockerConfig::from_value(serde_json::json!({ "engine": {
        "block_size": 64,
        "num_gpu_blocks": 16384,
        "max_num_seqs": 256,
        "max_num_batched_tokens": 8192,
        "speedup_ratio": 1.0,
    }}))
    .expect("mocker config");
    let (mode, router) = match policy {
        "kv" => (ReplayRouterMode::KvRouter, Some(KvRouterConfig::default())),
        "round-robin" => (ReplayRouterMode::RoundRobin, None),
        other => panic!("policy must be kv or round-robin, got {other}"),
    };
    let t0 = Instant::now();
    let report =
        simulate_trace_file_with_router_mode(config, router, None, Path::new(trace), 512, 16, arrival_speedup, mode)
            .expect("dynamo replay");
    let wall = t0.elapsed().as_secs_f64();
    serde_json::json!({ "wallSeconds": wall, "report": report })
}
