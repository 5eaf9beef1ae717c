//! `kvroute-vs-dynamo replay-disagg <trace.jsonl> <kv|round-robin> <prefill workers> <decode
//! workers> [arrival_speedup] [router_config] [engine_fields]`: Dynamo 1.6.1's offline
//! disaggregated replay (`simulate_trace_file_disagg_with_router_mode`) on a Mooncake trace, with
//! the engine settings of `replay_bench.rs` for both pools (`worker_type` prefill and decode), the
//! engine fields of `engine_fields` over both, and the router config as there. Dynamo derives its
//! two routers' settings itself. Prints one JSON line: the wall time and Dynamo's report.

use crate::replay_bench::{engine_config, router_config};
use dynamo_mocker::common::protocols::MockerConfig;
use dynamo_mocker::replay::{simulate_trace_file_disagg_with_router_mode, OfflineDisaggReplayConfig, ReplayRouterMode};
use std::path::Path;
use std::time::Instant;

/// The arguments of one run.
pub struct DisaggRun {
    pub trace: String,
    pub policy: String,
    pub prefill_workers: usize,
    pub decode_workers: usize,
    pub arrival_speedup: f64,
    pub router_fields: Option<String>,
    pub engine_fields: Option<String>,
}

/// One pool's engine: the settings both systems share, this pool's role, `fields` on top.
fn pool(role: &str, fields: Option<&str>) -> MockerConfig {
    engine_config(serde_json::json!({ "worker_type": role }), fields)
}

/// [`run`] on a thread of its own with a tokio runtime entered, outside any task (see
/// `replay_bench::run_outside_tasks` for why).
pub fn run_outside_tasks(args: DisaggRun) -> serde_json::Value {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime for Dynamo's replay");
        let _entered = runtime.enter();
        run(&args)
    })
    .join()
    .expect("Dynamo's replay thread")
}

fn run(args: &DisaggRun) -> serde_json::Value {
    let engine = args.engine_fields.as_deref();
    let config = OfflineDisaggReplayConfig {
        prefill_args: pool("prefill", engine),
        decode_args: pool("decode", engine),
        num_prefill_workers: args.prefill_workers,
        num_decode_workers: args.decode_workers,
    };
    let (mode, router) = match args.policy.as_str() {
        "kv" => (ReplayRouterMode::KvRouter, Some(router_config(args.router_fields.as_deref()))),
        "round-robin" => (ReplayRouterMode::RoundRobin, None),
        other => panic!("policy must be kv or round-robin, got {other}"),
    };
    let t0 = Instant::now();
    let report = simulate_trace_file_disagg_with_router_mode(
        config,
        router,
        None,
        Path::new(&args.trace),
        512,
        args.arrival_speedup,
        mode,
    )
    .expect("dynamo disaggregated replay");
    let wall = t0.elapsed().as_secs_f64();
    serde_json::json!({ "wallSeconds": wall, "report": report })
}
