/**
 * What a backend provides. The native backend implements it over the napi binding, the pure-JS
 * backend in TypeScript; every public class picks one at construction and only talks to it
 * through these interfaces, which keeps the two interchangeable.
 * @internal
 * @module
 */

import type { ResolvedSpeculative } from './replay/speculative.js';

/**
 * Which implementation runs kvroute's hot paths.
 * @group Backends
 */
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
  /** Per lower tier (host pinned, disk, external): blocks, stored, removed, unanchored, conflicting, not found. */
  lowerTiers: number[];
}

/** What a snapshot document held: its event count and each rank's engine seq. */
export interface RawSnapshotInfo {
  events: number;
  cacheOwnerEvents: number;
  engineSeqs: { workerId: bigint; dpRank: number; seq: bigint; digest?: bigint | null }[];
}

/**
 * The KV index, fed with validated packed event batches (see `events/packed.ts`). Scores come
 * back sorted by blocks (descending), then worker id, then dp rank.
 */
export interface IndexBackend {
  applyPacked(meta: Uint32Array, words: BigUint64Array, nowMs: number): void;
  /**
   * Parses and applies JSON text itself (the native backend, in Rust); returns how many valid
   * events were left out as a cache owner's. Absent where the TypeScript parser is used.
   */
  applyJson?(text: string, batch: boolean, nowMs: number): number;
  /**
   * Parses a warm start's snapshot document and applies its events (the native backend, in
   * Rust). Absent where the TypeScript reader is used.
   */
  applySnapshotJson?(text: string, model: string | undefined, blockSize: number, nowMs: number): Promise<RawSnapshotInfo>;
  removeWorker(workerId: bigint, dpRank: number | undefined): void;
  recordRouting(workerId: bigint, dpRank: number, locals: BigUint64Array, nowMs: number, expiresAtMs: number): void;
  findMatches(locals: BigUint64Array, nowMs: number): RawScore[];
  /** Per rank (`workers[i]`, `ranks[i]`): device overlap, then host, disk and external blocks past it; 4 numbers each into `out`. */
  tieredMatches(locals: BigUint64Array, nowMs: number, workers: BigUint64Array, ranks: Uint32Array, out: Float64Array): void;
  flush(): Promise<void>;
  /** Waits for queued events without yielding (for restoring a dump synchronously). */
  flushSync(): void;
  dump(): { meta: Uint32Array; words: BigUint64Array };
  stats(): RawIndexStats;
  /** Operations queued and not applied yet (always 0 where applying is synchronous). */
  pending(): number;
  close(): void;
  /** Engine-event ingestion into this index (created on first use with the index's block size). */
  ingest(blockSize: number): IngestBackend;
}

/** Ingestion counters (see kvroute-core's `ingest::counters`); `filtered` in `FILTER_REASONS` order. */
export interface RawIngestCounters {
  batches: number;
  storedEvents: number;
  removedEvents: number;
  clearedEvents: number;
  storedBlocks: number;
  removedHashes: number;
  /** Per lower tier: host pinned, disk, external. */
  tierStored: number[];
  tierRemoved: number[];
  tierBlocks: number[];
  filtered: number[];
  unknownEvents: number;
  extraFields: number;
  foldedHashes: number;
  oddLengthHashes: number;
  shortTokens: number;
  dpRankMismatches: number;
  decodeErrors: number;
  firstDecodeError?: string | null;
}

export interface RawBatchResult {
  error?: string | null;
  indexEvents: number;
  blockSizeMismatch?: number[] | null;
  counters: RawIngestCounters;
}

export interface RawSourceConfig {
  workerId: bigint;
  ranks: number[];
  endpoints: string[];
  replayEndpoints?: string[];
  bind: boolean;
  topic: string;
  replayTimeoutMs: number;
  maxHeld: number;
  receiveHwm: number;
  blockSize: number;
  /** Per rank, the engine seq the index already holds (a warm start); -1n for none. */
  resumeAfter?: bigint[];
  /** Per rank, the digest of the batch applied at that seq (from the snapshot); -1n for none. */
  resumeDigests?: bigint[];
}

export interface RawStreamCounters {
  frames: number;
  gaps: number;
  replayRequests: number;
  replayed: number;
  replayFailures: number;
  replayTimeouts: number;
  restarts: number;
  resyncs: number;
  duplicates: number;
  ignored: number;
  staleReplies: number;
}

export interface RawRankStatus {
  dpRank: number;
  endpoint: string;
  replayEndpoint?: string | null;
  state: string;
  reason: string;
  lastSeq?: bigint | null;
  /** Digest of the batch applied at `lastSeq` (see `Cursor::applied_digest`). */
  lastDigest?: bigint | null;
  incarnation: number;
  stream: RawStreamCounters;
  held: number;
  malformedFrames: number;
  lastBatchMs?: number | null;
  lagMs?: number | null;
}

export interface RawStateChange {
  dpRank: number;
  state: string;
  reason: string;
  atMs: number;
}

/** A running engine source: its thread (native) or its socket loops (JS). */
export interface SourceBackend {
  status(): RawRankStatus[];
  takeChanges(): RawStateChange[];
  close(): void;
}

export interface IngestBackend {
  applyBatch(workerId: bigint, dpRank: number, payload: Uint8Array, nowMs: number): RawBatchResult;
  counters(workerId: bigint | undefined, dpRank: number | undefined): RawIngestCounters;
  forgetWorker(workerId: bigint): void;
  startSource(config: RawSourceConfig): SourceBackend;
}

/** One extra key as decoded (see `DecodedExtraKey`). */
export interface RawExtraKey {
  kind: string;
  text?: string | null;
  int?: bigint | null;
  offset?: number | null;
  bytes?: Uint8Array | null;
}

export interface RawEngineEvent {
  type: string;
  blockHashes?: BigUint64Array | null;
  parentBlockHash?: bigint | null;
  tokenIds?: Uint32Array | null;
  eagle?: boolean | null;
  blockSize?: number | null;
  loraId?: bigint | null;
  medium?: string | null;
  loraName?: string | null;
  cacheSalt?: string | null;
  extraKeys?: (RawExtraKey[] | null | undefined)[] | null;
  groupIdx?: number | null;
  kvCacheSpecKind?: string | null;
  kvCacheSpecSlidingWindow?: number | null;
  locality?: string | null;
  ownership?: string | null;
  sessionId?: string | null;
}

export interface RawDecodedBatch {
  error?: string | null;
  ts: number;
  dpRank?: number | null;
  layout: string;
  events: RawEngineEvent[];
  unknownEvents: number;
  extraFields: number;
  foldedHashes: number;
  oddLengthHashes: number;
}

/** Figures per candidate in {@link RouterCoreBackend.score}'s output. */
export const CANDIDATE_FIGURES = 8;

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
 * numbers into `out`: overlap blocks, tree size, active prefill tokens, active blocks, the
 * request's blocks not already active there, the rank's in-flight requests, and the blocks its
 * host tier, then its disk and external tiers, add past the overlap; it returns the request's
 * block count. A scored
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
  /**
   * Books a scored request. With `predictUntilMs`, its blocks (the hashes it was scored with) are
   * first recorded in the core's index as predictions on the rank until then; if that throws,
   * nothing is booked.
   */
  book(
    handle: number,
    workerId: bigint,
    dpRank: number,
    prefillTokens: number,
    trackBlocks: boolean,
    nowMs: number,
    predictUntilMs?: number,
  ): void;
  /**
   * Books a request another router replica routed: its `blocks` (that replica's identities) plus
   * `unshared` identities that match nothing.
   */
  bookRemote(
    handle: number,
    workerId: bigint,
    dpRank: number,
    blocks: BigUint64Array,
    unshared: number,
    prefillTokens: number,
    nowMs: number,
  ): void;
  /** The block identities a booked request holds (empty when unknown or untracked). */
  bookedBlocks(handle: number): BigUint64Array;
  /**
   * For the scored requests whose handles fill `group[0..count)`, how many of each one's leading
   * blocks another of them already accounts for, written over its handle, so that
   * `Σ (blocks − shared)` counts each distinct block of the group once (none are shared without
   * KV reuse). The caller reuses `group`, so routing a batch allocates nothing for it.
   * @throws {KvRouteError} `ERR_INVALID_ARG` for a handle not scored (`group` unchanged).
   */
  sharedLeadingBlocks(group: Float64Array, count: number): void;
  discard(handle: number): void;
  prefillCompleted(handle: number): boolean;
  free(handle: number): boolean;
  /**
   * Adds `count` output blocks (identities of the request's own) to a booked request's decode
   * load; with `decay` (0..1), every block held by that request alone then weighs `decay`.
   * False for an unknown handle.
   */
  addOutputBlocks(handle: number, count: number, decay: number | undefined): boolean;
  /** Renews a request's expiry lease: it now counts from `nowMs`. */
  touch(handle: number, nowMs: number): boolean;
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
  /** Decodes one engine KV-event payload (never throws for a bad payload: `error` says why). */
  decodeEngineBatch(payload: Uint8Array): RawDecodedBatch;
  /** A router core over an index this backend created. */
  createRouterCore(index: IndexBackend): RouterCoreBackend;
  /** The engine ranks of one simulated replay run. */
  createReplayFleet(spec: ReplayFleetSpec): ReplayFleetBackend;
  /**
   * A model's tokenizer from the text of its `tokenizer.json` (and its `tokenizer_config.json`,
   * which only tokenizers.js reads).
   * @throws {KvRouteError} `ERR_INVALID_ARG` when the file is not a tokenizer the backend reads.
   */
  createTextTokenizer(json: string, config: Record<string, unknown>): TextTokenizerBackend;
}

/** A model's tokenizer: text to token ids (the gateway's local tokenizer). */
export interface TextTokenizerBackend {
  /**
   * The token ids of `text`; `addSpecialTokens` runs the tokenizer's post-processor (a BOS
   * token, say), as transformers' `encode` does.
   * @throws {KvRouteError} `ERR_INVALID_ARG` when the model cannot encode the text.
   */
  encode(text: string, addSpecialTokens: boolean): Promise<number[]>;
  /** The id of `token` in the vocabulary, added tokens included; `undefined` when it has none. */
  tokenToId(token: string): number | undefined;
}

/**
 * Where each figure of a request sits in `ReplayFleetBackend.outcomes()`: arrival, first token,
 * last token (ms), reused prompt tokens (the best over admissions, then at the first admission,
 * before any preemption; a disaggregated request's prefill leg's), preemptions.
 */
export const OUTCOME = { arrivalMs: 0, firstTokenMs: 1, lastTokenMs: 2, reusedTokens: 3, firstReusedTokens: 4, preemptions: 5 } as const;
/** Numbers per request in `ReplayFleetBackend.outcomes()`. */
export const OUTCOME_FIGURES = 6;

/** What a replay fleet simulates. */
export interface ReplayFleetSpec {
  blockSize: number;
  numGpuBlocks: number;
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  speedup: number;
  /** Divides decode time on top of `speedup` (Dynamo's `decode_speedup_ratio`); 1: none. */
  decodeSpeedup: number;
  /** Multi-token decode steps (MTP, EAGLE): one acceptance rate per draft; undefined: none. */
  speculative?: ResolvedSpeculative;
  timing: 'dynamo' | 'classic';
  /** Which running request is preempted when blocks run out: the newest (`'lifo'`) or the oldest. */
  preemptionMode: 'lifo' | 'fifo';
  /** Host-memory blocks behind each rank's GPU pool (CPU offload); 0: none. */
  hostBlocks: number;
  /** ms to load one block back from host memory (before `speedup`). */
  hostLoadMsPerBlock: number;
  /** One rank per (workers[i], dpRanks[i]). */
  workers: number[];
  dpRanks: number[];
  /**
   * What each rank serves (default: all `'aggregated'`). A disaggregated fleet's arrivals go to
   * `'prefill'` ranks, which run the prompt and one token and hold its KV; the request is then
   * handed over (`run` returns 3) and goes to a `'decode'` rank, which reserves room, receives the
   * prompt's KV whole, with no prefill time, and generates the whole output. Decode ranks publish
   * no KV events.
   */
  roles?: ReplayRankRole[];
  /**
   * How long a prefill leg's KV takes to reach its decode rank once that rank reserved room for
   * it: per request and per prompt token (ms; default 0, 0), the tokens counted being the rank's
   * missing ones with `destinationMissing` (default: the whole prompt).
   */
  handoff?: { fixedMs: number; msPerToken: number; destinationMissing?: boolean };
  /** Requests of the run (uids 0..requests-1). */
  requests: number;
  /** Whether passes deliver their KV events (off in approximate mode). */
  publishEvents: boolean;
  /**
   * The routers' indexes (created by the same backend): every pass's KV events go to each, in
   * the fleet, so no event crosses into the simulation loop.
   */
  indexes: IndexBackend[];
}

/** What a rank of a replay fleet serves (see `ReplayFleetSpec.roles`). */
export type ReplayRankRole = 'aggregated' | 'prefill' | 'decode';

/**
 * The engine ranks of one replay run and the clock that steps them: `ts/replay/fleet.ts` (JS)
 * and `kvroute_core::replay::Fleet` (native). `run` steps engine passes until the caller must
 * act: 1 = a request arrives (add it, route it, `enqueue` it), 2 = a pass ended with first
 * tokens or completions (a prefill rank's completions are handed over, not done), 3 = a request's
 * KV reached the decode pool (route it there, `enqueue` it on a decode rank), 0 = done. `header`
 * gets the clock and the subject (the arriving or handed-over uid, or the rank). Each pass's KV events are sent to the indexes as it ends; they are flushed (visible)
 * before each arrival wake, and on `syncIndexes()`.
 */
export interface ReplayFleetBackend {
  load(at: Float64Array, uids: Uint32Array): void;
  setNextTurn(prev: number, next: number, delayMs: number): void;
  /** The arriving request's lengths and the hashes of its full prompt blocks at the engine block size. */
  addRequest(uid: number, inputLength: number, outputLength: number, seqs: BigUint64Array, locals: BigUint64Array): void;
  enqueue(rank: number, uid: number): void;
  run(header: Float64Array): number;
  /** Waits until the KV events sent so far are visible in the indexes. */
  syncIndexes(): void;
  firstTokens(rank: number): Uint32Array;
  finished(rank: number): Uint32Array;
  /** What a single infinite prefix cache would have served of the requests added, in uid order. */
  upperBoundHitRatio(): number;
  /** {@link OUTCOME_FIGURES} numbers per uid, in {@link OUTCOME} order. */
  outcomes(): Float64Array;
  /** Blocks loaded back from host memory instead of recomputed, all ranks (CPU offload). */
  hostLoadedBlocks(): number;
  /** Every inter-token gap (ms), rank by rank. */
  tokenGaps(): Float64Array;
  /** Speculative decode steps past first tokens, and the tokens they drew (before a request's end cut a burst), all ranks. */
  speculativeSteps(): [steps: number, tokens: number];
}
