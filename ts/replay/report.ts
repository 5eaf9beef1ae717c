/**
 * The replay report: latency distributions, throughput and prefix-cache hit ratio per policy.
 */

import type { PolicyRun, SessionCounts } from './simulate.js';

/**
 * A latency distribution in ms (nearest-rank percentiles, as Dynamo's replay reports them).
 * @group Replay
 */
export interface Distribution {
  /** Mean. */
  mean: number;
  /** Median. */
  p50: number;
  /** 90th percentile. */
  p90: number;
  /** 95th percentile. */
  p95: number;
  /** 99th percentile. */
  p99: number;
  /** Maximum. */
  max: number;
}

/**
 * One worker's share of a policy's traffic.
 * @group Replay
 */
export interface WorkerShare {
  /** The worker. */
  workerId: number;
  /** Requests routed to it. */
  requests: number;
  /** Their prompt tokens. */
  promptTokens: number;
  /**
   * Prompt tokens served from its prefix cache. Disaggregated: a prefill worker's; 0 on a decode
   * worker, which receives the prompt's KV and computes none of it.
   */
  cachedTokens: number;
  /** Disaggregated: the worker's pool (prefill workers first); absent when aggregated. */
  role?: 'prefill' | 'decode';
}

/**
 * Completed requests and generated tokens per simulated second.
 * @group Replay
 */
export interface Throughput {
  /** Completed requests per simulated second. */
  requestsPerSec: number;
  /** Generated tokens per simulated second. */
  outputTokensPerSec: number;
}

/**
 * Evenly spaced quantiles (at most 201 points, ascending), for CDF plots.
 * @group Replay
 */
export interface LatencyCdf {
  /** TTFT quantiles, ms. */
  ttftMs: number[];
  /** End-to-end latency quantiles, ms. */
  e2eMs: number[];
}

/**
 * The workload a report describes.
 * @group Replay
 */
export interface TraceSummary {
  /** The trace file, or null for a generated or in-memory trace. */
  path: string | null;
  /** Requests replayed. */
  requests: number;
  /** Prompt tokens one infinite prefix cache would serve: the ceiling of any policy's hit ratio. */
  upperBoundHitRatio: number;
}

/**
 * Results of one routing policy.
 * @group Replay
 */
export interface PolicyReport {
  /** `kv`, `round-robin`, `random`, or the custom selector's name. */
  name: string;
  /** Requests completed. */
  requests: number;
  /** Virtual time from the first arrival to the last token, s. */
  simulatedSeconds: number;
  /** Wall time of the simulation, s (varies run to run). */
  wallSeconds: number;
  /** Simulated seconds per wall second (varies run to run). */
  simSecondsPerWallSecond: number;
  /** Routing decisions per wall second spent routing (varies run to run). */
  decisionsPerWallSecond: number;
  /** Time to first token. */
  ttftMs: Distribution;
  /**
   * Inter-token latency over every token gap of every request (Dynamo's ITL distribution): a
   * decode stalled behind a long prefill shows as one long gap.
   */
  itlMs: Distribution;
  /** Time per output token, per request: (last token − first token) / (output tokens − 1) (Dynamo's TPOT). */
  tpotMs: Distribution;
  /** End-to-end latency. */
  e2eMs: Distribution;
  /** Completed requests and generated tokens per simulated second. */
  throughput: Throughput;
  /**
   * Prompt tokens served from cache / prompt tokens, each request counted at its best admission
   * (a preempted request often comes back to its own blocks), as Dynamo's
   * `prefix_cache_reused_ratio`.
   */
  hitRatio: number;
  /**
   * The same at each request's first admission, before any preemption (Dynamo's
   * `first_admission_prefix_cache_reused_ratio`): what routing found, without the reuse that
   * preemption makes. Equal to `hitRatio` when nothing is preempted.
   */
  firstAdmissionHitRatio: number;
  /** Requests preempted for lack of KV blocks, counted per preemption. */
  preemptions: number;
  /** Blocks the engines loaded back from host memory instead of recomputing them (`cpuOffloadBlocks`; 0 without). */
  hostLoadedBlocks: number;
  /**
   * With speculative decoding: the mean tokens a decode step drew per request (the sampled one
   * plus the drafts accepted, before a request's end cut its last burst; steps that finish a
   * prefill left out), Dynamo's accept length, to set beside vLLM's `1 +
   * spec_decode_num_accepted_tokens / spec_decode_num_drafts`. Absent without.
   */
  acceptLength?: number;
  /**
   * With session affinity (`sessionAffinityTtlSecs` among the policy's router options): requests
   * sent to their session's bound rank, sessions bound by cost, bindings invalidated and expired,
   * summed over the replicas. Absent without.
   */
  sessions?: SessionCounts;
  /** Traffic per worker. */
  workers: WorkerShare[];
  /** Evenly spaced quantiles of TTFT and E2E, for CDF plots. */
  cdf: LatencyCdf;
}

/**
 * A replay's full report (the `--report` JSON).
 * @group Replay
 */
export interface ReplayReport {
  /** The workload. */
  trace: TraceSummary;
  /** The settings of the run. */
  config: Record<string, unknown>;
  /** One entry per policy, in the order run. */
  policies: PolicyReport[];
}

export function distribution(values: ArrayLike<number>): Distribution {
  if (values.length === 0) return { mean: 0, p50: 0, p90: 0, p95: 0, p99: 0, max: 0 };
  const s = Float64Array.from(values).sort();
  const at = (p: number) => s[Math.round(((s.length - 1) * p) / 100)];
  const mean = s.reduce((a, b) => a + b, 0) / s.length;
  return { mean, p50: at(50), p90: at(90), p95: at(95), p99: at(99), max: s[s.length - 1] };
}

/** At most 201 evenly spaced quantiles of `values`, ascending. */
export function quantiles(values: number[]): number[] {
  if (values.length === 0) return [];
  const s = Float64Array.from(values).sort();
  const n = Math.min(200, s.length - 1);
  return Array.from({ length: n + 1 }, (_, k) => s[Math.round(((s.length - 1) * k) / Math.max(1, n))]);
}

export function summarise(name: string, run: PolicyRun, workers: number): PolicyReport {
  const reqs = run.requests;
  const ttft = reqs.map((r) => r.firstTokenMs - r.arrivalMs);
  const e2e = reqs.map((r) => r.lastTokenMs - r.arrivalMs);
  const tpot = reqs.filter((r) => r.outputLength > 1).map((r) => (r.lastTokenMs - r.firstTokenMs) / (r.outputLength - 1));
  const prompt = reqs.reduce((n, r) => n + r.inputLength, 0);
  const reused = reqs.reduce((n, r) => n + r.reusedTokens, 0);
  const firstReused = reqs.reduce((n, r) => n + r.firstReusedTokens, 0);
  const output = reqs.reduce((n, r) => n + r.outputLength, 0);
  const seconds = run.simulatedMs / 1000;
  const decodePlacement = run.decodePlacement;
  const shares: WorkerShare[] = Array.from({ length: workers }, (_, workerId) => ({
    workerId,
    requests: 0,
    promptTokens: 0,
    cachedTokens: 0,
  }));
  reqs.forEach((r, uid) => {
    const s = shares[run.placement[uid].workerId];
    s.requests++;
    s.promptTokens += r.inputLength;
    s.cachedTokens += r.reusedTokens;
    // A decode worker receives the prompt's KV: it computes none of it, so caches none that counts.
    if (decodePlacement) {
      const d = shares[decodePlacement[uid].workerId];
      d.requests++;
      d.promptTokens += r.inputLength;
    }
  });
  if (decodePlacement) for (const s of shares) s.role = s.workerId < (run.prefillWorkers ?? 0) ? 'prefill' : 'decode';
  return {
    name,
    requests: reqs.length,
    simulatedSeconds: seconds,
    wallSeconds: run.wallMs / 1000,
    simSecondsPerWallSecond: seconds / (run.wallMs / 1000),
    decisionsPerWallSecond: reqs.length / (run.routeWallMs / 1000),
    ttftMs: distribution(ttft),
    itlMs: distribution(run.tokenGaps),
    tpotMs: distribution(tpot),
    e2eMs: distribution(e2e),
    throughput: { requestsPerSec: reqs.length / seconds, outputTokensPerSec: output / seconds },
    hitRatio: prompt > 0 ? reused / prompt : 0,
    firstAdmissionHitRatio: prompt > 0 ? firstReused / prompt : 0,
    preemptions: reqs.reduce((n, r) => n + r.preemptions, 0),
    hostLoadedBlocks: run.hostLoadedBlocks,
    ...(run.speculativeSteps[0] > 0 ? { acceptLength: run.speculativeSteps[1] / run.speculativeSteps[0] } : {}),
    ...(run.sessions ? { sessions: run.sessions } : {}),
    workers: shares,
    cdf: { ttftMs: quantiles(ttft), e2eMs: quantiles(e2e) },
  };
}

/** Fields that measure the machine, not the simulation: they differ between identical runs. */
export const WALL_CLOCK_FIELDS = ['wallSeconds', 'simSecondsPerWallSecond', 'decisionsPerWallSecond'] as const;
