/**
 * Validation of a {@link RouteRequest} into the form the router schedules, and of request ids.
 * @internal
 * @module
 */

import { KvRouteError } from '../errors.js';
import { parseBlockHashOptions } from '../hashing.js';
import { checkDpRank, checkWorkerId } from '../kv-index.js';
import { MAX_SESSION_ID_LENGTH } from '../limits.js';
import { checkOptions, describe, nonNegativeNumber, toTokens } from '../validate.js';
import { type PreparedBatchPrompt, parseBatchPrompts } from './batch-prompts.js';
import { prefillWeights } from './cost-weights.js';
import type { ResolvedRouterOptions } from './options.js';
import type { OutputProgress } from './output-blocks.js';
import type { PrefillWeights } from './select.js';
import { parseSharedCacheHits } from './shared-cache.js';
import type { RouteDecision, RouteRequest } from './types.js';
import { workerIdSet } from './workers.js';

const REQUEST_KEYS = [
  'requestId',
  'tokens',
  'batchPrompts',
  'loraName',
  'cacheNamespace',
  'mmHashes',
  'maxOutputTokens',
  'priority',
  'allowedWorkers',
  'pinnedWorker',
  'overrides',
  'sharedCacheHits',
  'sessionId',
  'signal',
] as const;

/** A validated request. */
export interface Prepared {
  req: RouteRequest;
  tokens: Uint32Array;
  /** The other prompts of its batch (`req.batchPrompts`; empty when not given). */
  batch: PreparedBatchPrompt[];
  loraName: string | undefined;
  cacheNamespace: string | undefined;
  mmOffsets: Uint32Array | undefined;
  mmHashes: BigUint64Array | undefined;
  allowed: Set<bigint> | undefined;
  pinned: { workerId: bigint; dpRank: number | undefined } | undefined;
  weights: PrefillWeights;
  /** Shared-cache hits as flattened `[start, end)` pairs of block positions, if given. */
  sharedHits: Uint32Array | undefined;
  /** The session whose affinity applies to this request, if any (see session-affinity.ts). */
  sessionId: string | undefined;
  temperature: number;
  priority: number;
}

/** The router options a request falls back to where it does not override, and that its checks need. */
type RequestDefaults = Pick<ResolvedRouterOptions, 'prefillWeights' | 'routerTemperature' | 'selectionPolicy' | 'blockSize'>;

/** Validates a request; `overrides` fall back to the router's weights and temperature. */
export function prepareRequest(req: RouteRequest, defaults: RequestDefaults): Prepared {
  const r = checkOptions(req, 'req', REQUEST_KEYS);
  if (req === undefined) throw new KvRouteError('ERR_INVALID_ARG', 'route needs a request');
  if (typeof r.requestId !== 'string' || r.requestId === '')
    throw new KvRouteError('ERR_INVALID_ARG', `req.requestId must be a non-empty string, got ${describe(r.requestId)}`);
  const tokens = toTokens(r.tokens, 'req.tokens');
  if (tokens.length === 0) throw new KvRouteError('ERR_INVALID_ARG', 'req.tokens must not be empty');
  const hash = parseBlockHashOptions({ loraName: r.loraName, cacheNamespace: r.cacheNamespace, mmHashes: r.mmHashes }, 'req');
  if (
    r.maxOutputTokens !== undefined &&
    (typeof r.maxOutputTokens !== 'number' || !Number.isSafeInteger(r.maxOutputTokens) || r.maxOutputTokens < 1)
  ) {
    throw new KvRouteError('ERR_INVALID_ARG', `req.maxOutputTokens must be a positive integer, got ${describe(r.maxOutputTokens)}`);
  }
  const priority = r.priority ?? 0;
  if (typeof priority !== 'number' || !Number.isFinite(priority))
    throw new KvRouteError('ERR_INVALID_ARG', `req.priority must be a finite number, got ${describe(priority)}`);
  const ov = checkOptions(r.overrides, 'req.overrides', [
    'overlapScoreWeight',
    'prefillLoadScale',
    'overlapScoreCredit',
    'routerTemperature',
    'sharedCacheMultiplier',
  ]);
  if (defaults.selectionPolicy === 'lmetric') {
    const scale =
      ov.prefillLoadScale !== undefined ? 'prefillLoadScale' : ov.overlapScoreWeight !== undefined ? 'overlapScoreWeight' : null;
    if (scale)
      throw new KvRouteError(
        'ERR_INVALID_ARG',
        `req.overrides.${scale} is a term of the linear cost and has no effect with the router's selectionPolicy 'lmetric'`,
      );
  }
  const sessionId = r.sessionId;
  if (sessionId !== undefined) checkSessionId(sessionId, 'req.sessionId');
  if (r.signal !== undefined && !(r.signal instanceof AbortSignal))
    throw new KvRouteError('ERR_INVALID_ARG', 'req.signal must be an AbortSignal');
  const allowed = r.allowedWorkers === undefined ? undefined : workerIdSet(r.allowedWorkers, 'req.allowedWorkers');
  let pinned: Prepared['pinned'];
  if (r.pinnedWorker !== undefined) {
    const p = checkOptions(r.pinnedWorker, 'req.pinnedWorker', ['workerId', 'dpRank']);
    pinned = {
      workerId: checkWorkerId(p.workerId, 'req.pinnedWorker.workerId'),
      dpRank: p.dpRank === undefined ? undefined : checkDpRank(p.dpRank, 'req.pinnedWorker.dpRank'),
    };
  }
  return {
    req,
    tokens,
    batch: parseBatchPrompts(r.batchPrompts, 'req.batchPrompts', hash.loraName),
    loraName: hash.loraName,
    cacheNamespace: hash.cacheNamespace,
    mmOffsets: hash.mmOffsets,
    mmHashes: hash.mmHashes,
    allowed,
    pinned,
    weights: prefillWeights(ov, 'req.overrides', defaults.prefillWeights),
    sessionId: sessionId as string | undefined,
    sharedHits: parseSharedCacheHits(r.sharedCacheHits, Math.floor(tokens.length / defaults.blockSize), 'req.sharedCacheHits'),
    temperature:
      ov.routerTemperature === undefined
        ? defaults.routerTemperature
        : nonNegativeNumber(ov.routerTemperature, 'req.overrides.routerTemperature', 0),
    priority,
  };
}

/** Request ids are strings; anything else is `ERR_INVALID_ARG`, before any other check. */
export function checkRequestId(id: unknown): asserts id is string {
  if (typeof id !== 'string') throw new KvRouteError('ERR_INVALID_ARG', `requestId must be a string, got ${describe(id)}`);
}

/**
 * @throws {KvRouteError} `ERR_INVALID_ARG` unless `id` is a string of 1 to `MAX_SESSION_ID_LENGTH` characters.
 */
export function checkSessionId(id: unknown, name: string): asserts id is string {
  if (typeof id !== 'string' || id.length === 0 || id.length > MAX_SESSION_ID_LENGTH)
    throw new KvRouteError('ERR_INVALID_ARG', `${name} must be a string of 1 to ${MAX_SESSION_ID_LENGTH} characters, got ${describe(id)}`);
}

/** A request waiting in the queue. */
export interface Pending {
  prepared: Prepared;
  enqueuedAt: number;
  resolve: (d: RouteDecision) => void;
  reject: (e: unknown) => void;
  onAbort?: () => void;
}

/** A routed request until `free`: its core handle and where it went. */
export interface InFlight {
  handle: number;
  workerId: bigint;
  dpRank: number;
  /** Its output progress, with `routerTrackOutputBlocks`. */
  output?: OutputProgress;
  /** The handles its `batchPrompts` are booked under (on its rank), which end with it. */
  batch: number[];
}

/** A request's core handles: its own, then its batch prompts'. */
export function handlesOf(entry: InFlight): number[] {
  return entry.batch.length > 0 ? [entry.handle, ...entry.batch] : [entry.handle];
}
