/**
 * `KvRouterOptions`: Dynamo's `KvRouterConfig` in camelCase with the same defaults, plus what a
 * library needs (backend, clock, seed, custom selector). Validated up front.
 */

import type { BackendName } from '../backend-types.js';
import { KvRouteError } from '../errors.js';
import { type ReplicaOptions, type ResolvedReplicaOptions, resolveReplicaOptions } from '../replicas/options.js';
import { checkBlockSize, checkOptions, describe, nonNegativeNumber, positiveInteger, positiveNumber } from '../validate.js';
import { DEFAULT_PREFILL_WEIGHTS, prefillWeights } from './cost-weights.js';
import type { CandidateScore, PrefillWeights, Selector } from './select.js';

/**
 * How waiting requests are ordered when every worker is busy.
 * @group Router
 */
export type QueuePolicy = 'fcfs' | 'lcfs' | 'wspt';

/**
 * How a candidate's cost combines its prefill and decode load.
 * @group Router
 */
export type SelectionPolicy = 'linear' | 'lmetric';

/**
 * The role of the workers a router routes to, in disaggregated serving (Dynamo's `worker_type`).
 * @group Router
 */
export type WorkerType = 'aggregated' | 'prefill' | 'decode';

/**
 * Options of {@link KvRouter}. Only `blockSize` is required.
 * @group Router
 */
export interface KvRouterOptions {
  /** Tokens per KV block, as the engines use. */
  blockSize: number;
  /**
   * Multiplier of the cost's prefill term (the prompt work a rank would have, less the credit
   * for its cached blocks); higher favours cache hits (TTFT), lower favours balance (ITL).
   * Default 1. Dynamo's `prefill_load_scale`.
   */
  prefillLoadScale?: number;
  /** The older name of `prefillLoadScale` (Dynamo's classic `overlap_score_weight`); give one of the two. */
  overlapScoreWeight?: number;
  /**
   * Blocks of prefill a cached block saves: 1 counts a cached block as free, 0 ignores the cache
   * (load balancing only), above 1 gives cached blocks extra credit (the prefill term stops at 0).
   * Default 1. Dynamo's `overlap_score_credit`.
   */
  overlapScoreCredit?: number;
  /**
   * Shrinks a rank's credit as its prefill backlog grows past the least loaded candidate's:
   * `credit / (1 + decay · excess blocks / the request's blocks)`, so 1 halves the credit at one
   * request's worth of excess. Needs `routerTrackPrefillTokens`. Default 0 (off). Dynamo's
   * `overlap_score_credit_decay`.
   */
  overlapScoreCreditDecay?: number;
  /** Cost added per request in flight on a rank, in blocks. Default 0. Dynamo's `decode_active_request_weight`. */
  decodeActiveRequestWeight?: number;
  /**
   * Credit per block a rank holds in host memory past its device prefix (an offloading engine's
   * CPU tier, from KV events with `storage_tier` `host_pinned` or medium `CPU`), in [0, 1]:
   * loading it back is cheaper than computing it, not free. Default 0.75. Dynamo's
   * `host_cache_hit_weight`.
   */
  hostCacheHitWeight?: number;
  /** The same for disk and external storage, past the host run, in [0, 1]. Default 0.25. Dynamo's `disk_cache_hit_weight`. */
  diskCacheHitWeight?: number;
  /**
   * Credit per block of a request's `sharedCacheHits` at or past a rank's device prefix: blocks
   * any worker can load from a cache they all share. Default 0, Dynamo's (which uses 0.5 when its
   * shared cache type is `hicache`). Dynamo's `shared_cache_multiplier`.
   */
  sharedCacheMultiplier?: number;
  /** Softmax temperature of the choice; 0 picks the cheapest. Default 0. */
  routerTemperature?: number;
  /**
   * How the cost combines a rank's prefill and decode load (Dynamo's `router_selection_policy`).
   * `'linear'` (the default): `prefillLoadScale · prefillBlocks + decodeBlocks +
   * decodeActiveRequestWeight · activeRequests`. `'lmetric'`: the product
   * `prefillBlocks · (decodeBlocks + 1)`, the prefill a rank would do weighted by the decode load
   * it carries, so a rank that holds most of the prompt stays cheap even when busy (the Blitz
   * router's metric). `prefillBlocks` is the credited prefill either way;
   * `prefillLoadScale` and `decodeActiveRequestWeight` are terms of the sum only, and are refused
   * beside `'lmetric'` (also as a request's override) rather than silently ignored.
   */
  selectionPolicy?: SelectionPolicy;
  /**
   * What the workers of this router do (Dynamo's `worker_type`). `'decode'`, for the router of a
   * disaggregated deployment's decode pool, costs a rank without prefill tracking
   * (`routerTrackPrefillTokens: false`) and with a positive credit as
   * `max(0, decodeBlocks − credited cached blocks) + decodeActiveRequestWeight · activeRequests`,
   * so a decode worker that already holds the prompt's KV (no transfer needed) is preferred while
   * its decode backlog still counts: Dynamo's decode-only branch. With prefill tracking on, or a
   * credit of 0 (Dynamo's usual decode router, load only), the cost is the usual one.
   * `'prefill'` costs as `'aggregated'` does, as in Dynamo. Default `'aggregated'`.
   */
  workerType?: WorkerType;
  /**
   * Keep a session's requests (`req.sessionId`) on the (worker, dp rank) its first booked request
   * went to, until the session has been idle (none of its requests in flight) this many seconds:
   * Dynamo's session affinity (`router_session_affinity_ttl_secs`, at most a year). With
   * `replicas`, the replicas share their bindings. Default `null`: off, and `sessionId` is only an
   * identity.
   */
  sessionAffinityTtlSecs?: number | null;
  /**
   * The most sessions bound at once (session ids come from clients, so their number is bounded):
   * a new binding beyond it evicts the binding idle the longest, and a session is not bound when
   * every binding has a request in flight. About 170 bytes each, plus the id. Default 100,000.
   */
  sessionAffinityMaxSessions?: number;
  /** Learn cache contents from workers' KV events. `false`: approximate mode, predicting them from routing decisions. Default true. */
  useKvEvents?: boolean;
  /** Approximate mode: how long a prediction counts, in seconds. Default 120. */
  routerTtlSecs?: number;
  /**
   * With KV events: also count each routing decision's blocks as held by the chosen rank for
   * this many seconds, until the engine's own events confirm them (Dynamo's predict-on-route,
   * `router_predicted_ttl_secs`), so a burst of requests sharing a new prefix sees it before the
   * first one's prefill ends. Default `null` (off). Needs `useKvEvents`.
   */
  routerPredictedTtlSecs?: number | null;
  /** Count in-flight requests' blocks as decode load. Default true. */
  routerTrackActiveBlocks?: boolean;
  /**
   * Count the blocks in-flight requests generate as decode load: a block of the request's own
   * each time {@link KvRouter.markOutputTokens} reports its sequence past a block boundary, and,
   * for a request routed with `maxOutputTokens`, the blocks it alone holds weighted by the share
   * of that output still to come (Dynamo's `router_track_output_blocks`). Needs
   * `routerTrackActiveBlocks`. Default false.
   */
  routerTrackOutputBlocks?: boolean;
  /** Count in-flight requests' uncached prompt tokens as prefill load. Default true. */
  routerTrackPrefillTokens?: boolean;
  /** Assume engines reuse KV across in-flight requests, so shared prefixes count once. Default true. */
  routerAssumeKvReuse?: boolean;
  /**
   * Queue requests while every candidate's prefill load exceeds this fraction of its
   * `maxNumBatchedTokens`; `null` never queues. Default `null` (Dynamo's versions disagree:
   * 2, 4 or 16; its current CLI leaves queueing off).
   */
  routerQueueThreshold?: number | null;
  /** Order of waiting requests. Default `'fcfs'`. */
  routerQueuePolicy?: QueuePolicy;
  /** In-flight requests older than this (router clock) are freed and counted, checked at least once a second. Default 300. */
  requestExpirySecs?: number;
  /** Backend; default: the process-wide {@link backend}. */
  backend?: BackendName;
  /** Native backend: writer threads (shards) of the index. Default `min(4, cores − 1)`, at least 1 (see {@link KvIndexOptions.writerThreads}). */
  writerThreads?: number;
  /**
   * Seed of the RNG used for temperature sampling and tie-breaks. Default 0, so a single router
   * is reproducible; with `replicas`, a random seed per replica, so replicas that see the same
   * load do not break ties identically.
   */
  seed?: number;
  /** Clock in ms. Default `Date.now`. */
  now?: () => number;
  /** Custom choice: returns the index of the chosen candidate. Default: lowest cost (see README). */
  selector?: Selector;
  /**
   * Share in-flight load with the other replicas of this router (see README "Router replicas").
   * Default: none (this router knows only its own bookings).
   */
  replicas?: ReplicaOptions;
}

/** @internal */
export interface ResolvedRouterOptions {
  blockSize: number;
  prefillWeights: PrefillWeights;
  overlapScoreCreditDecay: number;
  decodeActiveRequestWeight: number;
  hostCacheHitWeight: number;
  diskCacheHitWeight: number;
  routerTemperature: number;
  selectionPolicy: SelectionPolicy;
  workerType: WorkerType;
  /** Idle time after which a session's binding ends, ms; null when affinity is off. */
  sessionAffinityTtlMs: number | null;
  sessionAffinityMaxSessions: number;
  useKvEvents: boolean;
  routerTtlSecs: number;
  /** Seconds a decision's blocks count as predicted on its rank; null when decisions are not recorded. */
  predictedTtlSecs: number | null;
  trackActiveBlocks: boolean;
  trackOutputBlocks: boolean;
  trackPrefillTokens: boolean;
  assumeKvReuse: boolean;
  queueThreshold: number | null;
  queuePolicy: QueuePolicy;
  requestExpiryMs: number;
  backend: BackendName | undefined;
  writerThreads: number | undefined;
  seed: number;
  now: () => number;
  selector: ((candidates: readonly CandidateScore[], req: never) => number) | undefined;
  replicas: ResolvedReplicaOptions | undefined;
}

const KNOWN = [
  'blockSize',
  'overlapScoreWeight',
  'prefillLoadScale',
  'overlapScoreCredit',
  'overlapScoreCreditDecay',
  'decodeActiveRequestWeight',
  'sharedCacheMultiplier',
  'hostCacheHitWeight',
  'diskCacheHitWeight',
  'routerTemperature',
  'selectionPolicy',
  'workerType',
  'sessionAffinityTtlSecs',
  'sessionAffinityMaxSessions',
  'useKvEvents',
  'routerTtlSecs',
  'routerPredictedTtlSecs',
  'routerTrackActiveBlocks',
  'routerTrackOutputBlocks',
  'routerTrackPrefillTokens',
  'routerAssumeKvReuse',
  'routerQueueThreshold',
  'routerQueuePolicy',
  'requestExpirySecs',
  'backend',
  'writerThreads',
  'seed',
  'now',
  'selector',
  'replicas',
] as const;

function bad(name: string, what: string, value: unknown): never {
  throw new KvRouteError('ERR_INVALID_ARG', `opts.${name} must be ${what}, got ${describe(value)}`);
}

function flag(value: unknown, name: string, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') bad(name, 'a boolean', value);
  return value;
}

/** @internal */
export function resolveRouterOptions(opts: unknown): ResolvedRouterOptions {
  if (opts === undefined) throw new KvRouteError('ERR_INVALID_ARG', 'KvRouter needs options with at least blockSize');
  const o = checkOptions(opts, 'opts', KNOWN);
  const threshold = o.routerQueueThreshold;
  if (threshold !== undefined && threshold !== null && (typeof threshold !== 'number' || !Number.isFinite(threshold) || threshold < 0)) {
    bad('routerQueueThreshold', 'null or a finite number >= 0', threshold);
  }
  const policy = o.routerQueuePolicy ?? 'fcfs';
  if (policy !== 'fcfs' && policy !== 'lcfs' && policy !== 'wspt') bad('routerQueuePolicy', "'fcfs', 'lcfs' or 'wspt'", policy);
  const selectionPolicy = o.selectionPolicy ?? 'linear';
  if (selectionPolicy !== 'linear' && selectionPolicy !== 'lmetric') bad('selectionPolicy', "'linear' or 'lmetric'", selectionPolicy);
  if (selectionPolicy === 'lmetric') {
    for (const name of ['prefillLoadScale', 'overlapScoreWeight', 'decodeActiveRequestWeight'] as const) {
      if (o[name] !== undefined)
        throw new KvRouteError(
          'ERR_INVALID_ARG',
          `opts.${name} is a term of the linear cost and has no effect with selectionPolicy 'lmetric' (prefill blocks × (decode blocks + 1)): leave it out`,
        );
    }
  }
  const workerType = o.workerType ?? 'aggregated';
  if (workerType !== 'aggregated' && workerType !== 'prefill' && workerType !== 'decode')
    bad('workerType', "'aggregated', 'prefill' or 'decode'", workerType);
  if (workerType === 'decode' && selectionPolicy === 'lmetric')
    bad(
      'workerType',
      "other than 'decode' with selectionPolicy 'lmetric' (its product weighs prefill work, which a decode pool has none of)",
      workerType,
    );
  const affinity = o.sessionAffinityTtlSecs ?? null;
  if (affinity !== null && (typeof affinity !== 'number' || !Number.isFinite(affinity) || affinity <= 0 || affinity > 31_536_000))
    bad('sessionAffinityTtlSecs', 'null or a number of seconds in (0, 31536000]', affinity);
  const maxSessions = positiveInteger(o.sessionAffinityMaxSessions, 'opts.sessionAffinityMaxSessions', 100_000);
  // A JavaScript Map holds at most 2^24 entries.
  if (maxSessions > 16_000_000) bad('sessionAffinityMaxSessions', 'an integer in [1, 16000000]', maxSessions);
  const useKvEvents = flag(o.useKvEvents, 'useKvEvents', true);
  const routerTtlSecs = positiveNumber(o.routerTtlSecs, 'opts.routerTtlSecs', 120);
  const predicted = o.routerPredictedTtlSecs ?? null;
  if (predicted !== null && (typeof predicted !== 'number' || !Number.isFinite(predicted) || predicted <= 0))
    bad('routerPredictedTtlSecs', 'null or a finite number > 0', predicted);
  if (predicted !== null && !useKvEvents)
    bad(
      'routerPredictedTtlSecs',
      'unset without KV events (useKvEvents: false predicts every decision already, for routerTtlSecs)',
      predicted,
    );
  const trackActiveBlocks = flag(o.routerTrackActiveBlocks, 'routerTrackActiveBlocks', true);
  const trackOutputBlocks = flag(o.routerTrackOutputBlocks, 'routerTrackOutputBlocks', false);
  if (trackOutputBlocks && !trackActiveBlocks)
    bad('routerTrackOutputBlocks', 'false when routerTrackActiveBlocks is false (output blocks are decode load)', trackOutputBlocks);
  const replicas = o.replicas === undefined ? undefined : resolveReplicaOptions(o.replicas);
  const seed = o.seed ?? (replicas ? Math.floor(Math.random() * 2 ** 32) : 0);
  if (typeof seed !== 'number' || !Number.isSafeInteger(seed)) bad('seed', 'a safe integer', seed);
  if (o.now !== undefined && typeof o.now !== 'function') bad('now', 'a function returning milliseconds', o.now);
  if (o.selector !== undefined && typeof o.selector !== 'function') bad('selector', 'a function', o.selector);
  if (o.writerThreads !== undefined && (typeof o.writerThreads !== 'number' || !Number.isInteger(o.writerThreads)))
    bad('writerThreads', 'an integer', o.writerThreads);
  return {
    blockSize: checkBlockSize(o.blockSize, 'opts.blockSize'),
    prefillWeights: prefillWeights(o, 'opts', DEFAULT_PREFILL_WEIGHTS),
    overlapScoreCreditDecay: nonNegativeNumber(o.overlapScoreCreditDecay, 'opts.overlapScoreCreditDecay', 0),
    decodeActiveRequestWeight: nonNegativeNumber(o.decodeActiveRequestWeight, 'opts.decodeActiveRequestWeight', 0),
    hostCacheHitWeight: unitWeight(o.hostCacheHitWeight, 'hostCacheHitWeight', 0.75),
    diskCacheHitWeight: unitWeight(o.diskCacheHitWeight, 'diskCacheHitWeight', 0.25),
    routerTemperature: nonNegativeNumber(o.routerTemperature, 'opts.routerTemperature', 0),
    selectionPolicy,
    workerType,
    sessionAffinityTtlMs: affinity === null ? null : (affinity as number) * 1000,
    sessionAffinityMaxSessions: maxSessions,
    useKvEvents,
    routerTtlSecs,
    predictedTtlSecs: useKvEvents ? (predicted as number | null) : routerTtlSecs,
    trackActiveBlocks,
    trackOutputBlocks,
    trackPrefillTokens: flag(o.routerTrackPrefillTokens, 'routerTrackPrefillTokens', true),
    assumeKvReuse: flag(o.routerAssumeKvReuse, 'routerAssumeKvReuse', true),
    queueThreshold: (threshold as number | null | undefined) ?? null,
    queuePolicy: policy as QueuePolicy,
    requestExpiryMs: positiveNumber(o.requestExpirySecs, 'opts.requestExpirySecs', 300) * 1000,
    backend: o.backend as BackendName | undefined,
    writerThreads: o.writerThreads as number | undefined,
    seed: seed as number,
    now: (o.now as (() => number) | undefined) ?? Date.now,
    selector: o.selector as ResolvedRouterOptions['selector'],
    replicas,
  };
}

/** A lower tier's credit: a number in [0, 1] (Dynamo's range), `fallback` when absent. */
function unitWeight(value: unknown, name: string, fallback: number): number {
  const w = nonNegativeNumber(value, `opts.${name}`, fallback);
  if (w > 1) bad(name, 'a number in [0, 1]', value);
  return w;
}
