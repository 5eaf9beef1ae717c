/**
 * Public types of engine KV-event ingestion.
 * @module
 */

import type { WorkerId } from '../kv-index.js';

/** Which engine publishes; `auto` detects the layout per batch (decoding always does). */
export type EngineName = 'auto' | 'vllm' | 'sglang' | 'trtllm';

/**
 * The state of one dp rank's stream.
 * - `connecting`: no batch seen yet.
 * - `active`: applying a contiguous stream; the index holds what the engine reported.
 * - `recovering`: repairing a gap through the replay socket; live batches are held meanwhile.
 * - `resyncing`: the rank was cleared after a loss that could not be repaired (or the source
 *   joined a running engine without a replay socket); it holds only what arrived since, until a
 *   fresh chain-root store or a cache clear shows a complete state again.
 * - `failed`: stopped for good (block-size mismatch); the rank holds nothing.
 */
export type SourceState = 'connecting' | 'active' | 'recovering' | 'resyncing' | 'failed';

/** Options of {@link KvIndex.subscribe} and {@link KvRouter.subscribe}. */
export interface SubscribeOptions {
  /** The worker whose engine publishes on these endpoints. */
  workerId: WorkerId;
  /**
   * The engine's PUB endpoint (`tcp://host:port`, `ipc://path`). With `dataParallelSize` n,
   * rank r publishes on port + r (ipc: path + `_dp<r>`), as vLLM and SGLang do; or give one
   * endpoint per rank as an array.
   */
  endpoint: string | readonly string[];
  /** The engine's replay (ROUTER) endpoint, for gap repair; per rank like `endpoint`. Default: none. */
  replayEndpoint?: string | readonly string[];
  /** Data-parallel ranks of the worker. Default: the length of an `endpoint` array, else 1. */
  dataParallelSize?: number;
  /** Default `auto`. Decoding detects the layout per batch whatever this says; it names the engine in stats. */
  engine?: EngineName;
  /** Subscription prefix. Default `''` (everything). */
  topic?: string;
  /**
   * The engine's block size, checked against the index's (which the local hashes need). Default:
   * the index's. A batch with another block size fails the rank with a message naming both.
   */
  blockSize?: number;
  /** Bind the SUB sockets and let the engines connect (vLLM with a non-`*` endpoint). Default `false`. */
  bind?: boolean;
  /** How long a replay may take before the gap counts as unrecoverable (ms). Default 5000. */
  replayTimeoutMs?: number;
  /** Live batches held per rank during a replay before giving it up. Default 10000. */
  maxHeldBatches?: number;
  /** SUB receive high-water mark in messages (0 = unlimited). Default 100000, vLLM's publisher default. */
  receiveHighWaterMark?: number;
}

/** Engine events filtered out of the device index, by reason. */
export interface FilteredCounts {
  /** `ownership` set (a secondary offload tier such as "kvcr"). */
  unsupported_ownership: number;
  /** `locality` other than "LOCAL". */
  non_local_locality: number;
  /** A `medium` kvroute does not know. */
  unknown_medium: number;
  /** A non-full-attention KV-cache group (sliding window, mamba, …). */
  non_main_attention_kind: number;
  /** A `kv_cache_spec_kind` kvroute does not know. */
  unknown_kind: number;
  /** A removal in a group learned to be non-main. */
  non_main_attention_group: number;
  /** `group_idx` ≠ 0. */
  non_main_group: number;
  /** A child of a block stored under two cache namespaces. */
  ambiguous_cache_namespace: number;
  /** A device store with no tokens or block size 0. */
  placeholder: number;
  /** A store with a block size other than the router's. */
  block_size_mismatch: number;
  /** Blocks keyed by prompt embeddings. */
  prompt_embeds: number;
}

/** Blocks of one lower storage tier (kept per tier; the prefix tree holds device blocks only). */
export interface TierCounts {
  stored: number;
  removed: number;
  /** Held now. */
  held: number;
}

/** What ingestion did, for one rank or summed. Nothing is dropped silently. */
export interface IngestStats {
  /** Batches decoded and applied. */
  batches: number;
  events: { stored: number; removed: number; cleared: number };
  /** Device blocks stored, and device hashes removed, handed to the index. */
  blocks: { stored: number; removed: number };
  tiers: { host_pinned: TierCounts; disk: TierCounts; external: TierCounts };
  filtered: FilteredCounts;
  /** Events with an unknown tag, skipped one by one (the rest of their batch applies). */
  unknownEvents: number;
  /** Unknown map keys and extra elements, tolerated. */
  extraFields: number;
  /** 32-byte hashes (vLLM bytes mode) folded to u64, and hashes of other byte lengths. */
  foldedHashes: number;
  oddLengthHashes: number;
  /** Stores with fewer tokens than their hashes need (the blocks past the short one dropped). */
  shortTokens: number;
  /** Batches whose own dp rank differs from the socket's (the socket's wins). */
  dpRankMismatches: number;
  /** Batches that did not decode, skipped whole. */
  decodeErrors: number;
  /** The first decode error's message. */
  firstDecodeError: string | null;
}

/** One dp rank of an {@link EngineSource}. */
export interface RankSourceStats extends IngestStats {
  dpRank: number;
  endpoint: string;
  replayEndpoint: string | null;
  state: SourceState;
  /** Why the rank is in its state (the last transition's reason). */
  reason: string;
  /** The last seq applied, or null. */
  lastSeq: bigint | null;
  /** Publisher incarnations seen after the first (restarts). */
  incarnation: number;
  /** Frames received on the SUB socket. */
  frames: number;
  gaps: number;
  replayRequests: number;
  /** Batches received from the replay socket. */
  replayed: number;
  /** Replays that could not repair their gap (the rank was cleared). */
  replayFailures: number;
  replayTimeouts: number;
  restarts: number;
  /** Times the rank was cleared and marked resyncing. */
  resyncs: number;
  /** Batches seen twice (replay overlapping live). */
  duplicates: number;
  /** Frames of a failed rank, ignored. */
  ignored: number;
  /** Replay replies that arrived when no replay was open. */
  staleReplies: number;
  /** Frames that were not `[topic, 8-byte seq, payload]`, and malformed replay replies. */
  malformedFrames: number;
  /** Live batches held during a replay. */
  held: number;
  /** When the last batch was applied (ms since the epoch), or null. */
  lastBatchAt: number | null;
  /** Receive time minus the batch's own timestamp (ms; includes clock skew between hosts). */
  lagMs: number | null;
}

/** Stats of an {@link EngineSource}. */
export interface SourceStats {
  workerId: bigint;
  engine: EngineName;
  ranks: RankSourceStats[];
}

/** A state change of one rank, as {@link EngineSource} emits it. */
export interface SourceStateChange {
  workerId: bigint;
  dpRank: number;
  state: SourceState;
  reason: string;
  /** When it happened (ms since the epoch). */
  at: number;
}

/** The result of {@link KvIndex.applyEngineBatch}. */
export interface BatchResult {
  /** Index events the batch produced (after filtering). */
  indexEvents: number;
  /** What this batch alone did. */
  stats: IngestStats;
  /** Set when a store used another block size than the index: those stores were dropped. */
  blockSizeMismatch?: { engine: number; router: number };
}

/** Options of {@link KvIndex.applyEngineBatch}. */
export interface ApplyEngineBatchOptions {
  /** Informational; decoding detects the layout. */
  engine?: EngineName;
}

/** One `extra_keys` item as the engine published it (untagged on the wire). */
export type DecodedExtraKey =
  | { kind: 'text'; value: string }
  | { kind: 'int'; value: bigint }
  | { kind: 'pair'; id: string; offset: number }
  | { kind: 'bytes'; value: Uint8Array }
  | { kind: 'other' };

/** A decoded `BlockStored`: every field of every engine version, `null` when absent. */
export interface DecodedBlockStored {
  type: 'BlockStored';
  blockHashes: bigint[];
  parentBlockHash: bigint | null;
  tokenIds: number[];
  /** The tokens came as Eagle bigram pairs. */
  eagle: boolean;
  blockSize: number;
  loraId: bigint | null;
  medium: string | null;
  loraName: string | null;
  cacheSalt: string | null;
  extraKeys: (DecodedExtraKey[] | null)[] | null;
  groupIdx: number | null;
  kvCacheSpecKind: string | null;
  kvCacheSpecSlidingWindow: number | null;
  locality: string | null;
  ownership: string | null;
  sessionId: string | null;
}

export interface DecodedBlockRemoved {
  type: 'BlockRemoved';
  blockHashes: bigint[];
  medium: string | null;
  groupIdx: number | null;
  locality: string | null;
  ownership: string | null;
}

export interface DecodedAllBlocksCleared {
  type: 'AllBlocksCleared';
  ownership: string | null;
}

export type DecodedEngineEvent = DecodedBlockStored | DecodedBlockRemoved | DecodedAllBlocksCleared;

/** A decoded engine batch (see {@link decodeEngineBatch}). */
export interface DecodedBatch {
  /** The batch's timestamp (engine clock, seconds). */
  ts: number;
  /** The rank the publisher wrote into the batch, or null. */
  dpRank: number | null;
  /** How the events were laid out: `map` (vLLM ≥ 0.24, SGLang ≥ 0.5.20), `array`, `empty` or `mixed`. */
  layout: 'map' | 'array' | 'empty' | 'mixed';
  events: DecodedEngineEvent[];
  /** Events with an unknown tag (skipped). */
  unknownEvents: number;
  extraFields: number;
  foldedHashes: number;
  oddLengthHashes: number;
}
