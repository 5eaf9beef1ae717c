/**
 * Public types of engine KV-event ingestion.
 * @module
 */

import type { WorkerId } from '../kv-index.js';

/**
 * Which engine publishes; `auto` detects the layout per batch (decoding always does).
 * @group Engine events
 */
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
 * @group Engine events
 */
export type SourceState = 'connecting' | 'active' | 'recovering' | 'resyncing' | 'failed';

/**
 * Options of {@link KvIndex.subscribe} and {@link KvRouter.subscribe}.
 * @group Engine events
 */
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
  /**
   * The engine seq the index already holds for this worker (one value, or one per rank; `null`
   * for none), as a warm start from a peer's dump or a snapshot reports it: the stream continues
   * from the next seq, a gap is repaired through `replayEndpoint` (or the rank resyncs), and a
   * lower seq means the engine restarted since, so the rank is cleared. Default: none (the stream
   * starts from scratch). {@link KvIndex.subscribe} fills it from the last {@link warmStart},
   * together with the digest of each rank's batch at that seq, by which a gap's replay tells an
   * engine that restarted since even once its new seqs have passed this one. A seq given here
   * has that check only with its digest in `resumeAfterDigest`.
   */
  resumeAfterSeq?: number | bigint | null | readonly (number | bigint | null)[];
  /**
   * The digest of the batch at each `resumeAfterSeq` (one value, or one per rank; `null` for
   * none): the {@link RankSourceStats.lastBatchDigest} the source reported with that
   * {@link RankSourceStats.lastSeq}, saved together with the index's dump. A gap's replay then
   * starts at that seq, and a different batch there shows that the engine restarted since
   * (the rank is cleared and replayed from the new process's start), even once its new seqs
   * have passed the saved one. Without it that restart goes unseen, and the old process's blocks
   * stay until evicted. Requires `resumeAfterSeq`. Default: none.
   */
  resumeAfterDigest?: bigint | null | readonly (bigint | null)[];
}

/**
 * Engine events filtered out of the device index, by reason.
 * @group Engine events
 */
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
  /** A device store with a block size other than the router's (the source fails). */
  block_size_mismatch: number;
  /** Blocks keyed by prompt embeddings. */
  prompt_embeds: number;
  /** A lower tier's store with a block size other than the router's (not indexed; the source goes on). */
  tier_block_size_mismatch: number;
}

/**
 * Blocks of one lower storage tier (kept per tier; the prefix tree holds device blocks only).
 * @group Engine events
 */
export interface TierCounts {
  /** Blocks stored in this tier. */
  stored: number;
  /** Blocks removed from this tier. */
  removed: number;
  /** Held now. */
  held: number;
}

/**
 * Engine events applied, by kind.
 * @group Engine events
 */
export interface EngineEventCounts {
  /** BlockStored events handed to the index. */
  stored: number;
  /** BlockRemoved events handed to the index. */
  removed: number;
  /** AllBlocksCleared events applied. */
  cleared: number;
}

/**
 * Device blocks handed to the index.
 * @group Engine events
 */
export interface EngineBlockCounts {
  /** Blocks of Stored events. */
  stored: number;
  /** Hashes of Removed events. */
  removed: number;
}

/**
 * The lower storage tiers, as `medium` names them.
 * @group Engine events
 */
export interface LowerTiers {
  /** CPU, CPU_PINNED, CPU_TIER1. */
  host_pinned: TierCounts;
  /** CPU_TIER2, DISK, NVME, STORAGE. */
  disk: TierCounts;
  /** EXTERNAL, NETWORK, REMOTE, SHARED. */
  external: TierCounts;
}

/**
 * What ingestion did, for one rank or summed. Nothing is dropped silently.
 * @group Engine events
 */
export interface IngestStats {
  /** Batches decoded and applied. */
  batches: number;
  /** Events applied, by kind. */
  events: EngineEventCounts;
  /** Device blocks stored, and device hashes removed, handed to the index. */
  blocks: EngineBlockCounts;
  /** Lower-tier blocks, kept per tier. */
  tiers: LowerTiers;
  /** Events kept out of the device index, by reason. */
  filtered: FilteredCounts;
  /** Events with an unknown tag, skipped one by one (the rest of their batch applies). */
  unknownEvents: number;
  /** Unknown map keys and extra elements, tolerated. */
  extraFields: number;
  /** 32-byte hashes (vLLM bytes mode) folded to u64, and hashes of other byte lengths. */
  foldedHashes: number;
  /** Hashes given as bins of a length other than 32 bytes (folded by their last 8 bytes). */
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

/**
 * One dp rank of an {@link EngineSource}.
 * @group Engine events
 */
export interface RankSourceStats extends IngestStats {
  /** The rank. */
  dpRank: number;
  /** Its PUB endpoint. */
  endpoint: string;
  /** Its replay endpoint, or null. */
  replayEndpoint: string | null;
  /** Its state. */
  state: SourceState;
  /** Why the rank is in its state (the last transition's reason). */
  reason: string;
  /** The last seq applied, or null. */
  lastSeq: bigint | null;
  /**
   * xxh3-64 (seed 0) of the payload applied at `lastSeq`, or null. Snapshots record it, so that
   * a replica warm-started from one can tell, by the batch a gap's replay returns at that seq,
   * whether the engine restarted since.
   */
  lastBatchDigest: bigint | null;
  /** Publisher incarnations seen after the first (restarts). */
  incarnation: number;
  /** Frames received on the SUB socket. */
  frames: number;
  /** Sequence gaps seen on the live stream. */
  gaps: number;
  /** Replay requests sent. */
  replayRequests: number;
  /** Batches received from the replay socket. */
  replayed: number;
  /** Replays that could not repair their gap (the rank was cleared). */
  replayFailures: number;
  /** Replays that did not finish within `replayTimeoutMs`. */
  replayTimeouts: number;
  /** Engine restarts (seq back at or below the last one seen). */
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

/**
 * Stats of an {@link EngineSource}.
 * @group Engine events
 */
export interface SourceStats {
  /** The worker. */
  workerId: bigint;
  /** The `engine` option. */
  engine: EngineName;
  /** Per dp rank, in rank order. */
  ranks: RankSourceStats[];
}

/**
 * A state change of one rank, as {@link EngineSource} emits it.
 * @group Engine events
 */
export interface SourceStateChange {
  /** The worker. */
  workerId: bigint;
  /** The rank that changed. */
  dpRank: number;
  /** Its new state (the same state for a restart, which is reported too). */
  state: SourceState;
  /** Why, in words (a gap's range, a replay's failure, both block sizes, …). */
  reason: string;
  /** When it happened (ms since the epoch). */
  at: number;
}

/**
 * The result of {@link KvIndex.applyEngineBatch}.
 * @group Engine events
 */
export interface BatchResult {
  /** Index events the batch produced (after filtering). */
  indexEvents: number;
  /** What this batch alone did. */
  stats: IngestStats;
  /** Set when a store used another block size than the index: those stores were dropped. */
  blockSizeMismatch?: BlockSizeMismatch;
}

/**
 * A store whose block size differs from the router's.
 * @group Engine events
 */
export interface BlockSizeMismatch {
  /** The engine's block size. */
  engine: number;
  /** The index's block size. */
  router: number;
}

/**
 * Options of {@link KvIndex.applyEngineBatch}.
 * @group Engine events
 */
export interface ApplyEngineBatchOptions {
  /** Informational; decoding detects the layout. */
  engine?: EngineName;
}

/**
 * One `extra_keys` item as the engine published it (untagged on the wire).
 * @group Engine events
 */
export type DecodedExtraKey = ExtraKeyText | ExtraKeyInt | ExtraKeyPair | ExtraKeyBytes | ExtraKeyOther;

/**
 * A string key: a LoRA name, a cache salt, a multimodal id.
 * @group Engine events
 */
export interface ExtraKeyText {
  /** Discriminant. */
  kind: 'text';
  /** The string. */
  value: string;
}

/**
 * An integer key: older vLLM's `lora_int_id`.
 * @group Engine events
 */
export interface ExtraKeyInt {
  /** Discriminant. */
  kind: 'int';
  /** The integer. */
  value: bigint;
}

/**
 * A multimodal object: `(identifier, offset in block)`.
 * @group Engine events
 */
export interface ExtraKeyPair {
  /** Discriminant. */
  kind: 'pair';
  /** The multimodal identifier. */
  id: string;
  /** Offset of the object in the block (-1 when out of range). */
  offset: number;
}

/**
 * A bytes key: a prompt-embedding digest.
 * @group Engine events
 */
export interface ExtraKeyBytes {
  /** Discriminant. */
  kind: 'bytes';
  /** The bytes. */
  value: Uint8Array;
}

/**
 * Anything else (counted, never interpreted).
 * @group Engine events
 */
export interface ExtraKeyOther {
  /** Discriminant. */
  kind: 'other';
}

/**
 * A decoded `BlockStored`: every field of every engine version, `null` when absent.
 * @group Engine events
 */
export interface DecodedBlockStored {
  /** Discriminant. */
  type: 'BlockStored';
  /** Engine hashes of consecutive full blocks, folded to u64. */
  blockHashes: bigint[];
  /** Engine hash of the block before the first, or null at a chain root. */
  parentBlockHash: bigint | null;
  /** Token ids, flattened. */
  tokenIds: number[];
  /** The tokens came as Eagle bigram pairs. */
  eagle: boolean;
  /** Tokens per hash (0 for an offload placeholder). */
  blockSize: number;
  /** vLLM's integer LoRA id (0.11 sends only this). */
  loraId: bigint | null;
  /** Storage medium: "GPU", "CPU", "STORAGE", … */
  medium: string | null;
  /** LoRA adapter name. */
  loraName: string | null;
  /** SGLang's cache salt. */
  cacheSalt: string | null;
  /** Per block: its extra keys (LoRA, multimodal ids, vLLM's salt), or null. */
  extraKeys: (DecodedExtraKey[] | null)[] | null;
  /** KV-cache group (hybrid models). */
  groupIdx: number | null;
  /** The group's attention kind: "full_attention", "sliding_window", … */
  kvCacheSpecKind: string | null;
  /** The sliding window in tokens. */
  kvCacheSpecSlidingWindow: number | null;
  /** "LOCAL" or "REMOTE" relative to the publisher. */
  locality: string | null;
  /** A secondary offload tier's id, e.g. "kvcr". */
  ownership: string | null;
  /** The request context that caused the store (vLLM ≥ 0.33 maps; informational). */
  sessionId: string | null;
}

/**
 * A decoded `BlockRemoved`.
 * @group Engine events
 */
export interface DecodedBlockRemoved {
  /** Discriminant. */
  type: 'BlockRemoved';
  /** Engine hashes removed, folded to u64. */
  blockHashes: bigint[];
  /** Storage medium. */
  medium: string | null;
  /** KV-cache group. */
  groupIdx: number | null;
  /** "LOCAL" or "REMOTE". */
  locality: string | null;
  /** A secondary offload tier's id. */
  ownership: string | null;
}

/**
 * A decoded `AllBlocksCleared`.
 * @group Engine events
 */
export interface DecodedAllBlocksCleared {
  /** Discriminant. */
  type: 'AllBlocksCleared';
  /** A secondary offload tier's id (such clears are filtered). */
  ownership: string | null;
}

/**
 * One decoded engine event.
 * @group Engine events
 */
export type DecodedEngineEvent = DecodedBlockStored | DecodedBlockRemoved | DecodedAllBlocksCleared;

/**
 * A decoded engine batch (see {@link decodeEngineBatch}).
 * @group Engine events
 */
export interface DecodedBatch {
  /** The batch's timestamp (engine clock, seconds). */
  ts: number;
  /** The rank the publisher wrote into the batch, or null. */
  dpRank: number | null;
  /** How the events were laid out: `map` (vLLM ≥ 0.24, SGLang ≥ 0.5.20), `array`, `empty` or `mixed`. */
  layout: 'map' | 'array' | 'empty' | 'mixed';
  /** The known events, in order. */
  events: DecodedEngineEvent[];
  /** Events with an unknown tag (skipped). */
  unknownEvents: number;
  /** Unknown map keys and extra elements. */
  extraFields: number;
  /** 32-byte hashes folded to u64. */
  foldedHashes: number;
  /** Bytes hashes of other lengths, folded by their last 8 bytes. */
  oddLengthHashes: number;
}
