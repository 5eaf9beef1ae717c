/**
 * The router's registered workers and their candidate (worker, dp rank) pairs.
 * @internal
 * @module
 */

import type { RawRankLoad } from '../backend-types.js';
import { KvRouteError } from '../errors.js';
import { checkWorkerId, type WorkerId } from '../kv-index.js';
import { MAX_RANKS_PER_WORKER } from '../limits.js';
import { checkOptions, describe } from '../validate.js';
import type { WorkerConfig } from './types.js';

/** Prefill budget assumed for workers that published no `maxNumBatchedTokens` (Dynamo's). */
export const DEFAULT_MAX_BATCHED_TOKENS = 10_000_000;

export interface Worker {
  id: bigint;
  startRank: number;
  size: number;
  maxNumBatchedTokens: number;
}

/** Candidates as parallel arrays, the shape the router core takes. */
export interface Candidates {
  workers: BigUint64Array;
  ranks: Uint32Array;
}

function int(value: unknown, name: string, min: number, fallback: number | undefined): number | undefined {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    throw new KvRouteError('ERR_INVALID_ARG', `cfg.${name} must be an integer >= ${min}, got ${describe(value)}`);
  }
  return value;
}

export function resolveWorker(id: bigint, cfg: unknown): Worker {
  const c = checkOptions(cfg, 'cfg', [
    'dataParallelSize',
    'dataParallelStartRank',
    'maxNumBatchedTokens',
    'totalKvBlocks',
    'maxNumSeqs',
  ]) as WorkerConfig;
  const size = int(c.dataParallelSize, 'dataParallelSize', 1, 1) as number;
  if (size > MAX_RANKS_PER_WORKER)
    throw new KvRouteError('ERR_INVALID_ARG', `cfg.dataParallelSize must be at most ${MAX_RANKS_PER_WORKER}, got ${size}`);
  const startRank = int(c.dataParallelStartRank, 'dataParallelStartRank', 0, 0) as number;
  if (startRank + size > 0xffffffff) throw new KvRouteError('ERR_INVALID_ARG', 'cfg: dp ranks must stay below 2^32');
  int(c.totalKvBlocks, 'totalKvBlocks', 1, undefined);
  int(c.maxNumSeqs, 'maxNumSeqs', 1, undefined);
  return {
    id,
    startRank,
    size,
    maxNumBatchedTokens: int(c.maxNumBatchedTokens, 'maxNumBatchedTokens', 1, DEFAULT_MAX_BATCHED_TOKENS) as number,
  };
}

/** Whether `rank` is one of the worker's dp ranks. */
function hasRank(w: Worker, rank: number): boolean {
  return rank >= w.startRank && rank < w.startRank + w.size;
}

export class WorkerRegistry {
  private readonly workers = new Map<bigint, Worker>();
  private all: Candidates | undefined;

  get size(): number {
    return this.workers.size;
  }

  get rankCount(): number {
    let n = 0;
    for (const w of this.workers.values()) n += w.size;
    return n;
  }

  get(id: bigint): Worker | undefined {
    return this.workers.get(id);
  }

  set(worker: Worker): void {
    this.workers.set(worker.id, worker);
    this.all = undefined;
  }

  delete(id: bigint): boolean {
    this.all = undefined;
    return this.workers.delete(id);
  }

  /** Candidates of `ids` (all workers when undefined), in (workerId, dpRank) order. */
  candidates(ids?: ReadonlySet<bigint>): Candidates {
    if (!ids && this.all) return this.all;
    const chosen = [...this.workers.values()].filter((w) => !ids || ids.has(w.id)).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const count = chosen.reduce((n, w) => n + w.size, 0);
    const out: Candidates = { workers: new BigUint64Array(count), ranks: new Uint32Array(count) };
    let i = 0;
    for (const w of chosen) {
      for (let r = 0; r < w.size; r++, i++) {
        out.workers[i] = w.id;
        out.ranks[i] = w.startRank + r;
      }
    }
    if (!ids) this.all = out;
    return out;
  }

  /**
   * Whether a request limited to `allowed` may go to this rank (registered, allowed, the rank
   * exists). Session affinity asks it for every request of a bound session: no arrays are built.
   */
  admits(t: { workerId: bigint; dpRank: number }, allowed: Set<bigint> | undefined): boolean {
    const w = this.get(t.workerId);
    return w !== undefined && (!allowed || allowed.has(w.id)) && hasRank(w, t.dpRank);
  }

  /**
   * The candidates of one request: the pinned worker (and rank), or every registered rank of
   * the allowed workers.
   */
  forRequest(pinned: { workerId: bigint; dpRank: number | undefined } | undefined, allowed: Set<bigint> | undefined): Candidates {
    if (pinned) {
      const w = this.get(pinned.workerId);
      if (!w || (allowed && !allowed.has(w.id)))
        throw new KvRouteError('ERR_INVALID_ARG', `pinned worker ${pinned.workerId} is not registered or not allowed`);
      if (pinned.dpRank === undefined) return this.candidates(new Set([w.id]));
      if (!hasRank(w, pinned.dpRank)) throw new KvRouteError('ERR_INVALID_ARG', `pinned worker ${w.id} has no dp rank ${pinned.dpRank}`);
      // One rank: two one-element arrays, not the worker's whole list.
      return { workers: BigUint64Array.of(w.id), ranks: Uint32Array.of(pinned.dpRank) };
    }
    const c = this.candidates(allowed);
    if (c.ranks.length === 0)
      throw new KvRouteError('ERR_NO_WORKERS', this.size === 0 ? 'no workers are registered' : 'none of the allowed workers is registered');
    return c;
  }

  /**
   * Whether every candidate's prefill load (from {@link prefillByRank} of the router core's
   * snapshot: this router's and its peers') exceeds `threshold` of its worker's
   * `maxNumBatchedTokens`.
   */
  allBusy(c: Candidates, prefill: ReadonlyMap<string, number>, threshold: number): boolean {
    for (let i = 0; i < c.ranks.length; i++) {
      const budget = threshold * (this.get(c.workers[i])?.maxNumBatchedTokens ?? 0);
      if ((prefill.get(`${c.workers[i]}:${c.ranks[i]}`) ?? 0) <= budget) return false;
    }
    return true;
  }
}

/** Active prefill tokens by `"worker:rank"`, the form {@link WorkerRegistry.allBusy} reads. */
export function prefillByRank(load: readonly RawRankLoad[]): Map<string, number> {
  const prefill = new Map<string, number>();
  for (const l of load) prefill.set(`${l.workerId}:${l.dpRank}`, l.activePrefillTokens);
  return prefill;
}

export function workerIdSet(ids: unknown, name: string): Set<bigint> {
  if (!Array.isArray(ids)) throw new KvRouteError('ERR_INVALID_ARG', `${name} must be an array of worker ids, got ${describe(ids)}`);
  return new Set(ids.map((id, i) => checkWorkerId(id as WorkerId, `${name}[${i}]`)));
}
