/**
 * Disaggregated serving in `replay`: a prefill pool and a decode pool, each behind a router of
 * its own, as Dynamo's offline disaggregated replay runs them. A request is routed to a prefill
 * worker, which computes its prompt and one token and holds its KV; the decode router then picks
 * a worker, which reserves room for the KV; after the transfer (the handoff delay) the prefill
 * worker frees its blocks and the decode worker runs the request (no prefill time there; its
 * first token takes a decode step) through the whole output. TTFT and the token gaps are the
 * decode worker's. The rank side is `kvroute_core::replay::handoff` and its twin in `fleet.ts`
 * and `handoff-holds.ts`.
 *
 * The two routers get Dynamo's settings over the policy's options: the prefill router does not
 * count in-flight requests' blocks as load (a prefill worker holds them for one token), the
 * decode router does not weigh overlap, count prefill or assume KV reuse (its workers receive
 * the KV whatever they hold, and publish no KV events).
 * @internal
 * @module
 */

import { KvRouteError } from '../errors.js';
import type { KvRouterOptions } from '../router/options.js';
import { describe, nonNegativeNumber, positiveInteger } from '../validate.js';

/**
 * A disaggregated fleet for {@link replay}: `prefillWorkers` + `decodeWorkers` workers in place
 * of `workers`. A request's KV is handed over in `handoffMs` + `transferUsPerToken` µs per prompt
 * token, from when its decode worker has reserved room for it; the prefill worker holds it until then.
 * @group Replay
 */
export interface ReplayDisaggregation {
  /** Workers of the prefill pool (worker ids 0 .. prefillWorkers − 1). */
  prefillWorkers: number;
  /** Workers of the decode pool (worker ids after the prefill pool's). */
  decodeWorkers: number;
  /** Fixed delay of each handoff (ms, the transfer's setup; not divided by `speedup`). Default 0. */
  handoffMs?: number;
  /**
   * Transfer time per prompt token (µs: the KV bytes per token over the link's bandwidth, e.g.
   * 160 KB over 50 GB/s is 3.2 µs; not divided by `speedup`). Default 0.
   */
  transferUsPerToken?: number;
  /**
   * Which prompt tokens the transfer time counts: `'full-prompt'` (default), every one;
   * `'destination-missing'`, those the decode worker did not hold already (the blocks its
   * reservation could not reuse, whole). Dynamo's `kv_transfer_timing_mode`.
   */
  transferTiming?: ReplayTransferTiming;
}

/** Which prompt tokens a disaggregated replay's KV transfer time counts (see {@link ReplayDisaggregation}). @group Replay */
export type ReplayTransferTiming = 'full-prompt' | 'destination-missing';

const TRANSFER_TIMINGS: readonly ReplayTransferTiming[] = ['full-prompt', 'destination-missing'];

/** The disaggregation of a run, checked. @internal */
export interface SimDisaggregation {
  prefillWorkers: number;
  decodeWorkers: number;
  handoffMs: number;
  transferUsPerToken: number;
  transferTiming: ReplayTransferTiming;
}

const KNOWN = ['prefillWorkers', 'decodeWorkers', 'handoffMs', 'transferUsPerToken', 'transferTiming'];

/** `ReplayOptions.disaggregation`, checked; undefined for an aggregated fleet. */
export function checkDisaggregation(value: unknown): SimDisaggregation | undefined {
  if (value === undefined) return undefined;
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new KvRouteError('ERR_INVALID_ARG', `disaggregation must be an object, got ${describe(value)}`);
  const o = value as Record<string, unknown>;
  const unknown = Object.keys(o).find((k) => !KNOWN.includes(k));
  if (unknown !== undefined)
    throw new KvRouteError('ERR_INVALID_ARG', `disaggregation has no option ${JSON.stringify(unknown)} (known: ${KNOWN.join(', ')})`);
  for (const pool of ['prefillWorkers', 'decodeWorkers'])
    if (o[pool] === undefined) throw new KvRouteError('ERR_INVALID_ARG', `disaggregation.${pool} is required`);
  const transferTiming = o.transferTiming ?? 'full-prompt';
  if (!TRANSFER_TIMINGS.includes(transferTiming as ReplayTransferTiming))
    throw new KvRouteError(
      'ERR_INVALID_ARG',
      `disaggregation.transferTiming must be ${TRANSFER_TIMINGS.map((t) => `'${t}'`).join(' or ')}, got ${describe(transferTiming)}`,
    );
  return {
    prefillWorkers: positiveInteger(o.prefillWorkers, 'disaggregation.prefillWorkers', 1),
    decodeWorkers: positiveInteger(o.decodeWorkers, 'disaggregation.decodeWorkers', 1),
    handoffMs: nonNegativeNumber(o.handoffMs, 'disaggregation.handoffMs', 0),
    transferUsPerToken: nonNegativeNumber(o.transferUsPerToken, 'disaggregation.transferUsPerToken', 0),
    transferTiming: transferTiming as ReplayTransferTiming,
  };
}

/**
 * Router options a disaggregated run sets per pool, refused in the policy's options (they would
 * be overridden): what each says instead. The decode router's other settings (no overlap weight,
 * no prefill tracking, no KV reuse, the linear cost) override the policy's on that pool only.
 */
const SET_PER_POOL: Record<string, string> = {
  routerTrackActiveBlocks: "the prefill pool's router counts no in-flight blocks as load, the decode pool's does",
  workerType: 'each pool has its own router',
};

/** Refuses the router options a disaggregated run sets per pool (`name`: the options' path in the message). */
export function checkPoolOptions(options: Partial<KvRouterOptions>, name: string): void {
  for (const key of Object.keys(options)) {
    if (key in SET_PER_POOL)
      throw new KvRouteError('ERR_INVALID_ARG', `${name}.${key} is set per pool in a disaggregated replay: ${SET_PER_POOL[key]}`);
  }
}

/**
 * The prefill pool's router options: the policy's, without in-flight blocks (nor their output
 * blocks) as load (Dynamo's `router_track_active_blocks: false`).
 */
export function prefillRouterOptions(options: Partial<KvRouterOptions>): Partial<KvRouterOptions> {
  return { ...options, routerTrackActiveBlocks: false, routerTrackOutputBlocks: false };
}

/**
 * The decode pool's router options: the policy's, with no overlap weight, no prefill tracking
 * and no KV reuse assumed (Dynamo's decode router in its replay), on the linear cost (`'lmetric'`
 * weighs prefill work, which a decode pool has none of).
 */
export function decodeRouterOptions(options: Partial<KvRouterOptions>): Partial<KvRouterOptions> {
  return {
    ...options,
    selectionPolicy: 'linear',
    overlapScoreWeight: 0,
    routerTrackPrefillTokens: false,
    routerAssumeKvReuse: false,
  };
}

/** The fleet in words: "16 workers", or a disaggregated run's "8 prefill + 8 decode workers (KV handoff …)". */
export function fleetWords(config: Record<string, unknown>): string {
  const d = config.disaggregation as SimDisaggregation | undefined;
  if (!d) return `${String(config.workers)} workers`;
  const tokens = d.transferTiming === 'destination-missing' ? 'prompt token the decode worker lacks' : 'prompt token';
  return `${d.prefillWorkers} prefill + ${d.decodeWorkers} decode workers (KV handoff ${d.handoffMs} ms + ${d.transferUsPerToken} µs per ${tokens})`;
}
