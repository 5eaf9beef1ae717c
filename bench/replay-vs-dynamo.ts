/**
 * `npm run bench:replay-vs-dynamo [-- --speeds 1,4,8] [--trace file.jsonl] [--router-config '{…}']`:
 * `kvroute replay` (native backend, both timing models) beside Dynamo 1.6.1's own offline replay
 * (`dynamo-mocker`, through `bench/vs-dynamo`) on the conversation trace, same settings: 16
 * workers, block size 64, trace block size 512, 16,384 GPU blocks, max_num_seqs 256,
 * max_num_batched_tokens 8192, speedup 1, default router config, or the `KvRouter` options of
 * `--router-config` given to both (to Dynamo under its snake_case names: `overlapScoreCreditDecay`
 * is `overlap_score_credit_decay`). Dynamo's KV replay is unseeded, so it runs 3 times and its
 * spread is shown. Prints the metrics side by side with kvroute's deviation, and the wall-time ratio;
 * writes bench/results/replay-vs-dynamo.json. Not in CI (it builds Dynamo's crates: minutes).
 *
 * Speculative decoding as Dynamo's mocker models it: `--decode-speedup R` divides both systems'
 * decode time by R (Dynamo's `decode_speedup_ratio`, kvroute's `decodeSpeedup`), and
 * `--num-speculative-tokens N [--spec-accept-rates r1,r2]` samples multi-token decode steps (Dynamo's
 * `aic_nextn` and `aic_nextn_accept_rates`, kvroute's `speculative`; each draws from its own
 * generator, so the bursts agree in distribution, not one by one). Engines without prefix
 * caching: `--no-enable-prefix-caching`. `--preemption-mode fifo`: both preempt the oldest running
 * request instead of the newest (Dynamo's `preemption_mode`, kvroute's `preemptionMode`).
 *
 * CPU offload: `--gpu-blocks N --cpu-offload-blocks M [--cpu-load-us-per-token T]` gives both
 * systems N GPU blocks and M blocks of host memory per worker (kvroute: `numGpuBlocks`,
 * `cpuOffloadBlocks`, `cpuLoadUsPerToken`, default 6; Dynamo: `num_gpu_blocks` and its
 * `native_host_offload`, whose transfers run at 32 GB/s each way, with `kv_cache_bytes_per_token`
 * set so that loading a token takes T µs there too: T × 32,000 bytes). A Dynamo run that does
 * not finish within `--dynamo-timeout-s` (default 1,800) is stopped and the bench prints
 * kvroute's figures alone (until `bench/vs-dynamo` ran Dynamo's replay outside its async main,
 * the KV replay with offload never finished there: `replay_bench.rs`).
 *
 * Disaggregated fleets: `--prefill-workers P --decode-workers D` replays on P prefill and D
 * decode workers in both (kvroute's `disaggregation`, Dynamo's
 * `simulate_trace_file_disagg_with_router_mode` through `replay_disagg_bench.rs`, the same engine
 * settings for both pools), with no handoff delay in either (Dynamo's offline default), or with
 * `--transfer-us-per-token T` a transfer of T µs per prompt token in both (kvroute's
 * `transferUsPerToken`; Dynamo's `kv_transfer_bytes_per_token` T × 64,000 over
 * `kv_transfer_bandwidth` 64 GB/s, its full-prompt timing; `--transfer-timing destination-missing`
 * counts only the tokens the decode worker lacks in both: kvroute's `transferTiming`, Dynamo's
 * `kv_transfer_timing_mode`).
 */

import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { type ReplayTransferTiming, replay } from '../ts/index.js';
import { fmt, printTable, RESULTS, ROOT, writeResult } from './common.js';
import { TRACE_PATH as CONVERSATION_TRACE } from './index-workload.js';

type Metrics = Record<string, number>;
const METRICS = ['TTFT mean', 'TTFT p50', 'TTFT p99', 'ITL mean', 'ITL p99', 'E2E mean', 'hit ratio %', 'first-admission hit %'] as const;

const traceArg = process.argv.indexOf('--trace');
/** `--trace <file>`: another Mooncake JSONL trace (e.g. from `kvroute gen-trace`); default the conversation trace. */
const TRACE_PATH = traceArg > 0 ? process.argv[traceArg + 1] : CONVERSATION_TRACE;
const speedsArg = process.argv.indexOf('--speeds');
const speeds = speedsArg > 0 ? process.argv[speedsArg + 1].split(',').map(Number) : [1];
const routerArg = process.argv.indexOf('--router-config');
/** `--router-config '{"overlapScoreCreditDecay":1}'`: KvRouter options for both systems. */
const routerConfig: Record<string, unknown> = routerArg > 0 ? JSON.parse(process.argv[routerArg + 1]) : {};
const numberArg = (name: string, fallback: number): number => {
  const at = process.argv.indexOf(name);
  return at > 0 ? Number(process.argv[at + 1]) : fallback;
};
const gpuBlocks = numberArg('--gpu-blocks', 16_384);
const cpuOffloadBlocks = numberArg('--cpu-offload-blocks', 0);
const cpuLoadUsPerToken = numberArg('--cpu-load-us-per-token', 6);
/** `--decode-speedup R`: decode time divided by R on both (Dynamo's `decode_speedup_ratio`, kvroute's `decodeSpeedup`). */
const decodeSpeedup = numberArg('--decode-speedup', 1);
/** `--num-speculative-tokens N`: multi-token decode steps on both (0: none). */
const draftTokens = numberArg('--num-speculative-tokens', 0);
const ratesArg = process.argv.indexOf('--spec-accept-rates');
/** `--spec-accept-rates r1,r2`: the drafts' conditional acceptance rates (default both systems' 0.85,0.3). */
const acceptRates = ratesArg > 0 ? process.argv[ratesArg + 1] : undefined;
/** `--no-enable-prefix-caching`: engines that reuse nothing (Dynamo's `enable_prefix_caching: false`, kvroute's `prefixCaching: false`). */
const prefixCaching = !process.argv.includes('--no-enable-prefix-caching');
const modeArg = process.argv.indexOf('--preemption-mode');
/** `--preemption-mode lifo|fifo`: which running request both preempt (default lifo, both systems' default). */
const preemptionMode = modeArg > 0 ? (process.argv[modeArg + 1] as 'lifo' | 'fifo') : 'lifo';
/** `--prefill-workers P --decode-workers D`: a disaggregated fleet in both (0: the 16 aggregated workers). */
const prefillWorkers = numberArg('--prefill-workers', 0);
const decodeWorkers = numberArg('--decode-workers', 0);
const disaggregated = prefillWorkers > 0 && decodeWorkers > 0;
/** `--transfer-us-per-token T`: KV transfer µs per prompt token in a disaggregated fleet (0: none). */
const transferUsPerToken = numberArg('--transfer-us-per-token', 0);
/** `--transfer-timing destination-missing`: the transfer counts the prompt tokens the decode worker lacks (default full-prompt). */
const transferTimingArg = process.argv.indexOf('--transfer-timing');
const transferTiming = (transferTimingArg > 0 ? process.argv[transferTimingArg + 1] : 'full-prompt') as ReplayTransferTiming;
if (transferTiming !== 'full-prompt' && transferTiming !== 'destination-missing')
  throw new Error('--transfer-timing is full-prompt or destination-missing');
/** The link Dynamo's transfer timing is given (GB/s): T µs per token is T × 64,000 bytes per token over it. */
const TRANSFER_GBPS = 64;
if (disaggregated !== (prefillWorkers > 0 || decodeWorkers > 0)) throw new Error('give both --prefill-workers and --decode-workers');
/** Each Dynamo run is stopped after this long (`--dynamo-timeout-s`, default 30 minutes). */
const dynamoTimeoutS = numberArg('--dynamo-timeout-s', 1800);
/** Dynamo's host offload moves bytes at this rate each way (its default), per worker. */
const HOST_GBPS = 32;
/** The engine fields Dynamo gets for the GPU and host-memory settings. */
const dynamoEngineFields = JSON.stringify({
  num_gpu_blocks: gpuBlocks,
  ...(decodeSpeedup !== 1 ? { decode_speedup_ratio: decodeSpeedup } : {}),
  ...(prefixCaching ? {} : { enable_prefix_caching: false }),
  ...(preemptionMode !== 'lifo' ? { preemption_mode: preemptionMode } : {}),
  ...(transferUsPerToken > 0
    ? {
        kv_transfer_bytes_per_token: Math.round(transferUsPerToken * TRANSFER_GBPS * 1000),
        kv_transfer_bandwidth: TRANSFER_GBPS,
        kv_transfer_timing_mode: transferTiming.replace('-', '_'),
      }
    : {}),
  ...(draftTokens > 0 ? { aic_nextn: draftTokens, ...(acceptRates ? { aic_nextn_accept_rates: acceptRates } : {}) } : {}),
  ...(cpuOffloadBlocks > 0
    ? {
        native_host_offload: { num_host_blocks: cpuOffloadBlocks, d2h_bandwidth_gbps: HOST_GBPS, h2d_bandwidth_gbps: HOST_GBPS },
        // Bytes a token's KV takes, such that a token loads in cpuLoadUsPerToken µs at HOST_GBPS.
        kv_cache_bytes_per_token: Math.round(cpuLoadUsPerToken * HOST_GBPS * 1000),
      }
    : {}),
});
/** The same options under Dynamo's `KvRouterConfig` names. */
const dynamoRouterConfig = JSON.stringify(
  Object.fromEntries(Object.entries(routerConfig).map(([k, v]) => [k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), v])),
);
if (!existsSync(TRACE_PATH)) {
  console.log(`skipped: ${TRACE_PATH} is absent (the conversation trace is read from ../shared, never committed)`);
  process.exit(0);
}
const manifest = join(ROOT, 'bench', 'vs-dynamo', 'Cargo.toml');
console.log('building bench/vs-dynamo (the first build compiles dynamo-mocker 1.6.1 and its simulator: minutes)…');
execFileSync('cargo', ['build', '--release', '--manifest-path', manifest], { stdio: 'inherit' });
const binary = join(ROOT, 'bench', 'vs-dynamo', 'target', 'release', 'kvroute-vs-dynamo');

/** Why the last Dynamo run that returned undefined gave no report. */
let dynamoFailure = '';

/**
 * One run of Dynamo's replay, or undefined when it did not finish within `dynamoTimeoutS` or
 * failed (Dynamo 1.6.1's disaggregated replay stops on an invariant of its own in some settings:
 * `dynamoFailure` says which).
 */
function dynamo(policy: 'kv' | 'round-robin', speed: number): { metrics: Metrics; wall: number } | undefined {
  let text: string;
  try {
    const args = disaggregated
      ? ['replay-disagg', TRACE_PATH, policy, String(prefillWorkers), String(decodeWorkers)]
      : ['replay', TRACE_PATH, policy];
    text = execFileSync(binary, [...args, String(speed), dynamoRouterConfig, dynamoEngineFields], {
      encoding: 'utf8',
      maxBuffer: 1 << 26,
      timeout: dynamoTimeoutS * 1000,
      killSignal: 'SIGKILL',
    });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ETIMEDOUT') {
      dynamoFailure = `did not finish within ${dynamoTimeoutS} s`;
      return undefined;
    }
    const stderr = String((err as { stderr?: unknown }).stderr ?? '');
    const lines = stderr.split('\n');
    const message = lines.find((line) => line.includes('replay:')) ?? lines.find((line) => line.includes('panicked'));
    if (message === undefined) throw err;
    dynamoFailure = `failed: ${message.trim()}`;
    return undefined;
  }
  const out = JSON.parse(text);
  const r = out.report as Record<string, number>;
  return {
    wall: out.wallSeconds,
    metrics: {
      'TTFT mean': r.mean_ttft_ms,
      'TTFT p50': r.median_ttft_ms,
      'TTFT p99': r.p99_ttft_ms,
      'ITL mean': r.mean_itl_ms,
      'ITL p99': r.p99_itl_ms,
      'E2E mean': r.mean_e2e_latency_ms,
      'hit ratio %': 100 * r.prefix_cache_reused_ratio,
      'first-admission hit %': 100 * r.first_admission_prefix_cache_reused_ratio,
    },
  };
}

async function kvroute(timing: 'dynamo' | 'classic', speed: number) {
  const report = await replay({
    trace: TRACE_PATH,
    policies: ['kv', 'round-robin'],
    ...(disaggregated ? { disaggregation: { prefillWorkers, decodeWorkers, transferUsPerToken, transferTiming } } : { workers: 16 }),
    blockSize: 64,
    traceBlockSize: 512,
    numGpuBlocks: gpuBlocks,
    cpuOffloadBlocks,
    cpuLoadUsPerToken,
    maxNumSeqs: 256,
    maxNumBatchedTokens: 8192,
    speedup: 1,
    decodeSpeedup,
    ...(draftTokens > 0
      ? { speculative: { draftTokens, ...(acceptRates ? { acceptRates: acceptRates.split(',').map(Number) } : {}) } }
      : {}),
    prefixCaching,
    preemptionMode,
    arrivalSpeedup: speed,
    timing,
    backend: 'native',
    routerConfig: routerConfig as never,
  });
  return Object.fromEntries(
    report.policies.map((p) => [
      p.name,
      {
        wall: p.wallSeconds,
        // kvroute's own count (Dynamo's report has none): how hard the GPU pool was pressed.
        preemptions: p.preemptions,
        metrics: {
          'TTFT mean': p.ttftMs.mean,
          'TTFT p50': p.ttftMs.p50,
          'TTFT p99': p.ttftMs.p99,
          'ITL mean': p.itlMs.mean,
          'ITL p99': p.itlMs.p99,
          'E2E mean': p.e2eMs.mean,
          'hit ratio %': 100 * p.hitRatio,
          'first-admission hit %': 100 * p.firstAdmissionHitRatio,
        } as Metrics,
      },
    ]),
  ) as Record<'kv' | 'round-robin', { wall: number; preemptions: number; metrics: Metrics }>;
}

const fleet = disaggregated ? `${prefillWorkers} prefill + ${decodeWorkers} decode workers` : '16 workers';
mkdirSync(RESULTS, { recursive: true });
const loadBefore = loadavg();
const results: Record<string, unknown> = {};
for (const speed of speeds) {
  const rr = dynamo('round-robin', speed);
  const first = dynamo('kv', speed);
  const ours = { dynamo: await kvroute('dynamo', speed), classic: await kvroute('classic', speed) };
  if (rr === undefined || first === undefined) {
    const which = rr === undefined ? 'round-robin' : 'KV';
    console.log(`\n×${speed}: Dynamo's ${which} replay ${dynamoFailure}; kvroute's, for the record:`);
    for (const [timing, r] of Object.entries(ours))
      for (const [p, { wall, metrics }] of Object.entries(r))
        console.log(
          `${timing} timing, ${p}: ${fmt(wall, 1)} s;`,
          Object.entries(metrics)
            .map(([k, v]) => `${k} ${fmt(v, 2)}`)
            .join(', '),
        );
    results[`×${speed}`] = { dynamo: { unfinished: which, why: dynamoFailure, roundRobin: rr }, kvroute: ours };
    continue;
  }
  const kvRuns = [first, ...[dynamo('kv', speed), dynamo('kv', speed)].filter((r) => r !== undefined)];
  const rows: Array<Record<string, string>> = [];
  for (const m of METRICS) {
    const runs = kvRuns.map((r) => r.metrics[m]);
    const [lo, hi] = [Math.min(...runs), Math.max(...runs)];
    const mid = runs.reduce((a, b) => a + b, 0) / runs.length;
    // A deviation from 0 (the hit ratio without prefix caching) is no percentage: equal or not.
    const dev = (x: number, ref: number) => (ref === 0 ? (x === 0 ? 'equal' : 'differs') : `${fmt((100 * (x - ref)) / ref, 1)}%`);
    rows.push({
      metric: m,
      'dynamo RR': fmt(rr.metrics[m], 2),
      'kvroute RR (dynamo timing)': `${fmt(ours.dynamo['round-robin'].metrics[m], 2)} (${dev(ours.dynamo['round-robin'].metrics[m], rr.metrics[m])})`,
      'kvroute RR (classic)': `${fmt(ours.classic['round-robin'].metrics[m], 2)} (${dev(ours.classic['round-robin'].metrics[m], rr.metrics[m])})`,
      'dynamo KV, 3 runs: mean [min–max]': `${fmt(mid, 2)} [${fmt(lo, 2)}–${fmt(hi, 2)}]`,
      'kvroute KV (dynamo timing)': `${fmt(ours.dynamo.kv.metrics[m], 2)} (${dev(ours.dynamo.kv.metrics[m], mid)})`,
      'kvroute KV (classic)': `${fmt(ours.classic.kv.metrics[m], 2)} (${dev(ours.classic.kv.metrics[m], mid)})`,
    });
  }
  const dynWall = rr.wall + kvRuns[0].wall;
  const ourWall = ours.dynamo.kv.wall + ours.dynamo['round-robin'].wall;
  rows.push({
    metric: 'wall s (RR + one KV run)',
    'dynamo RR': fmt(dynWall, 1),
    'kvroute RR (dynamo timing)': `${fmt(ourWall, 1)} (${fmt(ourWall / dynWall, 2)}× Dynamo's)`,
  });
  printTable(
    `${TRACE_PATH} at arrival speed ×${speed}, ${fleet}, router ${JSON.stringify(routerConfig)}, engines ${dynamoEngineFields}: kvroute replay vs Dynamo 1.6.1's offline replay`,
    rows,
  );
  results[`×${speed}`] = { dynamo: { roundRobin: rr, kv: kvRuns }, kvroute: ours, table: rows };
}
writeResult(disaggregated ? 'replay-disagg-vs-dynamo' : 'replay-vs-dynamo', {
  trace: TRACE_PATH,
  fleet,
  speeds,
  routerConfig,
  dynamoEngineFields,
  loadavgBefore: loadBefore,
  loadavgAfter: loadavg(),
  results,
});
