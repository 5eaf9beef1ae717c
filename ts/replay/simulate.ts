/**
 * The discrete-event loop of `replay`: one routing policy over a fleet of simulated engines, in
 * virtual time. Each rank of each worker is an {@link Engine}; a real {@link KvRouter} routes
 * every arrival on the simulation clock, receives the engines' KV events at the end of the pass
 * that produced them, and hears of first tokens and completions as a service would.
 * @internal
 * @module
 */

import { KvRouteError } from '../errors.js';
import { FLAG_DEVICE_TIER, FLAG_HAS_PARENT, KIND_REMOVED, KIND_STORED, type PackedEvents, PackedWriter } from '../events/packed.js';
import { blockHashes, sequenceHashes } from '../hashing.js';
import { indexInternals } from '../kv-index.js';
import { SeededRandom } from '../random.js';
import { ReplicaBus } from '../replicas/transport.js';
import { KvRouter } from '../router/kv-router.js';
import type { KvRouterOptions } from '../router/options.js';
import type { Selector } from '../router/select.js';
import { BlockIds } from './block-ids.js';
import { Engine, type EngineConfig, type PassResult, SimRequest } from './engine.js';
import type { CacheEvent } from './kv-cache.js';
import { synthesizeTokens, type Trace, type TraceRequest } from './trace.js';

/** What one policy's run produced, before summarising. */
export interface PolicyRun {
  requests: SimRequest[];
  /** (worker, dp rank) of each request, by uid. */
  placement: Array<{ workerId: number; dpRank: number }>;
  simulatedMs: number;
  wallMs: number;
  routeWallMs: number;
  /** Each request's block ids at the engine block size, by uid (for the hit-ratio ceiling). */
  blockIds: Int32Array[];
  /** How many distinct block ids the run issued. */
  distinctBlocks: number;
  /** Every inter-token gap of every engine (ms). */
  tokenGaps: number[];
}

/** Simulation settings shared by every policy of a replay. @internal */
export interface SimConfig {
  workers: number;
  dpSize: number;
  engine: EngineConfig;
  arrivalSpeedup: number;
  seed: number;
  backend: 'native' | 'js' | undefined;
  routerConfig: Partial<KvRouterOptions>;
  /** Router replicas behind a load balancer (1: a single router). */
  replicas: ReplaySimReplicas;
  onProgress?: (done: number, total: number) => void;
}

/** How many routers route the trace, whether they share load, and how arrivals reach them. @internal */
export interface ReplaySimReplicas {
  count: number;
  sync: boolean;
  balancer: 'random' | 'round-robin';
}

/**
 * The routers of a run: `count` replicas, each with its own index fed by every engine (as each
 * replica subscribes to every engine), sharing load over an in-process bus when `sync` is on.
 */
function makeRouters(cfg: SimConfig, selector: Selector | undefined, now: () => number): KvRouter[] {
  const bus = cfg.replicas.sync && cfg.replicas.count > 1 ? new ReplicaBus() : undefined;
  return Array.from(
    { length: cfg.replicas.count },
    (_, i) =>
      new KvRouter({
        ...cfg.routerConfig,
        blockSize: cfg.engine.blockSize,
        // Replicas draw different tie-breaks (as a fleet's random default seeds would), reproducibly.
        seed: cfg.seed + i,
        now,
        ...(cfg.backend ? { backend: cfg.backend } : {}),
        ...(selector ? { selector } : {}),
        ...(bus ? { replicas: { transport: bus.transport(), replicaId: `replica-${i}` } } : {}),
      }),
  );
}

type EventBody = { at: number } & (
  | { kind: 'arrival'; req: TraceRequest; uid: number }
  | { kind: 'pass'; rank: number; result: PassResult }
);
type SimEvent = EventBody & { seq: number };

/**
 * The simulation's events in (at, seq) order: deterministic for simultaneous events. The events
 * known up front (the trace's arrivals) wait in a sorted array; a binary min-heap holds the rest
 * (engine passes, later turns of sessions), so it stays as small as the fleet instead of as long
 * as the trace.
 */
class EventQueue {
  private readonly heap: SimEvent[] = [];
  private backlog: SimEvent[] = [];
  private head = 0;
  private seq = 0;

  /** Queues the events known up front; call before any `push`. */
  load(events: EventBody[]): void {
    // Stamped in place, in the order given, as `push` would have.
    const stamped = events.map((e) => {
      (e as SimEvent).seq = this.seq++;
      return e as SimEvent;
    });
    this.backlog = stamped.sort((a, b) => a.at - b.at || a.seq - b.seq);
    this.head = 0;
  }

  push(e: EventBody): void {
    const h = this.heap;
    // Stamped in place: copying each event into a new object was a tenth of a replay's time.
    const event = e as SimEvent;
    event.seq = this.seq++;
    h.push(event);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!less(h[i], h[p])) break;
      const t = h[i];
      h[i] = h[p];
      h[p] = t;
      i = p;
    }
  }

  /** When the next event happens, if any. */
  nextAt(): number | undefined {
    const a = this.heap[0];
    const b = this.backlog[this.head];
    if (!a) return b?.at;
    return b && b.at < a.at ? b.at : a.at;
  }

  pop(): SimEvent | undefined {
    const b = this.backlog[this.head];
    if (b && (this.heap.length === 0 || less(b, this.heap[0]))) {
      this.head++;
      return b;
    }
    return this.popHeap();
  }

  private popHeap(): SimEvent | undefined {
    const h = this.heap;
    const top = h[0];
    const last = h.pop();
    if (h.length > 0 && last) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && less(h[l], h[m])) m = l;
        if (r < h.length && less(h[r], h[m])) m = r;
        if (m === i) break;
        const t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
      }
    }
    return top;
  }
}

function less(a: SimEvent, b: SimEvent): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}

/**
 * One engine pass's KV events as the packed batch the index consumes (the layout of
 * `events/packed.ts`). The engine produces them valid by construction, so they skip validation
 * and the event objects a caller would build: a pass's events go straight to every router's index.
 */
function packCacheEvents(events: CacheEvent[], workerId: number, dpRank: number): PackedEvents {
  const w = new PackedWriter();
  for (const e of events) {
    if ('stored' in e) {
      const { parent, blocks } = e.stored;
      w.pushMeta(KIND_STORED, dpRank, FLAG_DEVICE_TIER | (parent === null ? 0 : FLAG_HAS_PARENT), blocks.length);
      w.pushNumber(workerId);
      w.pushNumber(0);
      if (parent !== null) w.pushBigInt(parent);
      for (const b of blocks) {
        w.pushBigInt(b.seq);
        w.pushBigInt(b.local);
      }
    } else {
      w.pushMeta(KIND_REMOVED, dpRank, FLAG_DEVICE_TIER, e.removed.length);
      w.pushNumber(workerId);
      w.pushNumber(0);
      for (const h of e.removed) w.pushBigInt(h);
    }
  }
  return w.finish();
}

/** Runs one policy over the trace. `selector` is undefined for the KV-aware default. */
export async function simulatePolicy(trace: Trace, selector: Selector | undefined, cfg: SimConfig): Promise<PolicyRun> {
  const wallStart = performance.now();
  let clock = 0;
  const routers = makeRouters(cfg, selector, () => clock);
  const flushIndex = () => {
    for (const r of routers) indexInternals(r.index).inner.flushSync();
  };
  // The load balancer in front of the replicas, and which replica routed each request.
  const balancer = new SeededRandom(cfg.seed ^ 0x5eed);
  let nextReplica = 0;
  const pick = () => (cfg.replicas.balancer === 'round-robin' ? nextReplica++ % routers.length : balancer.int(0, routers.length - 1));
  const owner: KvRouter[] = new Array(trace.requests.length);
  const publishEvents = cfg.routerConfig.useKvEvents !== false;
  const ranks: Array<{ workerId: number; dpRank: number; engine: Engine; busy: boolean }> = [];
  const rankOf = new Map<string, number>();
  for (let w = 0; w < cfg.workers; w++) {
    for (const router of routers) {
      router.addWorker(w, {
        dataParallelSize: cfg.dpSize,
        maxNumBatchedTokens: cfg.engine.maxNumBatchedTokens,
        totalKvBlocks: cfg.engine.numGpuBlocks,
        maxNumSeqs: cfg.engine.maxNumSeqs,
      });
    }
    for (let r = 0; r < cfg.dpSize; r++) {
      rankOf.set(`${w}:${r}`, ranks.length);
      ranks.push({ workerId: w, dpRank: r, engine: new Engine(cfg.engine), busy: false });
    }
  }
  const queue = new EventQueue();
  // A loop, not Math.min(...): spreading a large trace as call arguments would overflow the stack.
  let first = Number.POSITIVE_INFINITY;
  for (const r of trace.requests) first = Math.min(first, r.timestampMs);
  // Multi-turn sessions: a later turn with a `delay` arrives that long after the previous turn
  // of its session finished; other requests arrive at their timestamps.
  const lastTurn = new Map<string, number>();
  const nextTurn = new Map<number, number>();
  const arrivals: EventBody[] = [];
  trace.requests.forEach((req, uid) => {
    const prev = req.sessionId === undefined ? undefined : lastTurn.get(req.sessionId);
    if (prev !== undefined && req.delayMs !== undefined) nextTurn.set(prev, uid);
    else arrivals.push({ at: (req.timestampMs - first) / cfg.arrivalSpeedup, kind: 'arrival', req, uid });
    if (req.sessionId !== undefined) lastTurn.set(req.sessionId, uid);
  });
  queue.load(arrivals);
  const sims: SimRequest[] = new Array(trace.requests.length);
  const idsByUid: Int32Array[] = new Array(trace.requests.length);
  // One number per distinct sequence hash, for the engines' block pools (see FullBlock.id).
  const blockIds = new BlockIds();
  const placement: PolicyRun['placement'] = new Array(trace.requests.length);
  let dirty = false;
  let done = 0;
  let reported = -1;
  let routeWallMs = 0;
  const total = trace.requests.length;
  const progressEvery = Math.max(1, Math.floor(total / 100));

  const startPass = (i: number) => {
    const rank = ranks[i];
    if (rank.busy || rank.engine.idle) return;
    const result = rank.engine.step(clock);
    if (result.durationMs === 0 && result.firstTokens.length === 0 && result.finished.length === 0) {
      throw new KvRouteError(
        'ERR_INVALID_ARG',
        `a request cannot fit worker ${rank.workerId}'s KV cache of ${cfg.engine.numGpuBlocks} blocks (raise --num-gpu-blocks)`,
      );
    }
    rank.busy = true;
    queue.push({ at: clock + result.durationMs, kind: 'pass', rank: i, result });
  };

  // Dynamo timing: a rank's next pass starts only once every event of the current instant (all
  // arrivals of one timestamp, say) is handled, so they can share that pass.
  const deferPasses = (cfg.engine.timing ?? 'dynamo') === 'dynamo';
  const toStart = new Set<number>();
  const requestPass = (i: number) => {
    if (deferPasses) toStart.add(i);
    else startPass(i);
  };
  const startDeferred = () => {
    const next = queue.nextAt();
    if (toStart.size === 0 || (next !== undefined && next <= clock)) return;
    for (const i of toStart) startPass(i);
    toStart.clear();
  };

  const dispatch = (uid: number, decision: { workerId: bigint; dpRank: number }) => {
    const i = rankOf.get(`${decision.workerId}:${decision.dpRank}`) as number;
    placement[uid] = { workerId: ranks[i].workerId, dpRank: ranks[i].dpRank };
    ranks[i].engine.enqueue(sims[uid]);
    requestPass(i);
  };

  let pendingRoutes = 0;
  try {
    for (let e = queue.pop(); e; e = queue.pop()) {
      clock = e.at;
      if (e.kind === 'arrival') {
        const tokens = synthesizeTokens(e.req, trace.traceBlockSize);
        const locals = blockHashes(tokens, cfg.engine.blockSize, { ...(cfg.backend ? { backend: cfg.backend } : {}) });
        const seqs = sequenceHashes(locals, { ...(cfg.backend ? { backend: cfg.backend } : {}) });
        const ids = blockIds.of(seqs);
        const sim = new SimRequest(
          e.uid,
          e.req.inputLength,
          e.req.outputLength,
          Array.from(locals, (local, k) => ({ seq: seqs[k], local, id: ids[k] })),
        );
        sim.arrivalMs = clock;
        idsByUid[e.uid] = ids;
        sims[e.uid] = sim;
        if (dirty) {
          flushIndex();
          dirty = false;
        }
        const router = routers.length === 1 ? routers[0] : routers[pick()];
        owner[e.uid] = router;
        const t0 = performance.now();
        const routed = router.route({ requestId: String(e.uid), tokens, maxOutputTokens: e.req.outputLength });
        routeWallMs += performance.now() - t0;
        pendingRoutes++;
        routed.then(
          (d) => {
            pendingRoutes--;
            dispatch(e.uid, d);
          },
          (err: unknown) => {
            pendingRoutes--;
            throw err;
          },
        );
        await null;
      } else {
        const rank = ranks[e.rank];
        rank.busy = false;
        // In approximate mode the engines publish no events: the router has only its predictions.
        if (publishEvents && e.result.events.length > 0) {
          const { meta, words } = packCacheEvents(e.result.events, rank.workerId, rank.dpRank);
          for (const router of routers) indexInternals(router.index).inner.applyPacked(meta, words, clock);
          dirty = true;
        }
        for (const r of e.result.firstTokens) owner[r.uid].markPrefillCompleted(String(r.uid));
        for (const r of e.result.finished) {
          owner[r.uid].free(String(r.uid));
          done++;
          if (cfg.onProgress && done % progressEvery === 0) {
            cfg.onProgress(done, total);
            reported = done;
          }
          const next = nextTurn.get(r.uid);
          if (next !== undefined)
            queue.push({
              at: clock + (trace.requests[next].delayMs ?? 0) / cfg.arrivalSpeedup,
              kind: 'arrival',
              req: trace.requests[next],
              uid: next,
            });
        }
        // Queued routes released by the calls above resolve in microtasks: let them run.
        if (pendingRoutes > 0) await null;
        requestPass(e.rank);
      }
      startDeferred();
    }
  } finally {
    for (const router of routers) router.close();
  }
  if (done !== total) throw new KvRouteError('ERR_INTERNAL', `replay ended with ${total - done} of ${total} requests unfinished`);
  // The last report, unless the loop just made it.
  if (reported !== done) cfg.onProgress?.(done, total);
  return {
    requests: sims,
    placement,
    simulatedMs: clock,
    wallMs: performance.now() - wallStart,
    routeWallMs,
    blockIds: idsByUid,
    distinctBlocks: blockIds.size,
    tokenGaps: ranks.flatMap((r) => r.engine.tokenGaps),
  };
}
