/**
 * `replay`: how much would KV-aware routing help on this traffic? Simulates a fleet of vLLM-like
 * workers on a trace, once per routing policy, with a real {@link KvRouter} on the simulation
 * clock, and reports TTFT, ITL, end-to-end latency, throughput and prefix-cache hit ratio.
 */

import { resolveBackend } from '../backend.js';
import type { BackendName } from '../backend-types.js';
import { KvRouteError, renameOptions } from '../errors.js';
import { blockHashes, sequenceHashes } from '../hashing.js';
import { SeededRandom } from '../random.js';
import { KvRouter } from '../router/kv-router.js';
import type { KvRouterOptions } from '../router/options.js';
import type { Selector } from '../router/select.js';
import { describe, nonNegativeInteger, nonNegativeNumber, optionalBoolean, positiveInteger, positiveNumber } from '../validate.js';
import { BlockIds } from './block-ids.js';
import { prefixCeiling } from './ceiling.js';
import { checkDisaggregation, checkPoolOptions, type ReplayDisaggregation } from './disaggregation.js';
import { generateTrace } from './generate.js';
import { type PreemptionMode, preemptionMode } from './preemption.js';
import { type PolicyReport, type ReplayReport, summarise } from './report.js';
import { type ReplicaBalancer, type SimConfig, simulatePolicy } from './simulate.js';
import { checkSpeculative, SPECULATIVE_WITH_DECODE_SPEEDUP, type SpeculativeDecoding } from './speculative.js';
import type { TimingModel } from './timing.js';
import { loadTrace, promptTokens, type Trace } from './trace.js';
import { checkTrace } from './trace-check.js';

/**
 * A routing policy of one's own for replay: a custom choice, router options of its own, or both.
 * `{ name: 'decay-1', routerConfig: { overlapScoreCreditDecay: 1 } }` is the KV policy with one
 * knob changed, so several settings of the router run side by side in one report.
 * @group Replay
 */
export interface CustomPolicy {
  /** Its name in the report (unique among the policies). */
  name: string;
  /** The choice among scored candidates (see {@link KvRouterOptions.selector}). Default: the KV cost. */
  selector?: Selector;
  /** KvRouter options of this run, over the replay's `routerConfig`. Default: none. */
  routerConfig?: Partial<KvRouterOptions>;
}

/** The timing model an option names; `'dynamo'` when absent. */
function timingModel(value: unknown): TimingModel {
  if (value === undefined) return 'dynamo';
  if (value === 'dynamo' || value === 'classic') return value;
  throw new KvRouteError('ERR_INVALID_ARG', `timing must be 'dynamo' or 'classic', got ${describe(value)}`);
}

/**
 * A routing policy: a built-in one, or a custom selector with a name for the report.
 * @group Replay
 */
export type ReplayPolicy = 'kv' | 'round-robin' | 'random' | CustomPolicy;

/**
 * Options of {@link replay}; all but the trace mirror the `kvroute replay` flags.
 * @group Replay
 */
export interface ReplayOptions {
  /** A loaded trace or a JSONL path; default: the built-in generated workload. */
  trace?: Trace | string;
  /** Policies to run, one simulation each. Default `['kv']`. */
  policies?: ReplayPolicy[];
  /** Workers. Default 16. */
  workers?: number;
  /** Data-parallel ranks per worker, each with its own cache. Default 1. */
  dpSize?: number;
  /** Engine block size in tokens. Default 64. */
  blockSize?: number;
  /** Tokens per trace hash id. Default 512. */
  traceBlockSize?: number;
  /** KV blocks per engine rank. Default 16,384. */
  numGpuBlocks?: number;
  /** Running requests per engine rank. Default 256. */
  maxNumSeqs?: number;
  /** Tokens per engine pass. Default 8,192. */
  maxNumBatchedTokens?: number;
  /** Divides simulated compute time. Default 1. */
  speedup?: number;
  /**
   * Divides the decode part of each engine pass on top of `speedup`, as Dynamo's mocker
   * `decode_speedup_ratio` does: engines that emit several tokens a step (speculative decoding,
   * MTP) modelled as faster decode steps. Default 1.
   */
  decodeSpeedup?: number;
  /**
   * Speculative decoding (MTP, EAGLE) as Dynamo's mocker samples it (`aic_nextn`,
   * `aic_nextn_accept_rates`, `aic_mtp_seed`): each decode step emits the sampled token plus the
   * drafts accepted, a step first makes room for its longest burst, the first token after
   * prefill takes a decode step, and the last block of a cached prefix is recomputed. Default:
   * none.
   */
  speculative?: SpeculativeDecoding;
  /**
   * Host-memory blocks behind each engine rank's GPU pool (CPU offload, as the mock worker's
   * `cpuOffloadBlocks`): the router hears the host tier's events and credits them
   * (`hostCacheHitWeight`). Default 0: none, as in Dynamo's replay.
   */
  cpuOffloadBlocks?: number;
  /** µs to load one token's KV back from host memory. Default 6. */
  cpuLoadUsPerToken?: number;
  /**
   * Engines cache prefixes, as vLLM does by default. `false` models `--no-enable-prefix-caching`
   * (Dynamo's `enable_prefix_caching: false`): no block is ever reused and no KV events are
   * published, the baseline that shows what prefix caching buys at all. Default true.
   */
  prefixCaching?: boolean;
  /**
   * Which running request an engine rank preempts when its KV blocks run out (Dynamo's mocker
   * `preemption_mode`): `'lifo'`, the newest (vLLM's rule), or `'fifo'`, the oldest. Either way
   * the victim's blocks go back to the pool and it waits at the front of the queue. Default
   * `'lifo'`.
   */
  preemptionMode?: PreemptionMode;
  /** How engine passes are timed: Dynamo 1.6's mocker (`'dynamo'`, the default) or kvroute's earlier model (`'classic'`). See {@link TimingModel}. */
  timing?: TimingModel;
  /** Divides inter-arrival times. Default 1. */
  arrivalSpeedup?: number;
  /**
   * Spreads each arrival over the interval its timestamp stands for: a seeded random offset in
   * [0, this) ms of the trace's clock (before `arrivalSpeedup`) is added to every request that
   * arrives at its timestamp (later turns that follow a `delay` are not moved). For traces whose
   * timestamps are coarse (the conversation trace's are whole seconds, about 10 requests at
   * each), where requests that shared a timestamp would otherwise arrive at the same instant.
   * At most 3,600,000. Default 0: as the trace says.
   */
  arrivalSpreadMs?: number;
  /** Options for the KV router (`prefillLoadScale`, `routerQueueThreshold`, ...). */
  routerConfig?: Partial<KvRouterOptions>;
  /** Replay only the first N requests. */
  limit?: number;
  /** Seed of routing randomness. Default 42. */
  seed?: number;
  /** Backend. Default: the process-wide one. */
  backend?: BackendName;
  /**
   * Router replicas behind a load balancer, each with its own index fed by every engine (as each
   * replica subscribes to every engine). Default 1.
   */
  replicas?: number;
  /** Replicas share in-flight load (as `KvRouterOptions.replicas` does over NATS). Default true. */
  replicaSync?: boolean;
  /**
   * Simulated time a sync message takes to reach the other replicas (a NATS hop), in ms of the
   * trace's clock after `arrivalSpeedup`; at most 60,000. Default 0: at once.
   */
  replicaSyncDelayMs?: number;
  /**
   * How the load balancer in front of the replicas spreads arrivals: `'random'` (seeded),
   * `'round-robin'`, or `'session'` (a hash of the request's session id, as a load balancer
   * hashing a session header would; requests without one at random). Default `'random'`.
   */
  replicaBalancer?: ReplicaBalancer;
  /**
   * A disaggregated fleet in place of `workers`: a prefill pool and a decode pool, each behind a
   * router of its own (each replica has one of each), the KV handed over between them, as
   * Dynamo's offline disaggregated replay runs it (see {@link ReplayDisaggregation}). Default:
   * none (aggregated workers).
   */
  disaggregation?: ReplayDisaggregation;
  /** Called as requests complete (about 100 times per policy). */
  onProgress?: (policy: string, done: number, total: number) => void;
}

/** Router options the replay sets itself, each from its own replay option (or not at all). */
const SET_BY_REPLAY: Record<string, string> = {
  blockSize: "blockSize (the engines' block size)",
  seed: 'seed',
  backend: 'backend',
  selector: 'policies',
  replicas: 'replicas and replicaSync',
  now: 'nothing (the simulation keeps the time)',
};

/**
 * Router options, checked before any simulation starts: an object, none of the options the
 * replay sets itself (they would be silently overridden), and valid for a KvRouter (checked by
 * building one on the pure-JS backend, which validates exactly as the native one does) together
 * with `under` (the replay's own `routerConfig`, for a policy's).
 * @param name the options' path in error messages
 */
function checkRouterConfig(value: unknown, name: string, under: Partial<KvRouterOptions> = {}): Partial<KvRouterOptions> {
  if (value === undefined) return {};
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new KvRouteError('ERR_INVALID_ARG', `${name} must be an object of KvRouter options, got ${describe(value)}`);
  for (const key of Object.keys(value)) {
    if (key in SET_BY_REPLAY)
      throw new KvRouteError('ERR_INVALID_ARG', `${name}.${key} is set by the replay: use ${SET_BY_REPLAY[key]} instead`);
  }
  // The simulated engines report first tokens and completions, not each token: refused rather
  // than accepted and never fed.
  if ((value as Partial<KvRouterOptions>).routerTrackOutputBlocks === true)
    throw new KvRouteError(
      'ERR_INVALID_ARG',
      `${name}.routerTrackOutputBlocks is not modelled by the replay (it reports no output progress)`,
    );
  try {
    new KvRouter({ ...under, ...(value as Partial<KvRouterOptions>), blockSize: 16, backend: 'js' }).close();
  } catch (err) {
    throw renameOptions(err, name);
  }
  return value as Partial<KvRouterOptions>;
}

function arrivalSpread(value: unknown): number {
  const spread = nonNegativeNumber(value, 'arrivalSpreadMs', 0);
  if (spread > 3_600_000) throw new KvRouteError('ERR_INVALID_ARG', `arrivalSpreadMs must be at most 3600000, got ${spread}`);
  return spread;
}

function replicaSettings(opts: ReplayOptions): SimConfig['replicas'] {
  const sync = opts.replicaSync ?? true;
  if (typeof sync !== 'boolean') throw new KvRouteError('ERR_INVALID_ARG', `replicaSync must be a boolean, got ${describe(sync)}`);
  const balancer = opts.replicaBalancer ?? 'random';
  if (balancer !== 'random' && balancer !== 'round-robin' && balancer !== 'session')
    throw new KvRouteError('ERR_INVALID_ARG', `replicaBalancer must be 'random', 'round-robin' or 'session', got ${describe(balancer)}`);
  const count = positiveInteger(opts.replicas, 'replicas', 1);
  if (count > 64) throw new KvRouteError('ERR_INVALID_ARG', `replicas must be at most 64, got ${count}`);
  const syncDelayMs = opts.replicaSyncDelayMs ?? 0;
  if (typeof syncDelayMs !== 'number' || !Number.isFinite(syncDelayMs) || syncDelayMs < 0 || syncDelayMs > 60_000)
    throw new KvRouteError('ERR_INVALID_ARG', `replicaSyncDelayMs must be a number of ms in [0, 60000], got ${describe(syncDelayMs)}`);
  if (syncDelayMs > 0 && !sync)
    throw new KvRouteError('ERR_INVALID_ARG', 'replicaSyncDelayMs needs replicaSync (the replicas share nothing without it)');
  return { count, sync, syncDelayMs, balancer };
}

/** A policy ready to simulate: its name, its choice (undefined: the KV cost) and its own router options. */
interface ResolvedPolicy {
  name: string;
  selector: Selector | undefined;
  /** A disaggregated run's decode pool's choice: a built-in policy's own instance (its own turn, its own draws); a custom selector itself. */
  decodeSelector: Selector | undefined;
  routerConfig: Partial<KvRouterOptions>;
}

/** The policies to run, each checked; names must be unique (the report is read by name). */
function resolvePolicies(policies: readonly ReplayPolicy[], seed: number, routerConfig: Partial<KvRouterOptions>): ResolvedPolicy[] {
  if (!Array.isArray(policies) || policies.length === 0)
    throw new KvRouteError('ERR_INVALID_ARG', `policies must be a non-empty array, got ${describe(policies)}`);
  const resolved = policies.map((p, i) => resolvePolicy(p, i, seed, routerConfig));
  const seen = new Set<string>();
  for (const { name } of resolved) {
    if (seen.has(name)) throw new KvRouteError('ERR_INVALID_ARG', `policies: two policies are named ${JSON.stringify(name)}`);
    seen.add(name);
  }
  return resolved;
}

function resolvePolicy(policy: ReplayPolicy, i: number, seed: number, routerConfig: Partial<KvRouterOptions>): ResolvedPolicy {
  if (typeof policy === 'string') {
    const { name, selector } = policySelector(policy, seed);
    return { name, selector, decodeSelector: policySelector(policy, seed ^ DECODE_SEED).selector, routerConfig: {} };
  }
  if (!policy || typeof policy !== 'object' || typeof policy.name !== 'string' || policy.name === '') throw unknownPolicy(policy);
  if (policy.selector !== undefined && typeof policy.selector !== 'function')
    throw new KvRouteError('ERR_INVALID_ARG', `policies[${i}].selector must be a function, got ${describe(policy.selector)}`);
  if (policy.selector === undefined && policy.routerConfig === undefined) throw unknownPolicy(policy);
  return {
    name: policy.name,
    selector: policy.selector,
    decodeSelector: policy.selector,
    routerConfig: checkRouterConfig(policy.routerConfig, `policies[${i}].routerConfig`, routerConfig),
  };
}

/** Mixed into the seed of the decode pool's `random` policy, so its draws are not the prefill pool's. */
const DECODE_SEED = 0xdec0de;

function policySelector(policy: 'kv' | 'round-robin' | 'random', seed: number): { name: string; selector: Selector | undefined } {
  if (policy === 'kv') return { name: 'kv', selector: undefined };
  if (policy === 'round-robin') {
    let next = 0;
    return { name: 'round-robin', selector: (candidates) => next++ % candidates.length };
  }
  if (policy === 'random') {
    const rng = new SeededRandom(seed);
    return { name: 'random', selector: (candidates) => rng.int(0, candidates.length - 1) };
  }
  throw unknownPolicy(policy);
}

function unknownPolicy(policy: unknown): KvRouteError {
  return new KvRouteError(
    'ERR_INVALID_ARG',
    `unknown policy ${describe(policy)} (kv, round-robin, random, or { name, selector?, routerConfig? })`,
  );
}

/**
 * Prompt tokens a single infinite prefix cache would serve: the ceiling of any policy's
 * hit ratio on this trace at this block size.
 * @group Replay
 * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument (trace, block sizes).
 */
export function upperBoundHitRatio(trace: Trace, blockSize: number, backend?: BackendName): number {
  checkTrace(trace, 'trace');
  const ids = new BlockIds();
  const byRequest = trace.requests.map((req) =>
    ids.of(
      sequenceHashes(
        blockHashes(promptTokens(req, trace.traceBlockSize), blockSize, backend ? { backend } : {}),
        backend ? { backend } : {},
      ),
    ),
  );
  return prefixCeiling(byRequest, trace.requests, blockSize, ids.size);
}

/**
 * Replays a trace under each policy; deterministic for given options (except wall-clock fields).
 * @group Replay
 * @throws {KvRouteError} (as a rejection) `ERR_INVALID_ARG` for bad options, an unreadable or
 * malformed trace (a trace object is checked as a parsed one is), or a request that could never fit.
 */
export async function replay(opts: ReplayOptions = {}): Promise<ReplayReport> {
  if (opts === null || typeof opts !== 'object' || Array.isArray(opts))
    throw new KvRouteError('ERR_INVALID_ARG', `replay options must be an object, got ${describe(opts)}`);
  const traceBlockSize = positiveInteger(opts.traceBlockSize, 'traceBlockSize', 512);
  let trace =
    typeof opts.trace === 'string'
      ? loadTrace(opts.trace, { traceBlockSize })
      : opts.trace === undefined
        ? generateTrace({ traceBlockSize })
        : checkTrace(opts.trace, 'trace');
  if (opts.limit !== undefined) trace = { ...trace, requests: trace.requests.slice(0, positiveInteger(opts.limit, 'limit', 1)) };
  const seed = opts.seed ?? 42;
  if (!Number.isSafeInteger(seed)) throw new KvRouteError('ERR_INVALID_ARG', `seed must be an integer, got ${describe(seed)}`);
  const blockSize = positiveInteger(opts.blockSize, 'blockSize', 64);
  const decodeSpeedup = positiveNumber(opts.decodeSpeedup, 'decodeSpeedup', 1);
  const speculative = checkSpeculative(opts.speculative, 'speculative');
  if (speculative && decodeSpeedup !== 1) throw new KvRouteError('ERR_INVALID_ARG', SPECULATIVE_WITH_DECODE_SPEEDUP(''));
  const disaggregation = checkDisaggregation(opts.disaggregation);
  if (disaggregation && opts.workers !== undefined)
    throw new KvRouteError(
      'ERR_INVALID_ARG',
      'workers and disaggregation exclude each other: a disaggregated fleet has disaggregation.prefillWorkers + disaggregation.decodeWorkers',
    );
  const cfg: SimConfig = {
    workers: disaggregation ? disaggregation.prefillWorkers + disaggregation.decodeWorkers : positiveInteger(opts.workers, 'workers', 16),
    dpSize: positiveInteger(opts.dpSize, 'dpSize', 1),
    engine: {
      blockSize,
      numGpuBlocks: positiveInteger(opts.numGpuBlocks, 'numGpuBlocks', 16_384),
      maxNumSeqs: positiveInteger(opts.maxNumSeqs, 'maxNumSeqs', 256),
      maxNumBatchedTokens: positiveInteger(opts.maxNumBatchedTokens, 'maxNumBatchedTokens', 8192),
      speedup: positiveNumber(opts.speedup, 'speedup', 1),
      decodeSpeedup,
      speculative,
      timing: timingModel(opts.timing),
      preemptionMode: preemptionMode(opts.preemptionMode),
      hostBlocks: nonNegativeInteger(opts.cpuOffloadBlocks, 'cpuOffloadBlocks', 0),
      hostLoadMsPerBlock: (nonNegativeNumber(opts.cpuLoadUsPerToken, 'cpuLoadUsPerToken', 6) * blockSize) / 1000,
    },
    arrivalSpeedup: positiveNumber(opts.arrivalSpeedup, 'arrivalSpeedup', 1),
    arrivalSpreadMs: arrivalSpread(opts.arrivalSpreadMs),
    seed,
    backend: resolveBackend(opts.backend, 'opts.backend').name,
    routerConfig: checkRouterConfig(opts.routerConfig, 'routerConfig'),
    prefixCaching: optionalBoolean(opts.prefixCaching, 'prefixCaching') ?? true,
    replicas: replicaSettings(opts),
    ...(disaggregation ? { disaggregation } : {}),
  };
  for (const r of trace.requests) {
    const needed = Math.ceil((r.inputLength + r.outputLength) / cfg.engine.blockSize);
    if (needed > cfg.engine.numGpuBlocks) {
      throw new KvRouteError(
        'ERR_INVALID_ARG',
        `the request of trace line ${r.line || trace.requests.indexOf(r) + 1} needs ${needed} KV blocks, more than numGpuBlocks (${cfg.engine.numGpuBlocks}): it could never finish`,
      );
    }
  }
  const policies = resolvePolicies(opts.policies ?? ['kv'], seed, cfg.routerConfig);
  if (disaggregation) {
    checkPoolOptions(cfg.routerConfig, 'routerConfig');
    for (const [i, p] of policies.entries()) checkPoolOptions(p.routerConfig, `policies[${i}].routerConfig`);
  }
  const reports: PolicyReport[] = [];
  let ceiling = 0;
  for (const { name, selector, decodeSelector, routerConfig } of policies) {
    const run = await simulatePolicy(
      trace,
      { arrivals: selector, decode: decodeSelector },
      {
        ...cfg,
        routerConfig: { ...cfg.routerConfig, ...routerConfig },
        onProgress: opts.onProgress && ((d, t) => opts.onProgress?.(name, d, t)),
      },
    );
    reports.push(summarise(name, run, cfg.workers));
    ceiling = run.upperBoundHitRatio;
  }
  const { onProgress: _ignored, trace: _trace, ...shown } = opts;
  return {
    trace: {
      path: trace.path ?? null,
      requests: trace.requests.length,
      upperBoundHitRatio: ceiling,
    },
    config: {
      ...shown,
      workers: cfg.workers,
      dpSize: cfg.dpSize,
      ...cfg.engine,
      arrivalSpeedup: cfg.arrivalSpeedup,
      arrivalSpreadMs: cfg.arrivalSpreadMs,
      prefixCaching: cfg.prefixCaching,
      traceBlockSize,
      seed,
      backend: cfg.backend,
      replicas: cfg.replicas.count,
      replicaSync: cfg.replicas.sync,
      replicaSyncDelayMs: cfg.replicas.syncDelayMs,
      replicaBalancer: cfg.replicas.balancer,
      ...(disaggregation ? { disaggregation } : {}),
      policies: policies.map((p) => p.name),
      // Each policy's own router options, by name (over `routerConfig`), for those that have some.
      policyRouterConfigs: Object.fromEntries(
        policies.filter((p) => Object.keys(p.routerConfig).length > 0).map((p) => [p.name, p.routerConfig]),
      ),
    },
    policies: reports,
  };
}
