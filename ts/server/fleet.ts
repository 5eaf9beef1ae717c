/**
 * The gateway's workers: for each, an undici connection pool, its KV-event source, its circuit
 * breaker and the health probes. A worker whose breaker opens is taken out of the router (its
 * index entries and load dropped, its event sources closed) and put back, re-subscribed, when
 * its probes succeed again; the engines' replay sockets then refill what it holds.
 * @internal
 * @module
 */

import type { FastifyBaseLogger } from 'fastify';
import { type buildConnector, Pool } from 'undici';
import { KvRouteError } from '../errors.js';
import type { EngineSource } from '../ingest/source.js';
import type { SourceState } from '../ingest/types.js';
import type { KvRouter } from '../router/kv-router.js';
import { Breaker, type FailureKind, type WorkerHealthState } from './breaker.js';
import { CacheAccuracy } from './cache-accuracy.js';
import { type CutVerdict, InFlightCutOff, WorkerCutOff } from './cut-off.js';
import { describeError, failureKind } from './failures.js';
import type { FleetWorker, HealthChange, ListenerStatus, ModelCardFacts, RoutableWorkers } from './fleet-worker.js';
import type { ResolvedGatewayOptions, ResolvedWorker } from './options.js';
import { FOUND_ASLEEP, FOUND_AWAKE, type RestChange, type RestReason, WorkerRest } from './worker-rest.js';
import type { DisaggregationProtocol } from './worker-role.js';

/** How often a healthy worker's `/v1/models` is read again, to see adapters loaded at run time. */
const MODELS_REFRESH_MS = 15_000;

export class Fleet {
  private readonly members = new Map<bigint, FleetWorker>();
  private probeTimer: NodeJS.Timeout | undefined;
  private probing = false;
  private closed = false;
  private readonly listeners: ((c: HealthChange) => void)[] = [];
  private readonly modelListeners: ((m: FleetWorker) => void)[] = [];
  private readonly membershipListeners: ((id: bigint, present: boolean) => void)[] = [];
  private readonly restListeners: ((id: bigint, reasons: readonly RestReason[]) => void)[] = [];
  /** `routable()`'s answer until membership or health changes (read on every request). */
  private routableCache: RoutableWorkers | undefined;

  /** Headers every request to a worker carries: the workers' API key, when configured. */
  readonly upstreamHeaders: Readonly<Record<string, string>>;

  constructor(
    private readonly router: KvRouter,
    private readonly opts: ResolvedGatewayOptions,
    private readonly log: FastifyBaseLogger,
    /** How connections to workers are made, when not plainly (`upstream.tls`). */
    private readonly connect?: buildConnector.connector,
  ) {
    this.upstreamHeaders = opts.upstream.apiKey === undefined ? {} : { authorization: `Bearer ${opts.upstream.apiKey}` };
  }

  /** Starts the active probes (none when `health.intervalMs` is 0). */
  start(): void {
    if (this.opts.health.intervalMs > 0 && !this.probeTimer) {
      this.probeTimer = setInterval(() => void this.probeAll(), this.opts.health.intervalMs);
      this.probeTimer.unref();
    }
  }

  onHealthChange(fn: (c: HealthChange) => void): void {
    this.listeners.push(fn);
  }

  /** Called when a worker joins (`present`) or leaves the fleet, whichever API added or removed it. */
  onMembership(fn: (id: bigint, present: boolean) => void): void {
    this.membershipListeners.push(fn);
  }

  /** Called when a worker starts or stops resting (`reasons` empty: back in routing). */
  onRestChange(fn: (id: bigint, reasons: readonly RestReason[]) => void): void {
    this.restListeners.push(fn);
  }

  /** A control route the worker answered 200 to: it may rest now, or be back (see `worker-rest.ts`). */
  rested(id: bigint, change: RestChange): void {
    const m = this.members.get(id);
    if (!m?.rest.apply(change)) return;
    this.routableCache = undefined;
    const reasons = m.rest.reasons;
    if (reasons.length > 0) this.log.info({ worker: String(id), reasons }, 'worker resting: out of routing until woken');
    else this.log.info({ worker: String(id) }, 'worker woken: back in routing');
    for (const fn of this.restListeners) fn(id, reasons);
  }

  /** Workers resting now (healthy, but out of routing until woken). */
  restingCount(): number {
    let n = 0;
    for (const m of this.members.values()) if (m.rest.isResting) n++;
    return n;
  }

  /** Called after each successful read of a worker's `/v1/models` (its `modelNames` and `adapters` fresh). */
  onModelsRead(fn: (m: FleetWorker) => void): void {
    this.modelListeners.push(fn);
  }

  get(id: bigint): FleetWorker | undefined {
    return this.members.get(id);
  }

  list(): FleetWorker[] {
    return [...this.members.values()];
  }

  /** How its prefill and decode workers pass a request's KV (`disaggregation.protocol`). */
  get protocol(): DisaggregationProtocol {
    return this.opts.disaggregation.protocol;
  }

  /** Workers that may take requests now: with a URL, not down, not resting. Shared: do not modify it. */
  routable(): readonly bigint[] {
    return this.routableByRole().all;
  }

  /**
   * The routable workers by what they take: whole requests (aggregated workers, and decode
   * workers but with SGLang's protocol), prefill legs, decode legs. Shared: do not modify them.
   */
  routableByRole(): RoutableWorkers {
    if (this.routableCache) return this.routableCache;
    const out: RoutableWorkers = { all: [], whole: [], prefill: [], decode: [] };
    // vLLM's and TensorRT-LLM's decode workers take whole requests too; SGLang's meet a prefill worker or fail.
    const decodeServesWhole = this.opts.disaggregation.protocol !== 'sglang';
    for (const m of this.members.values()) {
      if (!m.pool || m.breaker.state === 'down' || m.rest.isResting) continue;
      out.all.push(m.spec.id);
      if (m.spec.role === 'prefill') out.prefill.push(m.spec.id);
      else if (m.spec.role === 'aggregated' || decodeServesWhole) out.whole.push(m.spec.id);
      if (m.spec.role === 'decode') out.decode.push(m.spec.id);
    }
    // Without roles every list but the legs' is the same one (the common case costs nothing more).
    if (out.whole.length === out.all.length) out.whole = out.all;
    this.routableCache = out;
    return out;
  }

  /** Adds a worker to the router, subscribes to its events and opens its pool. */
  add(spec: FleetWorker['spec'], origin: FleetWorker['origin']): FleetWorker {
    if (this.closed) throw new KvRouteError('ERR_CLOSED', 'the gateway is closed');
    if (this.members.has(spec.id)) throw new KvRouteError('ERR_INVALID_ARG', `worker ${spec.id} is already registered`);
    const u = this.opts.upstream;
    const pool = spec.url
      ? new Pool(spec.url, {
          connections: u.connections,
          headersTimeout: u.headersTimeoutMs,
          bodyTimeout: u.bodyTimeoutMs,
          ...(this.connect ? { connect: this.connect } : {}),
        })
      : undefined;
    const member: FleetWorker = {
      spec,
      pool,
      breaker: new Breaker(this.opts.health.failureThreshold, this.opts.health.recoveryThreshold),
      source: undefined,
      inRouter: false,
      get model() {
        return this.modelNames.values().next().value;
      },
      modelNames: new Set(),
      adapters: new Set(),
      cards: new Map(),
      modelsReadAt: Number.NEGATIVE_INFINITY,
      origin,
      accuracy: new CacheAccuracy(),
      rest: new WorkerRest(),
      asksSleeping: true,
      cutOff: new InFlightCutOff(),
    };
    try {
      this.enter(member);
    } catch (err) {
      void pool?.close();
      throw err;
    }
    this.members.set(spec.id, member);
    this.routableCache = undefined;
    for (const fn of this.membershipListeners) fn(spec.id, true);
    this.log.info({ worker: String(spec.id), url: spec.url, origin }, 'worker added');
    if (pool && this.opts.health.intervalMs > 0) void this.probe(member);
    else if (pool) void this.readModels(member);
    return member;
  }

  /** Removes a worker for good: out of the router, its pool closed. */
  async remove(id: bigint): Promise<boolean> {
    const m = this.members.get(id);
    if (!m) return false;
    this.members.delete(id);
    this.routableCache = undefined;
    this.leave(m);
    for (const fn of this.membershipListeners) fn(id, false);
    this.log.info({ worker: String(id) }, 'worker removed');
    await m.pool?.close();
    return true;
  }

  /**
   * Changes a worker's weight, batch budget and role in place: its index entries, load and event
   * sources stay (a worker down gets them when it returns).
   */
  retune(
    id: bigint,
    { weight, maxNumBatchedTokens, role, bootstrapPort }: Pick<ResolvedWorker, 'weight' | 'maxNumBatchedTokens' | 'role' | 'bootstrapPort'>,
  ): void {
    const m = this.members.get(id);
    if (!m) return;
    Object.assign(m.spec, { weight, maxNumBatchedTokens, role, bootstrapPort });
    this.routableCache = undefined;
    if (m.inRouter) this.router.updateWorker(id, this.workerConfig(m.spec));
    this.log.info({ worker: String(id), weight, maxNumBatchedTokens, role }, 'worker updated');
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Replaces a worker's KV-event endpoints (the indexer API adds dp ranks one by one). */
  resubscribe(m: FleetWorker, kvEvents: string[], replay: string[] | undefined): void {
    m.source?.close();
    m.source = undefined;
    Object.assign(m.spec, { kvEvents, replay, dpSize: kvEvents.length });
    if (m.inRouter) {
      this.router.updateWorker(m.spec.id, this.workerConfig(m.spec));
      m.source = this.subscribe(m);
    }
  }

  private workerConfig(spec: ResolvedWorker): { dataParallelSize: number; maxNumBatchedTokens?: number } {
    return {
      dataParallelSize: spec.dpSize,
      ...(spec.maxNumBatchedTokens === undefined ? {} : { maxNumBatchedTokens: spec.maxNumBatchedTokens }),
    };
  }

  private subscribe(m: FleetWorker): EngineSource | undefined {
    const spec = m.spec;
    if (!spec.kvEvents) return undefined;
    const source = this.router.subscribe({
      workerId: spec.id,
      endpoint: spec.kvEvents,
      ...(spec.replay ? { replayEndpoint: spec.replay } : {}),
      dataParallelSize: spec.dpSize,
      blockSize: this.opts.blockSize,
    });
    // An engine that restarted (its events' seq started over) may serve other adapters now:
    // runtime ones are lost on restart. Its model list is read at once, not at the next refresh.
    let restarts = 0;
    source.on('state', () => {
      const now = source.stats().ranks.reduce((n, r) => n + r.restarts, 0);
      if (now > restarts && this.members.get(spec.id) === m) void this.readModels(m);
      restarts = now;
    });
    return source;
  }

  private enter(m: FleetWorker): void {
    this.router.addWorker(m.spec.id, this.workerConfig(m.spec));
    try {
      m.source = this.subscribe(m);
    } catch (err) {
      this.router.removeWorker(m.spec.id);
      throw err;
    }
    m.inRouter = true;
  }

  private leave(m: FleetWorker): void {
    if (!m.inRouter) return;
    m.inRouter = false;
    m.source = undefined;
    // Drops the worker's index entries and in-flight load, and closes its event sources.
    this.router.removeWorker(m.spec.id);
  }

  /** A call to the worker failed (passive detection). */
  failure(id: bigint, kind: FailureKind, detail: string): void {
    const m = this.members.get(id);
    if (!m) return;
    this.apply(m, m.breaker.failure(kind, detail), kind === 'timeout' ? 'timeouts' : undefined);
  }

  /** A call to the worker succeeded. */
  success(id: bigint): void {
    const m = this.members.get(id);
    if (m) this.apply(m, m.breaker.success(false));
  }

  /**
   * Applies a breaker transition. `cuts`: what a transition to down cuts (`cut-off.ts`): every
   * request in flight on a probe's verdict, the unanswered ones on a request's timeout.
   */
  private apply(m: FleetWorker, next: WorkerHealthState | undefined, cuts?: CutVerdict): void {
    if (next === undefined || this.closed || !this.members.has(m.spec.id)) return;
    this.routableCache = undefined;
    const change = { workerId: m.spec.id, state: next, reason: m.breaker.reason };
    if (next === 'down') {
      this.leave(m);
      const cut = cuts ? m.cutOff.cut(new WorkerCutOff(m.spec.id, change.reason, cuts)) : 0;
      this.log.warn({ worker: String(m.spec.id), reason: change.reason, requestsCut: cut }, 'worker down: out of routing');
    } else if (next === 'healthy' && !m.inRouter) {
      try {
        this.enter(m);
        this.log.info({ worker: String(m.spec.id), reason: change.reason }, 'worker healthy again: back in routing');
        // A worker that restarted may serve other adapters now (runtime ones are lost on restart).
        void this.readModels(m);
      } catch (err) {
        this.log.error({ worker: String(m.spec.id), err }, 'worker could not re-enter routing');
        return;
      }
    } else {
      this.log.info({ worker: String(m.spec.id), state: next, reason: change.reason }, 'worker health changed');
    }
    for (const fn of this.listeners) fn(change);
  }

  private async probeAll(): Promise<void> {
    if (this.probing) return;
    this.probing = true;
    try {
      await Promise.all(this.list().map((m) => this.probe(m)));
    } finally {
      this.probing = false;
    }
  }

  /**
   * Probes one worker now, as the periodic probes do (its breaker counts the verdict), for a
   * request that must know whether the worker is silent: a disaggregated leg that failed while
   * its peer leg on this worker was still unanswered (bootstrap-legs.ts). True when `/health`
   * answered 200, false when it failed, undefined when the worker is not in the fleet (or has no
   * HTTP pool) or the fleet is closed.
   */
  async probeNow(id: bigint): Promise<boolean | undefined> {
    const m = this.members.get(id);
    return m === undefined ? undefined : this.probe(m);
  }

  /** One `GET /health`; learns the served model on the first success. Its verdict (see {@link probeNow}). */
  private async probe(m: FleetWorker): Promise<boolean | undefined> {
    const pool = m.pool;
    if (!pool || this.closed) return undefined;
    const t = this.opts.health.timeoutMs;
    try {
      const res = await pool.request({
        method: 'GET',
        path: '/health',
        headers: this.upstreamHeaders,
        headersTimeout: t,
        bodyTimeout: t,
        signal: AbortSignal.timeout(t),
      });
      await res.body.dump();
      if (res.statusCode !== 200) {
        this.apply(m, m.breaker.failure('probe', `/health answered ${res.statusCode}`), 'probe');
        return false;
      }
      this.apply(m, m.breaker.success(true));
      if (m.model === undefined || performance.now() - m.modelsReadAt >= MODELS_REFRESH_MS) await this.readModels(m);
      if (m.asksSleeping) await this.readSleeping(m).catch(() => undefined);
      return true;
    } catch (err) {
      if (this.closed || !this.members.has(m.spec.id)) return undefined;
      this.apply(m, m.breaker.failure(failureKind(err), describeError(err)), 'probe');
      return false;
    }
  }

  /**
   * Asks a worker whether it sleeps (vLLM's `GET /is_sleeping`, served in its dev mode) after each
   * health probe it passed, so that the engine's own word decides: a worker put to sleep outside
   * the gateway (or by another gateway replica) leaves routing at its next probe, one woken or
   * restarted there comes back. A worker that answers 404 (an engine without the route) is not
   * asked again, and its sleep is known from the calls through the gateway alone. Any other answer,
   * or none, changes nothing; the probe's verdict on its health is the `/health` answer's alone.
   */
  private async readSleeping(m: FleetWorker): Promise<void> {
    const answer = await this.getJson(m, '/is_sleeping');
    if (!answer) return;
    const { status } = answer;
    const body = answer.body as { is_sleeping?: unknown } | undefined;
    if (status === 404) m.asksSleeping = false;
    if (status !== 200 || typeof body?.is_sleeping !== 'boolean') return;
    this.foundSleeping(m.spec.id, body.is_sleeping);
  }

  /** A worker's own answer to `/is_sleeping` (a probe's, or a client's through the gateway): it decides whether the worker sleeps. */
  foundSleeping(id: bigint, sleeping: boolean): void {
    const m = this.members.get(id);
    if (!m) return;
    const asleep = m.rest.reasons.includes('sleep');
    if (sleeping && !asleep) this.rested(id, FOUND_ASLEEP);
    else if (!sleeping && asleep) this.rested(id, FOUND_AWAKE);
  }

  /**
   * A worker's answer to `GET path` within the health timeout: its status and its JSON body
   * (undefined when not JSON); undefined for a worker without a URL. Rejects when it cannot be read.
   */
  private async getJson(m: FleetWorker, path: string): Promise<{ status: number; body: unknown } | undefined> {
    if (!m.pool) return undefined;
    const t = this.opts.health.timeoutMs;
    const res = await m.pool.request({ method: 'GET', path, headers: this.upstreamHeaders, headersTimeout: t, bodyTimeout: t });
    return { status: res.statusCode, body: await res.body.json().catch(() => undefined) };
  }

  /** Reads these workers' `/v1/models` again now (after their adapters changed), not at the next refresh. */
  async refreshModels(ids: readonly bigint[]): Promise<void> {
    await Promise.all(ids.map((id) => this.members.get(id)).map((m) => (m ? this.readModels(m) : undefined)));
  }

  /**
   * Reads a worker's `/v1/models`: vLLM lists the served model (under each served name) first,
   * then each LoRA adapter with the model as its `parent`. A failed read changes nothing (health is the probes' business).
   */
  private async readModels(m: FleetWorker): Promise<void> {
    try {
      const answer = await this.getJson(m, '/v1/models');
      const body = answer?.body as { data?: { id?: unknown; parent?: unknown; root?: unknown; max_model_len?: unknown }[] } | undefined;
      if (answer?.status !== 200 || !Array.isArray(body?.data)) return;
      const named = body.data.filter((d) => typeof d?.id === 'string');
      const bases = named.filter((d) => typeof d.parent !== 'string').map((d) => d.id as string);
      m.modelNames = new Set(bases);
      m.adapters = new Set(named.filter((d) => typeof d.parent === 'string').map((d) => d.id as string));
      m.cards = new Map(
        named.map((d) => [
          d.id as string,
          {
            root: typeof d.root === 'string' ? d.root : undefined,
            maxModelLen: Number.isSafeInteger(d.max_model_len) ? (d.max_model_len as number) : undefined,
          },
        ]),
      );
      m.modelsReadAt = performance.now();
      for (const fn of this.modelListeners) fn(m);
    } catch {
      // Not fatal: the next probe reads again.
    }
  }

  /**
   * The workers that can serve `model`, when the fleet's `/v1/models` lists say it matters: those
   * listing it as a LoRA adapter, or, in a fleet serving several base models, those serving it.
   * Undefined otherwise (one base model, or a name no worker lists: the workers refuse it).
   */
  servingWorkers(model: string): { workers: bigint[]; adapter: boolean } | undefined {
    const adapter: bigint[] = [];
    const base: bigint[] = [];
    let otherBase = false;
    for (const m of this.members.values()) {
      if (m.adapters.has(model)) adapter.push(m.spec.id);
      else if (m.modelNames.has(model)) base.push(m.spec.id);
      else if (m.model !== undefined) otherBase = true;
    }
    if (adapter.length > 0) return { workers: adapter, adapter: true };
    if (base.length > 0 && otherBase) return { workers: base, adapter: false };
    return undefined;
  }

  /**
   * Whether every worker's `/v1/models` list has been read and none names `model`, as a base
   * model or an adapter: each worker would refuse the request (vLLM's 404).
   */
  /** Whether some worker lists `model`, as a name of its model or as an adapter. */
  serves(model: string): boolean {
    for (const m of this.members.values()) if (m.modelNames.has(model) || m.adapters.has(model)) return true;
    return false;
  }

  servedByNone(model: string): boolean {
    if (this.members.size === 0) return false;
    for (const m of this.members.values()) if (m.model === undefined || m.modelNames.has(model) || m.adapters.has(model)) return false;
    return true;
  }

  /**
   * The routable workers that may take a request naming `model` (any value a body holds): those
   * serving it when only some do, else every routable worker.
   */
  routableFor(model: unknown): readonly bigint[] {
    const serving = typeof model === 'string' ? this.servingWorkers(model)?.workers : undefined;
    return serving ? this.routable().filter((id) => serving.includes(id)) : this.routable();
  }

  /**
   * The workers a control route goes to for `model` (as `routableFor`): those routable and those
   * resting, which the call may wake.
   */
  reachableFor(model: unknown): readonly bigint[] {
    const serving = typeof model === 'string' ? this.servingWorkers(model)?.workers : undefined;
    const out: bigint[] = [];
    for (const m of this.members.values()) {
      if (!m.pool || m.breaker.state === 'down' || (serving && !serving.includes(m.spec.id))) continue;
      out.push(m.spec.id);
    }
    return out;
  }

  /** The names the workers serve their base models under, in the order they were added. */
  models(): string[] {
    const out = new Set<string>();
    for (const m of this.members.values()) for (const name of m.modelNames) out.add(name);
    return [...out];
  }

  /**
   * What the workers listing `name` say of it: the first one's `root`, and the smallest
   * `max_model_len` (a request may go to any of them, so that is what fits everywhere).
   */
  modelCard(name: string): ModelCardFacts {
    let root: string | undefined;
    let maxModelLen: number | undefined;
    for (const m of this.members.values()) {
      const card = m.cards.get(name);
      if (!card) continue;
      root ??= card.root;
      if (card.maxModelLen !== undefined) maxModelLen = Math.min(maxModelLen ?? card.maxModelLen, card.maxModelLen);
    }
    return { root, maxModelLen };
  }

  /** Every adapter some worker lists, with the base model of the first worker listing it. */
  adapters(): { id: string; parent: string | undefined }[] {
    const out = new Map<string, string | undefined>();
    for (const m of this.members.values()) for (const a of m.adapters) if (!out.has(a)) out.set(a, m.model);
    return [...out].map(([id, parent]) => ({ id, parent }));
  }

  /** Listener status per rank in the indexer API's words: `pending`, `active`, `paused`, `failed`. */
  listenerStatus(m: FleetWorker): ListenerStatus[] {
    const ranks = m.spec.kvEvents?.length ?? 0;
    if (!m.source || m.source.closed) return new Array(ranks).fill('paused');
    const map: Record<SourceState, ListenerStatus> = {
      connecting: 'pending',
      active: 'active',
      recovering: 'active',
      resyncing: 'active',
      failed: 'failed',
    };
    return m.source.state.map((s) => map[s]);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.probeTimer) clearInterval(this.probeTimer);
    await Promise.all(this.list().map((m) => m.pool?.close()));
  }
}
