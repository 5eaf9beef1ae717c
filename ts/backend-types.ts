/**
 * What a backend provides. The native backend implements it over the napi binding, the pure-JS
 * backend in TypeScript; every public class picks one at construction and only talks to it
 * through these interfaces, which keeps the two interchangeable.
 * @internal
 * @module
 */

/** Which implementation runs kvroute's hot paths. */
export type BackendName = 'native' | 'js';

/** Hashing primitives; arguments are already validated. */
export interface HashingBackend {
  blockHashes(
    tokens: Uint32Array,
    blockSize: number,
    loraName: string | undefined,
    cacheNamespace: string | undefined,
    eagle: boolean,
    mmOffsets?: Uint32Array,
    mmHashes?: BigUint64Array,
  ): BigUint64Array;
  sequenceHashes(localHashes: BigUint64Array): BigUint64Array;
  xxh3(data: Uint8Array, seedHi: number, seedLo: number): bigint;
}

/** One rank's overlap with a query (the public `WorkerScore`). */
export interface RawScore {
  workerId: bigint;
  dpRank: number;
  blocks: number;
  treeSize: number;
}

/** Counters and sizes reported by an index backend. */
export interface RawIndexStats {
  workers: number;
  ranks: number;
  blocks: number;
  treeNodes: number;
  treeBlocks: number;
  memoryBytes: number;
  pending: number;
  stored: number;
  removed: number;
  cleared: number;
  parentBlockNotFound: number;
  blockNotFound: number;
  invalidBlock: number;
  ignoredTier: number;
  duplicateStores: number;
  expiredBlocks: number;
}

/**
 * The KV index, fed with validated packed event batches (see `events/packed.ts`). Scores come
 * back sorted by blocks (descending), then worker id, then dp rank.
 */
export interface IndexBackend {
  applyPacked(meta: Uint32Array, words: BigUint64Array, nowMs: number): void;
  removeWorker(workerId: bigint, dpRank: number | undefined): void;
  recordRouting(workerId: bigint, dpRank: number, locals: BigUint64Array, nowMs: number, expiresAtMs: number): void;
  findMatches(locals: BigUint64Array, nowMs: number): RawScore[];
  flush(): Promise<void>;
  /** Waits for queued events without yielding (for restoring a dump synchronously). */
  flushSync(): void;
  dump(): { meta: Uint32Array; words: BigUint64Array };
  stats(): RawIndexStats;
  close(): void;
}

/** Figures per candidate in {@link RouterCoreBackend.score}'s output. */
export const CANDIDATE_FIGURES = 5;

/** One in-flight rank's load, as reported in router stats. */
export interface RawRankLoad {
  workerId: bigint;
  dpRank: number;
  activePrefillTokens: number;
  activeBlocks: number;
  requests: number;
}

/**
 * Per-rank active load and per-request scoring (see kvroute-core's `routing.rs`). Request
 * handles are numbers assigned by the router. `score` writes, per candidate, CANDIDATE_FIGURES
 * numbers into `out`: overlap blocks, tree size, active prefill tokens, active blocks, and the
 * request's blocks not already active there; it returns the request's block count. A scored
 * request must be `book`ed or `discard`ed.
 */
export interface RouterCoreBackend {
  score(
    handle: number,
    tokens: Uint32Array,
    blockSize: number,
    loraName: string | undefined,
    cacheNamespace: string | undefined,
    eagle: boolean,
    mmOffsets: Uint32Array | undefined,
    mmHashes: BigUint64Array | undefined,
    candidateWorkers: BigUint64Array,
    candidateRanks: Uint32Array,
    nowMs: number,
    assumeKvReuse: boolean,
    out: Float64Array,
  ): number;
  book(handle: number, workerId: bigint, dpRank: number, prefillTokens: number, trackBlocks: boolean, nowMs: number): void;
  discard(handle: number): void;
  prefillCompleted(handle: number): boolean;
  free(handle: number): boolean;
  /** Frees requests booked before `cutoffMs`; returns their handles. */
  expire(cutoffMs: number): number[];
  /** Frees the requests booked on any rank of the worker; returns their handles. */
  removeWorker(workerId: bigint): number[];
  snapshot(): RawRankLoad[];
}

export interface Backend {
  readonly name: BackendName;
  readonly hashing: HashingBackend;
  createIndex(writerThreads: number): IndexBackend;
  /** A router core over an index this backend created. */
  createRouterCore(index: IndexBackend): RouterCoreBackend;
}
