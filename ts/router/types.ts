/**
 * The router's request, decision and report shapes.
 */

import type { BlockHashOptions } from '../hashing.js';
import type { IndexStats, WorkerId } from '../kv-index.js';
import type { ReplicaStats } from '../replicas/sync.js';
import type { CandidateScore } from './select.js';
import type { SessionStats } from './session-affinity.js';

/**
 * A worker's facts that routing uses; all optional.
 * @group Router
 */
export interface WorkerConfig {
  /** Data-parallel ranks of the worker. Default 1. */
  dataParallelSize?: number;
  /** First data-parallel rank. Default 0. */
  dataParallelStartRank?: number;
  /** Engine's `max_num_batched_tokens`; the queue threshold is a fraction of it. */
  maxNumBatchedTokens?: number;
  /** Engine's KV cache size in blocks (informational). */
  totalKvBlocks?: number;
  /** Engine's `max_num_seqs` (informational). */
  maxNumSeqs?: number;
}

/**
 * A worker (and optionally one of its ranks) a request must go to.
 * @group Router
 */
export interface PinnedWorker {
  /** The worker. */
  workerId: WorkerId;
  /** One of its data-parallel ranks; when omitted, the best of its ranks. */
  dpRank?: number;
}

/**
 * Per-request overrides of router options.
 * @group Router
 */
export interface RouteOverrides {
  /** Replaces `prefillLoadScale` for this request. */
  prefillLoadScale?: number;
  /** The older name of `prefillLoadScale`; give one of the two. */
  overlapScoreWeight?: number;
  /** Replaces `overlapScoreCredit` for this request. */
  overlapScoreCredit?: number;
  /** Replaces `routerTemperature` for this request. */
  routerTemperature?: number;
  /** Replaces `sharedCacheMultiplier` for this request. */
  sharedCacheMultiplier?: number;
}

/**
 * One prompt of a request's `batchPrompts` under an adapter of its own (a batch of several
 * adapters, as SGLang's `lora_path` list names them).
 * @group Router
 */
export interface BatchPrompt {
  /** Its token ids. */
  tokens: Uint32Array | readonly number[];
  /** The adapter its blocks are hashed under; `null`: none (the base model's); absent: the request's `loraName`. */
  loraName?: string | null;
}

/**
 * A request to route.
 * @group Router
 */
export interface RouteRequest {
  /** Unique while the request is waiting or in flight. */
  requestId: string;
  /** Prompt token ids. */
  tokens: Uint32Array | readonly number[];
  /**
   * Other prompts that run beside `tokens` on the worker chosen, as one request (an SGLang
   * `/generate` batch, which one server runs whole): each non-empty, at most
   * `MAX_PROMPTS_PER_BATCH`, under the request's `cacheNamespace` and its `loraName` unless a
   * {@link BatchPrompt} names its own adapter (`mmHashes` and `sharedCacheHits` are of `tokens`
   * only). Each is scored on every candidate too, and what it would add there (its uncached
   * tokens, its blocks not active on the rank) joins the candidate's cost, uncredited; the rank
   * chosen books them all, and `markPrefillCompleted`, `touch` and `free` of the request end or
   * renew all of them. A candidate's `prefillTokens` and `decodeBlocks` include them. Default: none.
   */
  batchPrompts?: readonly (Uint32Array | readonly number[] | BatchPrompt)[];
  /** LoRA adapter (changes block hashes). */
  loraName?: string;
  /** Cache namespace (changes block hashes). */
  cacheNamespace?: string;
  /**
   * Multimodal content hashes per block (index = block index), as in {@link BlockHashOptions}:
   * what the engines' KV events carry for images and other media (see the README's KV events
   * section), so that a multimodal prompt matches the blocks an engine cached for it.
   */
  mmHashes?: BlockHashOptions['mmHashes'];
  /**
   * Expected output length. With `routerTrackOutputBlocks`, the blocks this request alone holds
   * weigh less as its reported output nears it; otherwise not part of the cost.
   */
  maxOutputTokens?: number;
  /** Queue priority: higher waits less. Default 0. */
  priority?: number;
  /** Only these workers may take the request. */
  allowedWorkers?: readonly WorkerId[];
  /** Send to this worker (and rank, if given) without choosing. */
  pinnedWorker?: PinnedWorker;
  /** Per-request overrides of the router options. */
  overrides?: RouteOverrides;
  /**
   * Which of the prompt's full blocks a cache shared by all workers holds (SGLang HiCache's
   * storage tier, LMCache, Mooncake's store): half-open `[start, end)` ranges of block positions,
   * sorted and not overlapping, as that store answered for the request's block hashes. Every
   * candidate is credited `sharedCacheMultiplier` per such block at or past its own device
   * prefix, since it could load them rather than compute them (Dynamo's `shared_cache_hits`).
   * Default: none.
   */
  sharedCacheHits?: readonly (readonly [number, number])[];
  /**
   * The session (an agent's run, a conversation) the request belongs to. With
   * `sessionAffinityTtlSecs`, the session's first booked request binds it to its (worker, dp
   * rank), and its later requests go there without choosing (a `pinnedWorker` given here wins
   * and binds nothing). Without the option it changes nothing. Dynamo's `X-Dynamo-Session-ID`.
   */
  sessionId?: string;
  /** Aborts the request while it waits in the queue. */
  signal?: AbortSignal;
}

/**
 * Where a request goes, and why.
 * @group Router
 */
export interface RouteDecision {
  /** The chosen worker. */
  workerId: bigint;
  /** The chosen data-parallel rank. */
  dpRank: number;
  /** Leading blocks of the request that rank caches in device (GPU) memory. */
  overlapBlocks: number;
  /**
   * `overlapBlocks × blockSize`, plus the chosen candidate's lower-tier blocks at their weights
   * (`CandidateScore.cachedTokens`; the same when no lower tier holds the request's blocks).
   */
  cachedTokens: number;
  /** Full blocks of the prompt. */
  requiredBlocks: number;
  /** Cost of the chosen candidate. */
  cost: number;
  /** Time spent waiting in the queue, ms (router clock). */
  queuedMs: number;
  /** Every candidate with its figures, in (workerId, dpRank) order. */
  candidates: CandidateScore[];
  /** A JSON-safe copy: worker ids as decimal strings, so `JSON.stringify(decision)` works. */
  toJSON(): unknown;
}

/**
 * What route() would weigh for one candidate, without booking.
 * @group Router
 */
export interface PotentialLoad {
  /** The worker. */
  workerId: bigint;
  /** Its data-parallel rank. */
  dpRank: number;
  /** Leading blocks of the request cached there, in device memory. */
  overlapBlocks: number;
  /** Blocks past them its host-memory tier holds (see `CandidateScore.hostBlocks`). */
  hostBlocks: number;
  /** Blocks past the host run its disk and external tiers hold. */
  diskBlocks: number;
  /** The request's shared-cache hits at or past `overlapBlocks` (see `CandidateScore.sharedBlocks`). */
  sharedBlocks: number;
  /** The request's tokens it would not compute, lower-tier blocks at their weights (`CandidateScore.cachedTokens`). */
  cachedTokens: number;
  /** Prefill tokens the rank would have. */
  prefillTokens: number;
  /** Decode blocks the rank would have. */
  decodeBlocks: number;
  /** Requests in flight on the rank (a batch's prompts one each). */
  activeRequests: number;
}

/**
 * One rank's current load.
 * @group Router
 */
export interface RankLoad {
  /** The worker. */
  workerId: bigint;
  /** Its data-parallel rank. */
  dpRank: number;
  /** Prefill tokens of in-flight requests without a first token yet. */
  activePrefillTokens: number;
  /** Distinct blocks of in-flight requests. */
  activeBlocks: number;
  /** In-flight requests (one per prompt of a request with `batchPrompts`, as the engine runs each). */
  requests: number;
}

/**
 * Router counters and load.
 * @group Router
 */
export interface RouterStats {
  /** Registered workers. */
  workers: number;
  /** Their (worker, dp rank) candidates. */
  ranks: number;
  /** Requests this router booked and has not freed (peers' requests are in `replicas`). */
  inFlight: number;
  /** Requests waiting in the queue now. */
  queued: number;
  /** Requests routed since start. */
  routed: number;
  /** Requests that had to wait. */
  queuedTotal: number;
  /** Waiting requests aborted or cancelled. */
  aborted: number;
  /** In-flight requests freed by expiry. */
  expired: number;
  /** In-flight requests dropped because their worker was removed. */
  droppedWithWorker: number;
  /** `free` calls for unknown ids. */
  unknownFree: number;
  /** `markPrefillCompleted` calls for unknown ids. */
  unknownPrefillCompleted: number;
  /** `markOutputTokens` calls for unknown ids. */
  unknownOutputTokens: number;
  /** `free`, `markPrefillCompleted`, `markOutputTokens` and `touch` calls after `close()` (no-ops). */
  callsAfterClose: number;
  /** Load of every rank with in-flight requests: this router's and, with replicas, its peers'. */
  load: RankLoad[];
  /** The index's stats. */
  index: IndexStats;
  /** The replica load sync, when `replicas` is configured. */
  replicas?: ReplicaStats;
  /** Session affinity, when `sessionAffinityTtlSecs` is set. */
  sessions?: SessionStats;
  /** A JSON-safe copy: worker ids as decimal strings, so `JSON.stringify(stats)` works. */
  toJSON(): unknown;
}
