//! `kvroute-vs-dynamo replay <trace.jsonl> <kv|round-robin> [arrival_speedup] [router_config] [engine_fields]`:
//! Dynamo 1.6.1's own offline replay (`dynamo-mocker`, simulator in `aisimulate-core` 0.13.0) on a
//! Mooncake trace with the settings `bench/replay-vs-dynamo.ts` gives kvroute: 16 workers, block
//! size 64, trace block size 512, 16,384 GPU blocks, max_num_seqs 256, max_num_batched_tokens
//! 8192, speedup 1, the default router config with the fields of `router_config` (a JSON object
//! of `KvRouterConfig` fields, e.g. `{"overlap_score_credit_decay":1}`) set on top, and the engine
//! fields of `engine_fields` (a JSON object, e.g. `{"num_gpu_blocks":2048,"native_host_offload":
//! {"num_host_blocks":8192},"kv_cache_bytes_per_token":192000}`) over the engine's. Prints one
//! JSON line: the wall time and Dynamo's report.

use dynamo_kv_router::config::KvRouterConfig;
use dynamo_mocker::common::protocols::MockerConfig;
use dynamo_mocker::replay::{simulate_trace_file_with_router_mode, ReplayRouterMode};
use std::path::Path;
use std::time::Instant;

/// The engine both systems run (the settings `bench/replay-vs-dynamo.ts` gives kvroute), with
/// `own` (a JSON object: a disaggregated pool's `worker_type`) and then `fields` (a JSON object
/// given on the command line) set on top.
pub(crate) fn engine_config(own: serde_json::Value, fields: Option<&str>) -> MockerConfig {
    let mut engine = serde_json::json!({
        "block_size": 64,
        "num_gpu_blocks": 16384,
        "max_num_seqs": 256,
        "max_num_batched_tokens": 8192,
        "speedup_ratio": 1.0,
    });
    let engine_map = engine.as_object_mut().expect("engine config is an object");
    engine_map.extend(own.as_object().cloned().unwrap_or_default());
    if let Some(fields) = fields {
        let fields: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(fields).expect("engine fields: a JSON object");
        engine_map.extend(fields);
    }
    MockerConfig::from_value(serde_json::json!({ "engine": engine })).expect("mocker config")
}

/// Dynamo's default router config with `fields` (a JSON object) set on top, through its own
/// deserialiser, so its validation and aliases apply.
pub(crate) fn router_config(fields: Option<&str>) -> KvRouterConfig {
    let mut config = serde_json::to_value(KvRouterConfig::default()).expect("router config as JSON");
    if let Some(fields) = fields {
        let fields: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(fields).expect("router config fields: a JSON object");
        config.as_object_mut().expect("router config is an object").extend(fields);
    }
    serde_json::from_value(config).expect("a valid router config")
}

/// [`run`] on a thread of its own, with a tokio runtime entered (Dynamo's indexers spawn on it)
/// but not inside any task. Dynamo's replay waits for its lower-tier indexers' acknowledgements
/// under a synchronous `block_on`. Called from this binary's async `main`, those waits spent the
/// main task's cooperative budget (tokio's 128 polls of its channels) and, once it was gone,
/// every poll returned Pending and rescheduled itself at once: with host offload the replay spun
/// past its first 64 requests for ever. Outside a task there is no budget to run out.
pub fn run_outside_tasks(
    trace: String,
    policy: String,
    arrival_speedup: f64,
    router_fields: Option<String>,
    engine_fields: Option<String>,
) -> serde_json::Value {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime for Dynamo's replay");
        let _entered = runtime.enter();
        run(&trace, &policy, arrival_speedup, router_fields.as_deref(), engine_fields.as_deref())
    })
    .join()
    .expect("Dynamo's replay thread")
}

fn run(
    trace: &str,
    policy: &str,
    arrival_speedup: f64,
    router_fields: Option<&str>,
    engine_fields: Option<&str>,
) -> serde_json::Value {
    let config = engine_config(serde_json::json!({}), engine_fields);
    let (mode, router) = match policy {
        "kv" => (ReplayRouterMode::KvRouter, Some(router_config(router_fields))),
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
