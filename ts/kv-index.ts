/**
 * `KvIndex`: which worker (and data-parallel rank) holds which KV blocks, fed by the workers' KV
 * events and queried on every request.
 */

import { availableParallelism } from 'node:os';
import { resolveBackend } from './backend.js';
import type { Backend, BackendName, IndexBackend, RawSnapshotInfo } from './backend-types.js';
import { KvRouteError } from './errors.js';
import { unpackDump } from './events/dump.js';
import { parseJsonBatch, parseJsonEvent } from './events/json.js';
import type { DumpedEvent, RouterEvent } from './events/types.js';
import { packEvents } from './events/validate.js';
import { type BlockHashOptions, parseBlockHashOptions } from './hashing.js';
import { type IndexStats, toIndexStats } from './index-stats.js';
import { parseSubscribeOptions } from './ingest/options.js';
import { EngineSource } from './ingest/source.js';
import { toIngestStats } from './ingest/stats.js';
import type { ApplyEngineBatchOptions, BatchResult, IngestStats, SubscribeOptions } from './ingest/types.js';
import { withIdJson } from './json-ids.js';
import { takeResumeSeqs } from './replicas/resume.js';
import { checkBlockSize, checkOptions, describe, toHashes, toTokens, toU64 } from './validate.js';

/** What a KvRouter needs from the KvIndex it owns: the backend and its index. @internal */
export interface IndexInternals {
  impl: Backend;
  inner: IndexBackend;
}

const internals = new WeakMap<KvIndex, IndexInternals>();

/** @internal */
export function indexInternals(index: KvIndex): IndexInternals {
  return internals.get(index) as IndexInternals;
}

/**
 * A worker id: a u64, given as a non-negative safe integer or a bigint; returned as bigint.
 * @group Index
 */
export type WorkerId = number | bigint;

/**
 * Options of {@link KvIndex}.
 * @group Index
 */
export interface KvIndexOptions {
  /** Tokens per KV block; used to hash requests in `findMatchesForRequest` and `recordRouting`. */
  blockSize: number;
  /** Backend of this index; default: the process-wide {@link backend}. */
  backend?: BackendName;
  /**
   * Native backend: background threads that apply events, each owning a shard of the index
   * (each worker sticks to one, so its events keep their order; writers share no lock). Default
   * `min(4, available cores − 1)`, at least 1: a core stays free for the JavaScript thread, and
   * each query visits one shard per writer (about 1 µs more per extra shard at 16 workers), while
   * one writer already applies about 2M block-events/s, far above a fleet's event rate. Raise it
   * for bulk ingestion (dumps, replays of engine history). Ignored by the JS backend, which
   * applies events synchronously.
   */
  writerThreads?: number;
  /** Approximate mode, for engines that publish no KV events: see {@link KvIndex.recordRouting}. */
  approximate?: ApproximateOptions;
  /** Clock in milliseconds, for prediction TTLs. Default `Date.now`. */
  now?: () => number;
  /**
   * Back-pressure: `applyEvent(s)` returns false once this many operations (one per call) are
   * queued and not applied yet, as a stream's `write` does; wait for `flush()` before sending
   * more. Nothing is refused: the queue is the caller's to bound. Default 4096.
   */
  highWaterMark?: number;
}

/**
 * Options of approximate mode.
 * @group Index
 */
export interface ApproximateOptions {
  /** How long a predicted block counts as held after the last routing decision that touched it (ms). */
  ttlMs: number;
}

/**
 * One rank's overlap with a query.
 * @group Index
 */
export interface WorkerScore {
  /** The worker. */
  workerId: bigint;
  /** Its data-parallel rank. */
  dpRank: number;
  /** Leading blocks of the query this rank holds. */
  blocks: number;
  /** Blocks this rank holds in total. */
  treeSize: number;
}

/**
 * How far a rank's cache reaches into a query, tier by tier (see {@link KvIndex.findTieredMatches}).
 * @group Index
 */
export interface TieredScore {
  /** The worker. */
  workerId: bigint;
  /** Its data-parallel rank. */
  dpRank: number;
  /** Leading blocks of the query it holds in device (GPU) memory. */
  device: number;
  /** Blocks its host-memory tier holds from the end of the device prefix on. */
  hostPinned: number;
  /** Blocks its disk tier holds from where the host run stops. */
  disk: number;
  /** Blocks its external tier holds from where the disk run stops. */
  external: number;
}

/** A rank to ask about: a worker and its data-parallel rank (default 0). @group Index */
export interface RankRef {
  /** The worker. */
  workerId: WorkerId;
  /** Its data-parallel rank; default 0. */
  dpRank?: number;
}

/**
 * Overlap of a query with every rank that holds at least its first block.
 * @group Index
 */
export interface OverlapScores {
  /** Sorted by `blocks` (descending), then `workerId`, then `dpRank`. */
  scores: WorkerScore[];
  /** A JSON-safe copy: worker ids as decimal strings, so `JSON.stringify(scores)` works. */
  toJSON(): unknown;
}

export type { AppliedCounts, IndexStats, LowerTierStats, LowerTiersStats, RejectedCounts, SkippedCounts } from './index-stats.js';

const INDEX_OPTIONS = ['blockSize', 'backend', 'writerThreads', 'approximate', 'now', 'highWaterMark'] as const;
const REQUEST_OPTIONS = ['loraName', 'cacheNamespace', 'eagle', 'mmHashes'] as const;
const U32_MAX = 0xffffffff;

/** @internal */
export function checkDpRank(value: unknown, name: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > U32_MAX) {
    throw new KvRouteError('ERR_INVALID_ARG', `${name} must be an integer in [0, 2^32), got ${describe(value)}`);
  }
  return value;
}

/** @internal */
export function checkWorkerId(value: unknown, name = 'workerId'): bigint {
  if (typeof value === 'string') throw new KvRouteError('ERR_INVALID_ARG', `${name} must be a number or a bigint, got ${describe(value)}`);
  return toU64(value, name);
}

/**
 * The KV index. Events are validated when given and applied in the background (native) or at
 * once (JS); `flush()` resolves when everything given so far is visible to reads. Reads never wait
 * for queued events and never report more blocks than a rank held at some instant.
 *
 * @example
 * ```ts
 * const index = new KvIndex({ blockSize: 16 });
 * index.applyEvents(eventsFromWorkers);
 * await index.flush();
 * const { scores } = index.findMatchesForRequest(tokenIds);
 * ```
 * @group Index
 */
export class KvIndex {
  /** Tokens per block. */
  readonly blockSize: number;
  /** The backend this index runs on. */
  readonly backend: BackendName;
  private readonly impl: Backend;
  private readonly inner: IndexBackend;
  private readonly now: () => number;
  private readonly ttlMs: number | undefined;
  private readonly highWaterMark: number;
  private closed = false;
  /** Valid events left out as a cache owner's (counted in `stats().skipped`). */
  private cacheOwnerEvents = 0;
  /** Engine sources feeding this index, by worker id. */
  private readonly sources = new Map<bigint, EngineSource>();

  constructor(opts: KvIndexOptions) {
    const o = checkOptions(opts, 'opts', INDEX_OPTIONS);
    if (opts === undefined) throw new KvRouteError('ERR_INVALID_ARG', 'KvIndex needs options with at least blockSize');
    this.blockSize = checkBlockSize(o.blockSize, 'opts.blockSize');
    this.impl = resolveBackend(o.backend, 'opts.backend');
    this.backend = this.impl.name;
    const threads = o.writerThreads ?? Math.max(1, Math.min(4, availableParallelism() - 1));
    if (typeof threads !== 'number' || !Number.isInteger(threads) || threads < 1 || threads > 64) {
      throw new KvRouteError('ERR_INVALID_ARG', `opts.writerThreads must be an integer in [1, 64], got ${describe(threads)}`);
    }
    if (o.now !== undefined && typeof o.now !== 'function') {
      throw new KvRouteError('ERR_INVALID_ARG', `opts.now must be a function returning milliseconds, got ${describe(o.now)}`);
    }
    this.now = (o.now as (() => number) | undefined) ?? Date.now;
    const hwm = o.highWaterMark ?? 4096;
    if (typeof hwm !== 'number' || !Number.isSafeInteger(hwm) || hwm < 1) {
      throw new KvRouteError('ERR_INVALID_ARG', `opts.highWaterMark must be a positive integer, got ${describe(hwm)}`);
    }
    this.highWaterMark = hwm;
    if (o.approximate !== undefined) {
      const a = checkOptions(o.approximate, 'opts.approximate', ['ttlMs']);
      if (typeof a.ttlMs !== 'number' || !Number.isFinite(a.ttlMs) || a.ttlMs <= 0) {
        throw new KvRouteError('ERR_INVALID_ARG', `opts.approximate.ttlMs must be a positive number, got ${describe(a.ttlMs)}`);
      }
      this.ttlMs = a.ttlMs;
    }
    this.inner = this.impl.createIndex(threads);
    internals.set(this, { impl: this.impl, inner: this.inner });
  }

  /**
   * Rebuilds an index from {@link KvIndex.dump} output (objects or JSON text); ready to read.
   * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument or option; `ERR_INVALID_EVENT` for a malformed dump (nothing is kept).
   */
  static fromDump(events: Iterable<RouterEvent> | string, opts: KvIndexOptions): KvIndex {
    const index = new KvIndex(opts);
    try {
      index.applyEvents(events);
      index.inner.flushSync();
    } catch (err) {
      index.close();
      throw err;
    }
    return index;
  }

  private open(): void {
    if (this.closed) throw new KvRouteError('ERR_CLOSED', 'this KvIndex is closed');
  }

  private clock(): number {
    const t = this.now();
    if (typeof t !== 'number' || !Number.isFinite(t))
      throw new KvRouteError('ERR_INVALID_ARG', `opts.now() must return a finite number, got ${describe(t)}`);
    return t;
  }

  /**
   * Validates one event (an object or its JSON text) now; applies it in the background.
   * Returns false when the queue has reached `highWaterMark` (see {@link KvIndex.pending}).
   * @throws {KvRouteError} `ERR_INVALID_EVENT` for a malformed event (nothing applied); `ERR_CLOSED` after `close()`.
   */
  applyEvent(event: RouterEvent | string): boolean {
    this.open();
    if (typeof event === 'string' && this.inner.applyJson) {
      this.cacheOwnerEvents += this.inner.applyJson(event, false, this.clock());
      return this.inner.pending() < this.highWaterMark;
    }
    const value = typeof event === 'string' ? parseJsonEvent(event) : event;
    const packed = packEvents([value], () => 'event');
    this.cacheOwnerEvents += packed.cacheOwnerEvents;
    if (packed.meta.length > 0) this.inner.applyPacked(packed.meta, packed.words, this.clock());
    return this.inner.pending() < this.highWaterMark;
  }

  /**
   * A warm start's snapshot, parsed and applied in Rust off the JavaScript thread; `undefined`
   * where the backend reads snapshots in TypeScript (`replicas/snapshot.ts`). Rejects as
   * `warmStart` does. @internal
   */
  async applySnapshotText(text: string, model: string | undefined): Promise<RawSnapshotInfo | undefined> {
    this.open();
    const info = await this.inner.applySnapshotJson?.(text, model, this.blockSize, this.clock());
    this.cacheOwnerEvents += info?.cacheOwnerEvents ?? 0;
    return info;
  }

  /**
   * Validates a batch (objects, or JSON text: an array, or NDJSON with lines of JSON whitespace
   * skipped) now; applies it in the background. All or nothing: one invalid event rejects the
   * whole batch. Returns false when the queue has reached `highWaterMark`.
   * @throws {KvRouteError} `ERR_INVALID_EVENT` for a malformed event anywhere in the batch (none of it applied); `ERR_CLOSED` after `close()`.
   */
  applyEvents(events: Iterable<RouterEvent> | string): boolean {
    this.open();
    let packed: ReturnType<typeof packEvents>;
    if (typeof events === 'string' && this.inner.applyJson) {
      // Parsed in Rust: no JavaScript objects are built for the batch at all.
      this.cacheOwnerEvents += this.inner.applyJson(events, true, this.clock());
      return this.inner.pending() < this.highWaterMark;
    }
    if (typeof events === 'string') {
      const { values, lines } = parseJsonBatch(events);
      packed = packEvents(values, (i) => (lines ? `line ${lines[i]}` : `events[${i}]`));
    } else if (events !== null && typeof events === 'object' && Symbol.iterator in events) {
      packed = packEvents(events, (i) => `events[${i}]`);
    } else {
      throw new KvRouteError('ERR_INVALID_EVENT', `events must be an iterable of RouterEvent or JSON text, got ${describe(events)}`);
    }
    this.cacheOwnerEvents += packed.cacheOwnerEvents;
    if (packed.meta.length > 0) this.inner.applyPacked(packed.meta, packed.words, this.clock());
    return this.inner.pending() < this.highWaterMark;
  }

  /**
   * Operations accepted and not applied yet: one per `applyEvent(s)` call, worker removal or
   * prediction (always 0 on the JS backend, which applies on the caller's thread). Cheap.
   * @throws {KvRouteError} `ERR_CLOSED` after `close()`.
   */
  pending(): number {
    this.open();
    return this.inner.pending();
  }

  /**
   * Resolves once every event accepted so far is visible to reads.
   * @throws {KvRouteError} (as a rejection) `ERR_CLOSED` after `close()`.
   */
  async flush(): Promise<void> {
    this.open();
    await this.inner.flush();
  }

  /**
   * Per rank, how many leading blocks of `localHashes` it holds.
   * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument (hashes must be u64s); `ERR_CLOSED` after `close()`.
   */
  findMatches(localHashes: BigUint64Array | readonly bigint[]): OverlapScores {
    this.open();
    return withIdJson({ scores: this.inner.findMatches(toHashes(localHashes, 'localHashes'), this.clock()) });
  }

  /**
   * For each of `ranks`: the leading blocks of `localHashes` it holds in device memory, then how
   * many more its host, disk and external tiers hold, each run continuing where the one before
   * stopped (Dynamo's tier walk; lower tiers are fed by events with a `storage_tier` other than
   * `device`, or an engine's CPU and disk media). What routing credits at `hostCacheHitWeight`
   * and `diskCacheHitWeight`.
   * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument; `ERR_CLOSED` after `close()`.
   */
  findTieredMatches(localHashes: BigUint64Array | readonly bigint[], ranks: readonly RankRef[]): TieredScore[] {
    this.open();
    const hashes = toHashes(localHashes, 'localHashes');
    if (!Array.isArray(ranks))
      throw new KvRouteError('ERR_INVALID_ARG', `ranks must be an array of { workerId, dpRank? }, got ${describe(ranks)}`);
    const workers = new BigUint64Array(ranks.length);
    const dps = new Uint32Array(ranks.length);
    ranks.forEach((r: unknown, i) => {
      if (r === null || typeof r !== 'object')
        throw new KvRouteError('ERR_INVALID_ARG', `ranks[${i}] must be { workerId, dpRank? }, got ${describe(r)}`);
      const { workerId, dpRank } = r as Record<string, unknown>;
      workers[i] = checkWorkerId(workerId, `ranks[${i}].workerId`);
      dps[i] = dpRank === undefined ? 0 : checkDpRank(dpRank, `ranks[${i}].dpRank`);
    });
    const out = new Float64Array(4 * ranks.length);
    this.inner.tieredMatches(hashes, this.clock(), workers, dps, out);
    return Array.from(dps, (dpRank, i) => ({
      workerId: workers[i],
      dpRank,
      device: out[4 * i],
      hostPinned: out[4 * i + 1],
      disk: out[4 * i + 2],
      external: out[4 * i + 3],
    }));
  }

  /**
   * Hashes a request with this index's block size and matches it.
   * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument (tokens, options); `ERR_CLOSED` after `close()`.
   */
  findMatchesForRequest(tokens: Uint32Array | readonly number[], opts?: Omit<BlockHashOptions, 'backend'>): OverlapScores {
    this.open();
    return this.findMatches(this.hash(tokens, opts));
  }

  private hash(tokens: Uint32Array | readonly number[], opts: unknown): BigUint64Array {
    const t = toTokens(tokens);
    checkOptions(opts, 'opts', REQUEST_OPTIONS);
    const o = parseBlockHashOptions(opts);
    return this.impl.hashing.blockHashes(t, this.blockSize, o.loraName, o.cacheNamespace, o.eagle, o.mmOffsets, o.mmHashes);
  }

  /**
   * Approximate mode: records that this request was routed to the rank, so its blocks count as
   * held there until `ttlMs` after the last prediction that touched them. Blocks confirmed by real
   * KV events never expire. The prediction is visible to reads when this returns (natively it
   * waits for the worker's writer thread to apply it).
   * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument, or outside approximate mode; `ERR_CLOSED` after `close()`.
   */
  recordRouting(
    workerId: WorkerId,
    dpRank: number,
    tokens: Uint32Array | readonly number[],
    opts?: Omit<BlockHashOptions, 'backend'>,
  ): void {
    this.open();
    if (this.ttlMs === undefined) {
      throw new KvRouteError('ERR_INVALID_ARG', 'recordRouting needs approximate mode: pass { approximate: { ttlMs } } to the KvIndex');
    }
    const id = checkWorkerId(workerId);
    const rank = checkDpRank(dpRank, 'dpRank');
    const locals = this.hash(tokens, opts);
    const now = this.clock();
    this.inner.recordRouting(id, rank, locals, now, now + this.ttlMs);
  }

  /**
   * Drops a worker's blocks: all its ranks, or only `dpRank`. Ordered after its queued events.
   * Removing the whole worker also closes its {@link EngineSource} (which would re-add blocks).
   * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument (worker id, dp rank); `ERR_CLOSED` after `close()`.
   */
  removeWorker(workerId: WorkerId, dpRank?: number): void {
    this.open();
    const id = checkWorkerId(workerId);
    const rank = dpRank === undefined ? undefined : checkDpRank(dpRank, 'dpRank');
    if (rank === undefined) {
      this.sources.get(id)?.close();
      this.inner.ingest(this.blockSize).forgetWorker(id);
    }
    this.inner.removeWorker(id, rank);
  }

  /**
   * Subscribes to an engine's KV events over ZeroMQ (vLLM, SGLang, TensorRT-LLM): every batch is
   * decoded, its blocks hashed with this index's block size and applied; gaps are repaired
   * through the replay socket, restarts clear the rank. Natively all of it runs on a Rust thread.
   * Pass a list to subscribe a fleet (validated whole before any socket opens).
   *
   * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad option or endpoint, a port in use, or a
   * worker already subscribed; `ERR_DEPENDENCY_MISSING` on the JS backend without `zeromq`;
   * `ERR_CLOSED` after close.
   */
  subscribe(opts: SubscribeOptions): EngineSource;
  subscribe(opts: readonly SubscribeOptions[]): EngineSource[];
  subscribe(opts: SubscribeOptions | readonly SubscribeOptions[]): EngineSource | EngineSource[] {
    this.open();
    const list = Array.isArray(opts) ? (opts as readonly SubscribeOptions[]) : [opts as SubscribeOptions];
    const parsed = list.map((o, i) => {
      const name = Array.isArray(opts) ? `opts[${i}]` : 'opts';
      const p = parseSubscribeOptions(o, this.blockSize, name);
      const workerId = checkWorkerId(o.workerId, `${name}.workerId`);
      return { ...p, workerId, name };
    });
    const seen = new Set<bigint>();
    for (const p of parsed) {
      if (this.sources.has(p.workerId) || seen.has(p.workerId)) {
        throw new KvRouteError('ERR_INVALID_ARG', `${p.name}.workerId ${p.workerId} is already subscribed: close its source first`);
      }
      seen.add(p.workerId);
    }
    const ingest = this.inner.ingest(this.blockSize);
    const started: EngineSource[] = [];
    try {
      for (const p of parsed) {
        // Seqs given by the caller, or the ones a warm start loaded (with their batches' digests).
        const resume = p.config.resumeAfter
          ? { resumeAfter: p.config.resumeAfter, resumeDigests: p.config.resumeDigests }
          : takeResumeSeqs(this, p.workerId, p.config.ranks);
        const inner = ingest.startSource({ ...p.config, workerId: p.workerId, blockSize: this.blockSize, ...resume });
        const source = new EngineSource(p.workerId, p.engine, inner, ingest, (s) => {
          if (this.sources.get(s.workerId) === s) this.sources.delete(s.workerId);
        });
        this.sources.set(p.workerId, source);
        started.push(source);
      }
    } catch (err) {
      for (const s of started) s.close();
      throw err;
    }
    return Array.isArray(opts) ? started : started[0];
  }

  /**
   * The engine sources feeding this index.
   * @throws {KvRouteError} `ERR_CLOSED` after `close()`.
   */
  engineSources(): EngineSource[] {
    return [...this.sources.values()];
  }

  /**
   * Decodes one engine KV-event payload (the msgpack of a ZeroMQ message's last frame) and
   * applies it to the rank, for callers with their own transport (frames relayed over NATS or
   * Kafka, say). Conversion state (cache namespaces, learned groups, lower tiers) is kept per rank
   * across calls and shared with {@link KvIndex.subscribe}. Sequence numbers are the transport's
   * business here: no gap or restart detection.
   *
   * @throws {KvRouteError} `ERR_INVALID_EVENT` when the payload does not decode (counted, nothing
   * applied); `ERR_INVALID_ARG` for bad arguments; `ERR_CLOSED` after close.
   */
  applyEngineBatch(workerId: WorkerId, dpRank: number, payload: Uint8Array, opts?: ApplyEngineBatchOptions): BatchResult {
    this.open();
    const id = checkWorkerId(workerId);
    const rank = checkDpRank(dpRank, 'dpRank');
    if (!(payload instanceof Uint8Array))
      throw new KvRouteError('ERR_INVALID_ARG', `payload must be a Uint8Array (or Buffer), got ${describe(payload)}`);
    const o = checkOptions(opts, 'opts', ['engine']);
    if (o.engine !== undefined && !['auto', 'vllm', 'sglang', 'trtllm'].includes(o.engine as string)) {
      throw new KvRouteError('ERR_INVALID_ARG', `opts.engine must be one of auto, vllm, sglang, trtllm, got ${describe(o.engine)}`);
    }
    const r = this.inner.ingest(this.blockSize).applyBatch(id, rank, payload, this.clock());
    if (r.error != null) throw new KvRouteError('ERR_INVALID_EVENT', `engine batch does not decode: ${r.error}`);
    const result: BatchResult = { indexEvents: r.indexEvents, stats: toIngestStats(r.counters) };
    if (r.blockSizeMismatch) result.blockSizeMismatch = { engine: r.blockSizeMismatch[0], router: r.blockSizeMismatch[1] };
    return result;
  }

  /**
   * What engine-event ingestion counted: for one worker (or one of its ranks), or in total.
   * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument; `ERR_CLOSED` after `close()`.
   */
  engineStats(workerId?: WorkerId, dpRank?: number): IngestStats {
    this.open();
    const id = workerId === undefined ? undefined : checkWorkerId(workerId);
    const rank = dpRank === undefined ? undefined : checkDpRank(dpRank, 'dpRank');
    return toIngestStats(this.inner.ingest(this.blockSize).counters(id, rank));
  }

  /**
   * A consistent snapshot as Stored events that {@link KvIndex.fromDump} turns back into an
   * equal index: the device tree's (one per rank per chain, parents first), then the lower
   * tiers' (`host_pinned`, `disk`, `external`), one root store per run of blocks that continue
   * each other in a tier: its first block's `tokens_hash` is that block's position (the
   * sequence hash of its path), the others' their local hashes, so the run replays to exactly
   * those blocks whatever the device holds. Predicted blocks are not included.
   * Serialise it with {@link stringifyEvents}: it holds bigints.
   * @throws {KvRouteError} `ERR_CLOSED` after `close()`.
   */
  dump(): DumpedEvent[] {
    this.open();
    const { meta, words } = this.inner.dump();
    return unpackDump(meta, words);
  }

  /**
   * Sizes, memory and event counters.
   * @throws {KvRouteError} `ERR_CLOSED` after `close()`.
   */
  stats(): IndexStats {
    this.open();
    return toIndexStats(this.inner.stats(), this.cacheOwnerEvents);
  }

  /**
   * Applies what is queued without blocking the event loop (the writer threads drain it while
   * JavaScript runs on), then closes. Prefer it to `close()` with a large queue.
   * @throws nothing; calling it again, or after `close()`, resolves at once.
   */
  async closeAsync(): Promise<void> {
    if (this.closed) return;
    for (const source of [...this.sources.values()]) source.close();
    try {
      await this.inner.flush();
    } finally {
      this.close();
    }
  }

  /**
   * Stops background work and engine sources and frees the index. Idempotent; other calls throw
   * `ERR_CLOSED` afterwards. On the native backend the trees' memory goes back to the system at
   * once (for an index of a megabyte or more, by asking glibc to return its free pages, which
   * takes about a millisecond). It first applies what is still queued, on this thread:
   * with a large queue that blocks the event loop (use {@link KvIndex.closeAsync}). A process
   * that exits without closing drops the queue: the index lives in memory and is rebuilt from
   * the engines.
   * @throws nothing; calling it again does nothing.
   */
  close(): void {
    if (this.closed) return;
    for (const source of [...this.sources.values()]) source.close();
    this.closed = true;
    this.inner.close();
  }
}
