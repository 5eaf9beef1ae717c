/**
 * `KvRouter`: picks the worker (and data-parallel rank) for each request by KV-cache overlap
 * weighed against load, books the request there, and releases it when the caller reports the
 * first token and the end.
 */

import type { RouterCoreBackend } from '../backend-types.js';
import { KvRouteError } from '../errors.js';
import type { RouterEvent } from '../events/types.js';
import type { EngineSource } from '../ingest/source.js';
import type { ApplyEngineBatchOptions, BatchResult, SubscribeOptions } from '../ingest/types.js';
import { withIdJson } from '../json-ids.js';
import type { IndexStats } from '../kv-index.js';
import { checkWorkerId, indexInternals, KvIndex, type WorkerId } from '../kv-index.js';
import { MAX_WORKERS } from '../limits.js';
import { SeededRandom } from '../random.js';
import { describe } from '../validate.js';
import { Admission } from './admission.js';
import { bookAll } from './booking.js';
import { type KvRouterOptions, type ResolvedRouterOptions, resolveRouterOptions } from './options.js';
import { checkGeneratedTokens, outputStep } from './output-blocks.js';
import { ReplicaLink } from './replica-link.js';
import { checkRequestId, checkSessionId, handlesOf, type InFlight, type Prepared, prepareRequest } from './request.js';
import { Scorer } from './scorer.js';
import { SessionAffinity, type SessionBinding } from './session-affinity.js';
import { Sweeper } from './sweeper.js';
import type { PotentialLoad, RankLoad, RouteDecision, RouteRequest, RouterStats, WorkerConfig } from './types.js';
import { type Candidates, resolveWorker, WorkerRegistry } from './workers.js';

/** Session bindings the once-a-second expiry sweep looks at (a full pass runs for `stats()`). */
const SESSION_SWEEP_BUDGET = 4096;

/**
 * The KV-aware router.
 *
 * @example
 * ```ts
 * const router = new KvRouter({ blockSize: 16 });
 * router.addWorker(1);
 * router.addWorker(2, { dataParallelSize: 2 });
 * router.applyEvents(kvEventsFromWorkers);
 * const { workerId, dpRank } = await router.route({ requestId: 'r1', tokens });
 * // ... forward the request; on its first token:
 * router.markPrefillCompleted('r1');
 * // ... when it ends (finished, failed or cancelled):
 * router.free('r1');
 * ```
 * @group Router
 */
export class KvRouter {
  /**
   * The KV index the router matches against; fed by `applyEvent(s)`. With predictions
   * (approximate mode, predict-on-route) the router records each decision on the index's writer
   * thread without waiting; its own next decision waits for it, reads through `index` see it
   * after `flush()`.
   */
  readonly index: KvIndex;
  private readonly opts: ResolvedRouterOptions;
  private readonly core: RouterCoreBackend;
  private readonly workers = new WorkerRegistry();
  /** The queue, when `routerQueueThreshold` is set. */
  private readonly admission: Admission | undefined;
  private readonly scorer: Scorer;
  /** The load sync with the other replicas, when configured. */
  private readonly replicas: ReplicaLink | undefined;
  /** Session affinity, when `sessionAffinityTtlSecs` is set. */
  private readonly sessions: SessionAffinity | undefined;
  private readonly inFlight = new Map<string, InFlight>();
  private readonly byHandle = new Map<number, string>();
  private nextHandle = 1;
  /** Router-clock time of the next expiry sweep (see `expire`). */
  private nextExpiryAt = Number.NEGATIVE_INFINITY;
  private closed = false;
  private readonly counts = {
    routed: 0,
    queuedTotal: 0,
    aborted: 0,
    expired: 0,
    droppedWithWorker: 0,
    unknownFree: 0,
    unknownPrefillCompleted: 0,
    unknownOutputTokens: 0,
    callsAfterClose: 0,
  };
  /** The index's stats when the router closed (what `stats()` reports afterwards). */
  private finalIndexStats: IndexStats | undefined;
  /** The expiry sweep while requests wait (see sweeper.ts). */
  private readonly sweeper = new Sweeper(
    () => !this.closed && this.queued > 0,
    () => {
      this.expire(true);
      this.drain();
    },
  );

  constructor(opts: KvRouterOptions) {
    this.opts = resolveRouterOptions(opts);
    const o = this.opts;
    this.index = new KvIndex({
      blockSize: o.blockSize,
      ...(o.backend ? { backend: o.backend } : {}),
      ...(o.writerThreads !== undefined ? { writerThreads: o.writerThreads } : {}),
      // Decisions are recorded as predictions (by the core's `book`, with this TTL): every one
      // without KV events (approximate mode), and with them when predict-on-route is on. The
      // index's approximate mode lets `router.index.recordRouting` add predictions of the same TTL.
      ...(o.predictedTtlSecs === null ? {} : { approximate: { ttlMs: o.predictedTtlSecs * 1000 } }),
      now: o.now,
    });
    const { impl, inner } = indexInternals(this.index);
    this.core = impl.createRouterCore(inner);
    this.admission =
      o.queueThreshold === null
        ? undefined
        : new Admission(
            o.queueThreshold,
            o.queuePolicy,
            this.workers,
            {
              candidatesFor: (p) => this.candidatesFor(p),
              schedule: (p, c, queuedMs) => this.schedule(p, c, queuedMs),
              release: (p, c, queuedMs) => this.schedule(p, this.restick(p, c), queuedMs),
              bestCachedTokens: (p, c) => this.bestCachedTokens(p, c),
              loads: () => this.core.snapshot(),
              clock: () => this.clock(),
              waited: () => this.sweeper.arm(),
            },
            this.counts,
          );
    this.scorer = new Scorer(this.core, o, new SeededRandom(o.seed));
    this.sessions = o.sessionAffinityTtlMs === null ? undefined : new SessionAffinity(o.sessionAffinityTtlMs, o.sessionAffinityMaxSessions);
    const hooks = { next: () => this.nextHandle++, drain: () => this.drain() };
    this.replicas = o.replicas && new ReplicaLink(o.replicas, o, this.core, hooks, this.sessions);
  }

  /**
   * Resolves once the replica sync has connected and announced this replica (at once without
   * `replicas`). Routing does not wait for it: until then it weighs local load only.
   */
  ready(): Promise<void> {
    return this.replicas?.ready ?? Promise.resolve();
  }

  /** The backend this router runs on. */
  get backend(): KvIndex['backend'] {
    return this.index.backend;
  }

  private open(): void {
    if (this.closed) throw new KvRouteError('ERR_CLOSED', 'this KvRouter is closed');
  }

  private clock(): number {
    const t = this.opts.now();
    if (typeof t !== 'number' || !Number.isFinite(t))
      throw new KvRouteError('ERR_INVALID_ARG', `opts.now() must return a finite number, got ${describe(t)}`);
    return t;
  }

  // ---- workers -------------------------------------------------------------------------------

  /**
   * Registers a worker; its ranks become candidates.
   * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument (id, config, or more than MAX_WORKERS workers); `ERR_CLOSED` after `close()`.
   */
  addWorker(workerId: WorkerId, cfg?: WorkerConfig): void {
    this.open();
    const id = checkWorkerId(workerId);
    if (this.workers.get(id)) throw new KvRouteError('ERR_INVALID_ARG', `worker ${id} is already added (use updateWorker)`);
    if (this.workers.size >= MAX_WORKERS) throw new KvRouteError('ERR_INVALID_ARG', `a router takes at most ${MAX_WORKERS} workers`);
    this.workers.set(resolveWorker(id, cfg));
    this.drain();
  }

  /**
   * Replaces a registered worker's configuration.
   * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument (unknown worker, bad config); `ERR_CLOSED` after `close()`.
   */
  updateWorker(workerId: WorkerId, cfg: WorkerConfig): void {
    this.open();
    const id = checkWorkerId(workerId);
    if (!this.workers.get(id)) throw new KvRouteError('ERR_INVALID_ARG', `worker ${id} is not registered`);
    this.workers.set(resolveWorker(id, cfg));
    this.drain();
  }

  /**
   * Unregisters a worker, drops its cache entries from the index and its in-flight requests.
   * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument; `ERR_CLOSED` after `close()`.
   */
  removeWorker(workerId: WorkerId): void {
    this.open();
    const id = checkWorkerId(workerId);
    this.workers.delete(id);
    this.sessions?.dropWorker(id, this.opts.now());
    this.index.removeWorker(id);
    for (const handle of this.core.removeWorker(id)) if (this.forget(handle)) this.counts.droppedWithWorker++;
    this.drain();
  }

  // ---- events --------------------------------------------------------------------------------

  /**
   * Subscribes to engines' KV events (see {@link KvIndex.subscribe}). A worker not registered
   * yet is added with `dataParallelSize` from the options, so it is routable at once;
   * {@link KvRouter.removeWorker} closes its source.
   *
   * @throws {KvRouteError} as {@link KvIndex.subscribe}; nothing is registered when it throws.
   */
  subscribe(opts: SubscribeOptions): EngineSource;
  subscribe(opts: readonly SubscribeOptions[]): EngineSource[];
  subscribe(opts: SubscribeOptions | readonly SubscribeOptions[]): EngineSource | EngineSource[] {
    this.open();
    const list = Array.isArray(opts) ? (opts as readonly SubscribeOptions[]) : [opts as SubscribeOptions];
    const sources = this.index.subscribe(list);
    for (const [i, o] of list.entries()) {
      const id = sources[i].workerId;
      if (!this.workers.get(id) && this.workers.size < MAX_WORKERS) {
        const size = o.dataParallelSize ?? (Array.isArray(o.endpoint) ? o.endpoint.length : 1);
        this.workers.set(resolveWorker(id, { dataParallelSize: size }));
      }
    }
    this.drain();
    return Array.isArray(opts) ? sources : sources[0];
  }

  /**
   * Applies one engine KV-event payload (see {@link KvIndex.applyEngineBatch}).
   * @throws {KvRouteError} `ERR_INVALID_EVENT` when the payload does not decode; `ERR_INVALID_ARG` for a bad argument; `ERR_CLOSED` after `close()`.
   */
  applyEngineBatch(workerId: WorkerId, dpRank: number, payload: Uint8Array, opts?: ApplyEngineBatchOptions): BatchResult {
    this.open();
    return this.index.applyEngineBatch(workerId, dpRank, payload, opts);
  }

  /**
   * Feeds one KV event to the index (see {@link KvIndex.applyEvent}).
   * @throws {KvRouteError} `ERR_INVALID_EVENT` for a malformed event (nothing applied); `ERR_CLOSED` after `close()`.
   */
  applyEvent(event: RouterEvent | string): boolean {
    this.open();
    return this.index.applyEvent(event);
  }

  /**
   * Feeds a batch of KV events to the index (see {@link KvIndex.applyEvents}).
   * @throws {KvRouteError} `ERR_INVALID_EVENT` for a malformed event (none of the batch applied); `ERR_CLOSED` after `close()`.
   */
  applyEvents(events: Iterable<RouterEvent> | string): boolean {
    this.open();
    return this.index.applyEvents(events);
  }

  /**
   * Resolves once every event given so far is visible to routing.
   * @throws {KvRouteError} (as a rejection) `ERR_CLOSED` after `close()`.
   */
  flush(): Promise<void> {
    return this.index.flush();
  }

  // ---- routing -------------------------------------------------------------------------------

  private prepare(req: RouteRequest): Prepared {
    return prepareRequest(req, this.opts);
  }

  /** A request of a bound session goes to the session's rank; an explicit pin takes it out of affinity. */
  private stick(p: Prepared): void {
    if (!this.sessions || p.sessionId === undefined) return;
    if (p.pinned) p.sessionId = undefined;
    else p.pinned = this.sessions.target(p.sessionId, this.clock(), (t) => this.workers.admits(t, p.allowed));
  }

  /**
   * A request released from the queue goes to its session's rank when another request of the
   * session was booked, binding it, while this one waited; even to a busy rank, as a released
   * request may go to any of its candidates.
   */
  private restick(p: Prepared, c: Candidates): Candidates {
    if (p.pinned || p.sessionId === undefined) return c;
    this.stick(p);
    return p.pinned ? this.candidatesFor(p) : c;
  }

  /** The candidates of a request: every rank of its allowed workers, or its pinned rank(s). */
  private candidatesFor(p: Prepared): Candidates {
    return this.workers.forRequest(p.pinned, p.allowed);
  }

  /** Scores, chooses and books a request. */
  private schedule(p: Prepared, c: Candidates, queuedMs: number): RouteDecision {
    const now = this.clock();
    const handle = this.nextHandle++;
    const batchHandles = p.batch.map(() => this.nextHandle++);
    let reached = false;
    try {
      const { scores, blocks, batch } = this.scorer.score(handle, p, c, now, batchHandles);
      const i = this.scorer.choose(scores, p);
      const chosen = scores[i];
      const uncached = this.opts.trackPrefillTokens ? Math.max(0, p.tokens.length - chosen.cachedTokens) : 0;
      // Predictions (approximate mode, predict-on-route) use the hashes the request was scored
      // with, multimodal content included, and are recorded before the booking.
      const predictUntil = this.opts.predictedTtlSecs === null ? undefined : now + this.opts.predictedTtlSecs * 1000;
      const prompts = [{ handle, prefillTokens: uncached, blocks }, ...(batch?.bookings(batchHandles, i) ?? [])];
      reached = true;
      bookAll(this.core, this.replicas, prompts, {
        workerId: chosen.workerId,
        dpRank: chosen.dpRank,
        trackActiveBlocks: this.opts.trackActiveBlocks,
        now,
        predictUntil,
      });
      const output = this.opts.trackOutputBlocks
        ? { promptTokens: p.tokens.length, expectedOutputTokens: p.req.maxOutputTokens, generated: 0, outputBlocks: 0 }
        : undefined;
      this.inFlight.set(p.req.requestId, { handle, workerId: chosen.workerId, dpRank: chosen.dpRank, output, batch: batchHandles });
      if (p.sessionId !== undefined) this.sessions?.booked(p.sessionId, p.req.requestId, chosen.workerId, chosen.dpRank, now);
      this.byHandle.set(handle, p.req.requestId);
      this.counts.routed++;
      return withIdJson({
        workerId: chosen.workerId,
        dpRank: chosen.dpRank,
        overlapBlocks: chosen.overlap,
        cachedTokens: chosen.cachedTokens,
        requiredBlocks: blocks,
        cost: chosen.cost,
        queuedMs,
        candidates: scores,
      });
    } finally {
      // Scoring or choosing failed: nothing was booked (a failed booking released its handles).
      if (!reached) for (const h of [handle, ...batchHandles]) this.core.discard(h);
    }
  }

  /** Requests waiting in the queue. */
  private get queued(): number {
    return this.admission?.length ?? 0;
  }

  /**
   * Releases waiting requests that one of their candidates has room for (see admission.ts);
   * `freed`: only this worker's load went down.
   */
  private drain(freed?: bigint): void {
    this.admission?.drain(freed);
  }

  /** The most tokens any candidate has cached (the `wspt` queue policy's score), booking nothing. */
  private bestCachedTokens(p: Prepared, c: Candidates): number {
    let best = 0;
    for (const s of this.scorer.peek([this.nextHandle++], p, c, this.clock())) best = Math.max(best, s.cachedTokens);
    return best;
  }

  /**
   * Routes a request and books it on the chosen rank. Resolves at once unless queueing is on and
   * every candidate is busy; then it waits, behind the waiting requests that compete for the same
   * workers, until `markPrefillCompleted` / `free` of other requests give one of its candidates room.
   * @throws {KvRouteError} (as a rejection) `ERR_INVALID_ARG` for a bad argument (the request); `ERR_DUPLICATE_REQUEST` for an id in flight or waiting; `ERR_NO_WORKERS` when no (allowed) worker exists; `ERR_ABORTED` when its signal aborts or `free` cancels it while it waits; `ERR_CLOSED` after `close()`.
   */
  route(req: RouteRequest): Promise<RouteDecision> {
    try {
      this.open();
      const p = this.prepare(req);
      const id = p.req.requestId;
      if (this.inFlight.has(id) || this.admission?.has(id))
        throw new KvRouteError('ERR_DUPLICATE_REQUEST', `request ${id} is already in flight or waiting`);
      if (p.req.signal?.aborted) throw new KvRouteError('ERR_ABORTED', `request ${id} was aborted`);
      this.expire();
      this.stick(p);
      const c = this.candidatesFor(p);
      if (this.admission) return this.admission.admit(p, c);
      return Promise.resolve(this.schedule(p, c, 0));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * What route() would weigh for each candidate, without booking anything.
   * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument; `ERR_NO_WORKERS`; `ERR_CLOSED` after `close()`.
   */
  potentialLoads(req: RouteRequest): PotentialLoad[] {
    this.open();
    const p = this.prepare(req);
    this.expire();
    const handles = [this.nextHandle++, ...p.batch.map(() => this.nextHandle++)];
    // A candidate's score without its cost and tree size, its overlap under the load's name.
    return this.scorer
      .peek(handles, p, this.candidatesFor(p), this.clock())
      .map(({ overlap, cost: _, treeSize: __, ...rest }) => ({ ...rest, overlapBlocks: overlap }));
  }

  /**
   * Where a session's requests go now: its binding (`sessionAffinityTtlSecs`), or undefined when
   * the session is not bound (or affinity is off).
   * @throws {KvRouteError} `ERR_INVALID_ARG` for an id that is not a string of 1 to `MAX_SESSION_ID_LENGTH` characters; `ERR_CLOSED` after `close()`.
   */
  session(sessionId: string): SessionBinding | undefined {
    this.open();
    checkSessionId(sessionId, 'sessionId');
    const binding = this.sessions?.binding(sessionId, this.clock());
    return binding && withIdJson(binding);
  }

  // ---- lifecycle of a routed request ----------------------------------------------------------

  /**
   * The request's first token arrived: its prefill load ends, and its expiry lease is renewed.
   * Unknown ids are counted; after `close()` the call is a counted no-op (`callsAfterClose`), so
   * shutdown paths need no guard.
   * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument for a non-string id; unknown ids and calls after close are counted no-ops.
   */
  markPrefillCompleted(requestId: string): void {
    checkRequestId(requestId);
    const entry = this.lifecycleEntry(requestId, 'unknownPrefillCompleted');
    if (!entry) return;
    for (const h of handlesOf(entry)) {
      this.core.prefillCompleted(h);
      this.replicas?.prefilled(h);
      this.core.touch(h, this.clock());
    }
    this.expire();
    this.drain(entry.workerId);
  }

  /**
   * The request is still making progress (for example, tokens keep streaming): renews its expiry
   * lease, so `requestExpirySecs` counts from now. Returns false for an unknown id; a counted
   * no-op after `close()`.
   * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument for a non-string id; unknown ids and calls after close are counted no-ops.
   */
  touch(requestId: string): boolean {
    checkRequestId(requestId);
    if (this.closed) {
      this.counts.callsAfterClose++;
      return false;
    }
    const entry = this.inFlight.get(requestId);
    if (!entry) return false;
    for (const h of entry.batch) this.core.touch(h, this.clock());
    return this.core.touch(entry.handle, this.clock());
  }

  /**
   * The request has generated `generatedTokens` tokens so far (a running total, as a stream's
   * usage reports it): renews its expiry lease like {@link touch}, and with
   * `routerTrackOutputBlocks` adds a block of the request's own to its rank's decode load for
   * each block boundary its sequence has crossed since the last report; a request routed with
   * `maxOutputTokens` then weighs the blocks it alone holds by the share of that output still to
   * come. A total below an earlier one changes nothing. Unknown ids are counted
   * (`unknownOutputTokens`); after `close()` the call is a counted no-op.
   * @throws {KvRouteError} `ERR_INVALID_ARG` for a non-string id or a count that is not an integer in [0, `MAX_TOKENS_PER_REQUEST`].
   */
  markOutputTokens(requestId: string, generatedTokens: number): void {
    checkRequestId(requestId);
    checkGeneratedTokens(generatedTokens);
    const entry = this.lifecycleEntry(requestId, 'unknownOutputTokens');
    if (!entry) return;
    for (const h of handlesOf(entry)) this.core.touch(h, this.clock());
    const step = entry.output && outputStep(entry.output, generatedTokens, this.opts.blockSize);
    if (step) this.core.addOutputBlocks(entry.handle, step.add, step.decay);
  }

  /**
   * The request ended (finished, failed or cancelled): all its load ends. A request still
   * waiting in the queue is cancelled (its `route` rejects with `ERR_ABORTED`). Unknown ids are
   * counted; after `close()` it is a counted no-op (`callsAfterClose`), so a request's
   * `finally { router.free(id) }` is safe during shutdown.
   * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument for a non-string id; unknown ids and calls after close are counted no-ops.
   */
  free(requestId: string): void {
    checkRequestId(requestId);
    if (this.closed) {
      this.counts.callsAfterClose++;
      return;
    }
    const entry = this.inFlight.get(requestId);
    if (entry) {
      // Its batch's bookings first: the request's own forgets the entry that lists them.
      for (const h of [...entry.batch, entry.handle]) {
        this.core.free(h);
        this.forget(h);
      }
    } else if (!this.admission?.cancel(requestId, new KvRouteError('ERR_ABORTED', `request ${requestId} was freed while queued`))) {
      this.counts.unknownFree++;
    }
    this.expire();
    // Only a request in flight held load: cancelling a waiting one, or an unknown id, frees none.
    if (entry) this.drain(entry.workerId);
  }

  /**
   * The in-flight request a lifecycle call is about; `undefined` once the call is counted as a
   * no-op: after `close()` in `callsAfterClose`, for an unknown id in `unknown`.
   */
  private lifecycleEntry(requestId: string, unknown: 'unknownPrefillCompleted' | 'unknownOutputTokens'): InFlight | undefined {
    if (this.closed) {
      this.counts.callsAfterClose++;
      return undefined;
    }
    const entry = this.inFlight.get(requestId);
    if (!entry) this.counts[unknown]++;
    return entry;
  }

  /** A booking ended in the core; false when it was a peer's. */
  private forget(handle: number): boolean {
    this.replicas?.freed(handle);
    const id = this.byHandle.get(handle);
    if (id === undefined) return false;
    this.byHandle.delete(handle);
    this.inFlight.delete(id);
    this.sessions?.released(id, this.opts.now());
    return true;
  }

  /**
   * Frees in-flight requests older than the expiry. Expiry is counted in minutes, so sweeps run at
   * most once per second of router clock (or per tenth of the expiry, if shorter) instead of
   * crossing into the backend on every call; `force` sweeps now.
   */
  private expire(force = false): void {
    const now = this.clock();
    if (!force && now < this.nextExpiryAt) return;
    this.nextExpiryAt = now + Math.min(1000, this.opts.requestExpiryMs / 10);
    this.sessions?.sweep(now, SESSION_SWEEP_BUDGET);
    let expired = 0;
    for (const handle of this.core.expire(now - this.opts.requestExpiryMs)) {
      if (this.forget(handle)) this.counts.expired++;
      expired++;
    }
    // Load dropped: waiters may fit now.
    if (expired > 0) this.drain();
  }

  // ---- report and shutdown -------------------------------------------------------------------

  /**
   * Counters, per-rank load and the index's stats. After `close()`: the counters, no load, and the index's stats at close.
   * @throws nothing (after `close()` it reports the counters and the index's final stats).
   */
  stats(): RouterStats {
    if (!this.closed) {
      this.expire(true);
      this.sessions?.sweep(this.clock());
    }
    return withIdJson({
      workers: this.workers.size,
      ranks: this.workers.rankCount,
      inFlight: this.closed ? 0 : this.inFlight.size,
      queued: this.closed ? 0 : this.queued,
      ...this.counts,
      load: this.closed ? [] : (this.core.snapshot() as RankLoad[]),
      index: this.closed ? (this.finalIndexStats as IndexStats) : this.index.stats(),
      ...(this.replicas ? { replicas: this.replicas.stats() } : {}),
      ...(this.sessions ? { sessions: this.sessions.stats() } : {}),
    });
  }

  /**
   * Rejects waiting requests with `ERR_CLOSED` and closes the index (see {@link KvIndex.close}:
   * a large event queue is applied first, on this thread). Idempotent.
   * @throws nothing; calling it again does nothing.
   */
  close(): void {
    if (this.closed) return;
    this.stop();
    this.finalIndexStats = this.index.stats();
    this.index.close();
    // Says goodbye to the peers in the background; closeAsync waits for it.
    void this.replicas?.close();
  }

  /**
   * `close()` without blocking the event loop: waiters are rejected at once, then the index
   * applies its queue on its own threads and closes.
   * @throws nothing; calling it again resolves at once.
   */
  async closeAsync(): Promise<void> {
    if (this.closed) return;
    this.stop();
    try {
      await this.replicas?.close();
      await this.index.flush();
    } finally {
      this.finalIndexStats = this.index.stats();
      await this.index.closeAsync();
    }
  }

  private stop(): void {
    this.closed = true;
    this.sweeper.disarm();
    this.admission?.rejectAll((id) => new KvRouteError('ERR_CLOSED', `the router closed while request ${id} waited`));
  }
}
