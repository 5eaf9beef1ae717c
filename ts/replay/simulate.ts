/**
 * The simulation loop of `replay`: one routing policy over a fleet of simulated engines, in
 * virtual time. The backend's replay fleet (`ReplayFleetBackend`: Rust for native, `fleet.ts`
 * for JS) steps the engines and wakes this loop for each arrival and each pass with output; a
 * real {@link KvRouter} routes every arrival on the simulation clock, receives the engines' KV
 * events at the end of the pass that produced them, and hears of first tokens and completions
 * as a service would.
 * @internal
 * @module
 */

import { createHash } from 'node:crypto';
import { resolveBackend } from '../backend.js';
import { OUTCOME, OUTCOME_FIGURES, type ReplayRankRole } from '../backend-types.js';
import { KvRouteError } from '../errors.js';
import { blockHashes, sequenceHashes } from '../hashing.js';
import { indexInternals } from '../kv-index.js';
import { SeededRandom } from '../random.js';
import { ReplicaBus } from '../replicas/transport.js';
import { KvRouter } from '../router/kv-router.js';
import type { KvRouterOptions } from '../router/options.js';
import type { Selector } from '../router/select.js';
import { decodeRouterOptions, prefillRouterOptions, type SimDisaggregation } from './disaggregation.js';
import type { EngineConfig } from './engine-config.js';
import { promptTokens, type Trace } from './trace.js';

/** A request's figures at the end of a run. */
export interface RequestOutcome {
  uid: number;
  inputLength: number;
  outputLength: number;
  arrivalMs: number;
  firstTokenMs: number;
  lastTokenMs: number;
  /** Prompt tokens found in the prefix cache, the best over admissions. */
  reusedTokens: number;
  /** Prompt tokens found in a cache at the first admission, before any preemption. */
  firstReusedTokens: number;
  preemptions: number;
}

/** What one policy's run produced, before summarising. */
export interface PolicyRun {
  requests: RequestOutcome[];
  /** (worker, dp rank) of each request, by uid (its prefill worker's in a disaggregated run). */
  placement: Array<{ workerId: number; dpRank: number }>;
  /** Disaggregated: the decode worker of each request, by uid. */
  decodePlacement?: Array<{ workerId: number; dpRank: number }>;
  /** Disaggregated: workers 0 .. prefillWorkers − 1 are the prefill pool, the rest the decode pool. */
  prefillWorkers?: number;
  simulatedMs: number;
  wallMs: number;
  routeWallMs: number;
  /** What a single infinite prefix cache would have served (the trace's, whatever the policy). */
  upperBoundHitRatio: number;
  /** Every inter-token gap of every engine (ms). */
  tokenGaps: Float64Array;
  /** Blocks the engines loaded back from host memory (CPU offload). */
  hostLoadedBlocks: number;
  /** Speculative decode steps past first tokens and the tokens they drew (0, 0 without speculative decoding). */
  speculativeSteps: [steps: number, tokens: number];
  /** Session affinity's counters, summed over the replicas (absent without `sessionAffinityTtlSecs`). */
  sessions: SessionCounts | undefined;
}

/** What a replay reports of session affinity, summed over the replicas. @group Replay */
export interface SessionCounts {
  /** Requests sent to their session's bound rank. */
  hits: number;
  /** Sessions bound by a request routed by cost. */
  bindings: number;
  /** Bindings dropped because their rank was not allowed or gone. */
  invalidated: number;
  /** Bindings dropped after the TTL idle. */
  expired: number;
}

/** The routers' session counters, summed; undefined when session affinity is off. */
function sessionCounts(routers: readonly KvRouter[]): SessionCounts | undefined {
  const all = routers.map((r) => r.stats().sessions);
  if (all.some((s) => s === undefined)) return undefined;
  const sum = (k: keyof SessionCounts) => all.reduce((n, s) => n + (s?.[k] ?? 0), 0);
  return { hits: sum('hits'), bindings: sum('bindings'), invalidated: sum('invalidated'), expired: sum('expired') };
}

/** Simulation settings shared by every policy of a replay. @internal */
export interface SimConfig {
  workers: number;
  dpSize: number;
  engine: EngineConfig;
  arrivalSpeedup: number;
  /** Each arrival at its timestamp moves by a seeded offset in [0, this) ms (see `ReplayOptions.arrivalSpreadMs`). */
  arrivalSpreadMs: number;
  seed: number;
  backend: 'native' | 'js' | undefined;
  routerConfig: Partial<KvRouterOptions>;
  /**
   * Engines cache prefixes (vLLM's default). Off (`--no-enable-prefix-caching`, Dynamo's
   * `enable_prefix_caching: false`): every request's blocks are its own, nothing is reused, and
   * no KV events are published.
   */
  prefixCaching: boolean;
  /** Router replicas behind a load balancer (1: a single router). */
  replicas: ReplaySimReplicas;
  /** A prefill and a decode pool in place of `workers` (`disaggregation.ts`); undefined: aggregated. */
  disaggregation?: SimDisaggregation;
  onProgress?: (done: number, total: number) => void;
}

/** How many routers route the trace, whether they share load, and how arrivals reach them. @internal */
export interface ReplaySimReplicas {
  count: number;
  sync: boolean;
  /** Simulated time a sync message takes to reach the other replicas (0: at once). */
  syncDelayMs: number;
  balancer: ReplicaBalancer;
}

/**
 * How the load balancer in front of the replicas spreads arrivals: at random (seeded), in turn,
 * or by session (a hash of the request's session id, as a load balancer hashing a session header
 * would; requests without one at random).
 * @group Replay
 */
export type ReplicaBalancer = 'random' | 'round-robin' | 'session';

/** The replica a session's requests go to under the `session` balancer: a stable hash of its id. */
function sessionReplica(sessionId: string, replicas: number): number {
  return createHash('sha1').update(sessionId).digest().readUInt32LE(0) % replicas;
}

/**
 * The routers of a run (of one pool of a disaggregated run, with that pool's `options`): `count`
 * replicas, each with its own index fed by every engine (as each replica subscribes to every
 * engine), sharing load over an in-process bus when `sync` is on.
 */
function makeRouters(
  cfg: SimConfig,
  options: Partial<KvRouterOptions>,
  selector: Selector | undefined,
  now: () => number,
): { routers: KvRouter[]; bus: ReplicaBus | undefined } {
  const bus = cfg.replicas.sync && cfg.replicas.count > 1 ? new ReplicaBus({ delayMs: cfg.replicas.syncDelayMs, now }) : undefined;
  const routers = Array.from(
    { length: cfg.replicas.count },
    (_, i) =>
      new KvRouter({
        ...options,
        blockSize: cfg.engine.blockSize,
        // Replicas draw different tie-breaks (as a fleet's random default seeds would), reproducibly.
        seed: cfg.seed + i,
        now,
        ...(cfg.backend ? { backend: cfg.backend } : {}),
        ...(selector ? { selector } : {}),
        ...(bus ? { replicas: { transport: bus.transport(), replicaId: `replica-${i}` } } : {}),
      }),
  );
  return { routers, bus };
}

/**
 * The choice among scored candidates of a policy's routers (undefined: the KV-aware default):
 * the arrivals' routers and, in a disaggregated run, the decode pool's.
 */
export interface PolicySelectors {
  arrivals: Selector | undefined;
  decode?: Selector | undefined;
}

/** Runs one policy over the trace. */
export async function simulatePolicy(trace: Trace, selectors: PolicySelectors, cfg: SimConfig): Promise<PolicyRun> {
  const selector = selectors.arrivals;
  const wallStart = performance.now();
  let clock = 0;
  const split = cfg.disaggregation;
  // The routers arrivals go to (the prefill pool's in a disaggregated run), and the decode pool's.
  const { routers, bus } = makeRouters(cfg, split ? prefillRouterOptions(cfg.routerConfig) : cfg.routerConfig, selector, () => clock);
  const decodeSide = split ? makeRouters(cfg, decodeRouterOptions(cfg.routerConfig), selectors.decode, () => clock) : undefined;
  const decodeRouters = decodeSide?.routers ?? [];
  // The load balancer in front of the replicas, and which replica routed each request.
  const balancer = new SeededRandom(cfg.seed ^ 0x5eed);
  let nextReplica = 0;
  const pick = (sessionId: string | undefined) => {
    if (cfg.replicas.balancer === 'round-robin') return nextReplica++ % routers.length;
    if (cfg.replicas.balancer === 'session' && sessionId !== undefined) return sessionReplica(sessionId, routers.length);
    return balancer.int(0, routers.length - 1);
  };
  const total = trace.requests.length;
  const owner: KvRouter[] = new Array(total);
  // Disaggregated: the replica that routed each request (its decode leg goes to the same one's
  // decode router), and the prompts of the requests between their arrival and their handoff.
  const replicaOf = new Uint32Array(total);
  const handedOverTokens = new Map<number, Uint32Array>();
  // Engines without prefix caching publish nothing (vLLM's KV events come from its prefix cache).
  const publishEvents = cfg.prefixCaching && cfg.routerConfig.useKvEvents !== false;
  const ranks: Array<{ workerId: number; dpRank: number }> = [];
  const roles: ReplayRankRole[] = [];
  const rankOf = new Map<string, number>();
  const workers = split ? split.prefillWorkers + split.decodeWorkers : cfg.workers;
  for (let w = 0; w < workers; w++) {
    const role: ReplayRankRole = !split ? 'aggregated' : w < split.prefillWorkers ? 'prefill' : 'decode';
    for (const router of role === 'decode' ? decodeRouters : routers) {
      router.addWorker(w, {
        dataParallelSize: cfg.dpSize,
        maxNumBatchedTokens: cfg.engine.maxNumBatchedTokens,
        totalKvBlocks: cfg.engine.numGpuBlocks,
        maxNumSeqs: cfg.engine.maxNumSeqs,
      });
    }
    for (let r = 0; r < cfg.dpSize; r++) {
      rankOf.set(`${w}:${r}`, ranks.length);
      ranks.push({ workerId: w, dpRank: r });
      roles.push(role);
    }
  }
  const backend = resolveBackend(cfg.backend);
  const fleet = backend.createReplayFleet({
    blockSize: cfg.engine.blockSize,
    numGpuBlocks: cfg.engine.numGpuBlocks,
    maxNumSeqs: cfg.engine.maxNumSeqs,
    maxNumBatchedTokens: cfg.engine.maxNumBatchedTokens,
    speedup: cfg.engine.speedup,
    decodeSpeedup: cfg.engine.decodeSpeedup ?? 1,
    speculative: cfg.engine.speculative,
    timing: cfg.engine.timing ?? 'dynamo',
    preemptionMode: cfg.engine.preemptionMode ?? 'lifo',
    hostBlocks: cfg.engine.hostBlocks ?? 0,
    hostLoadMsPerBlock: cfg.engine.hostLoadMsPerBlock ?? 0,
    workers: ranks.map((r) => r.workerId),
    dpRanks: ranks.map((r) => r.dpRank),
    roles,
    ...(split
      ? {
          handoff: {
            fixedMs: split.handoffMs,
            msPerToken: split.transferUsPerToken / 1000,
            destinationMissing: split.transferTiming === 'destination-missing',
          },
        }
      : {}),
    requests: total,
    publishEvents,
    indexes: publishEvents ? routers.map((r) => indexInternals(r.index).inner) : [],
  });
  // A loop, not Math.min(...): spreading a large trace as call arguments would overflow the stack.
  let first = Number.POSITIVE_INFINITY;
  for (const r of trace.requests) first = Math.min(first, r.timestampMs);
  // Multi-turn sessions: a later turn with a `delay` arrives that long after the previous turn
  // of its session finished; other requests arrive at their timestamps.
  const lastTurn = new Map<string, number>();
  // Drawn for every request, moved or not, so a request's offset does not depend on its neighbours'.
  const spread = new SeededRandom(cfg.seed ^ 0xa771ed);
  const arrivalAt: number[] = [];
  const arrivalUid: number[] = [];
  trace.requests.forEach((req, uid) => {
    const prev = req.sessionId === undefined ? undefined : lastTurn.get(req.sessionId);
    const offset = spread.next() * cfg.arrivalSpreadMs;
    if (prev !== undefined && req.delayMs !== undefined) fleet.setNextTurn(prev, uid, req.delayMs / cfg.arrivalSpeedup);
    else {
      arrivalAt.push((req.timestampMs - first + offset) / cfg.arrivalSpeedup);
      arrivalUid.push(uid);
    }
    if (req.sessionId !== undefined) lastTurn.set(req.sessionId, uid);
  });
  fleet.load(Float64Array.from(arrivalAt), Uint32Array.from(arrivalUid));
  const placement: PolicyRun['placement'] = new Array(total);
  const decodePlacement: PolicyRun['placement'] = split ? new Array(total) : [];
  const hashOptions = cfg.backend ? { backend: cfg.backend } : {};
  let done = 0;
  let reported = -1;
  let routeWallMs = 0;
  const progressEvery = Math.max(1, Math.floor(total / 100));
  // A route that fails, or a pass that cannot start, surfaces in a promise callback: kept here
  // and thrown by the loop.
  let failure: unknown;

  let pendingRoutes = 0;
  /** Routes a request (an arrival, or a disaggregated request's decode leg) and enqueues it where it was sent. */
  const route = (router: KvRouter, uid: number, tokens: Uint32Array, placed: PolicyRun['placement']) => {
    const req = trace.requests[uid];
    const t0 = performance.now();
    // A session's turns carry its id: with `sessionAffinityTtlSecs` the router keeps them together.
    const session = req.sessionId === undefined ? {} : { sessionId: req.sessionId };
    const routed = router.route({ requestId: String(uid), tokens, maxOutputTokens: req.outputLength, ...session });
    routeWallMs += performance.now() - t0;
    pendingRoutes++;
    routed.then(
      (d) => {
        pendingRoutes--;
        try {
          const i = rankOf.get(`${d.workerId}:${d.dpRank}`) as number;
          placed[uid] = ranks[i];
          fleet.enqueue(i, uid);
        } catch (err) {
          failure ??= err;
        }
      },
      (err: unknown) => {
        pendingRoutes--;
        failure ??= err;
      },
    );
  };

  let sessions: SessionCounts | undefined;
  const header = new Float64Array(2);
  try {
    for (let kind = fleet.run(header); kind !== 0; kind = fleet.run(header)) {
      clock = header[0];
      // Sync messages that have reached the other replicas by now (no routing happens between events).
      bus?.deliverDue();
      decodeSide?.bus?.deliverDue();
      if (kind === 1) {
        const uid = header[1];
        const req = trace.requests[uid];
        const tokens = promptTokens(req, trace.traceBlockSize);
        // Without prefix caching each request's blocks are named apart (a namespace of its own), so none is ever reused.
        const own = cfg.prefixCaching ? hashOptions : { ...hashOptions, cacheNamespace: `request-${uid}` };
        const locals = blockHashes(tokens, cfg.engine.blockSize, own);
        const seqs = sequenceHashes(locals, hashOptions);
        fleet.addRequest(uid, req.inputLength, req.outputLength, seqs, locals);
        const replica = routers.length === 1 ? 0 : pick(req.sessionId);
        replicaOf[uid] = replica;
        owner[uid] = routers[replica];
        route(routers[replica], uid, tokens, placement);
        // Disaggregated: kept for the decode router, until the handoff.
        if (split) handedOverTokens.set(uid, tokens);
        await null;
      } else if (kind === 3) {
        // Disaggregated: the request's KV reached the decode pool; its replica's decode router places it.
        const uid = header[1];
        const tokens = handedOverTokens.get(uid) as Uint32Array;
        handedOverTokens.delete(uid);
        route(decodeRouters[replicaOf[uid]], uid, tokens, decodePlacement);
        await null;
      } else {
        const i = header[1];
        // Completions release queued routes, which are scheduled at once: on the index as of
        // now (the fleet brings the indexes up to date by itself only before arrivals).
        if (pendingRoutes > 0) fleet.syncIndexes();
        // A decode rank's requests were placed by their replica's decode router; a prefill rank's
        // completions are prefill legs, handed over (`kind === 3` later), not done.
        const role = roles[i];
        for (const uid of fleet.firstTokens(i))
          (role === 'decode' ? decodeRouters[replicaOf[uid]] : owner[uid]).markPrefillCompleted(String(uid));
        for (const uid of fleet.finished(i)) {
          (role === 'decode' ? decodeRouters[replicaOf[uid]] : owner[uid]).free(String(uid));
          if (role === 'prefill') continue;
          done++;
          if (cfg.onProgress && done % progressEvery === 0) {
            cfg.onProgress(done, total);
            reported = done;
          }
        }
        // Queued routes released by the calls above resolve in microtasks: let them run.
        if (pendingRoutes > 0) await null;
      }
      if (failure !== undefined) throw failure;
    }
    sessions = sessionCounts([...routers, ...decodeRouters]);
  } finally {
    for (const router of [...routers, ...decodeRouters]) router.close();
  }
  if (done !== total) throw new KvRouteError('ERR_INTERNAL', `replay ended with ${total - done} of ${total} requests unfinished`);
  // The last report, unless the loop just made it.
  if (reported !== done) cfg.onProgress?.(done, total);
  const figures = fleet.outcomes();
  const requests: RequestOutcome[] = trace.requests.map((req, uid) => ({
    uid,
    inputLength: req.inputLength,
    outputLength: req.outputLength,
    arrivalMs: figures[OUTCOME_FIGURES * uid + OUTCOME.arrivalMs],
    firstTokenMs: figures[OUTCOME_FIGURES * uid + OUTCOME.firstTokenMs],
    lastTokenMs: figures[OUTCOME_FIGURES * uid + OUTCOME.lastTokenMs],
    reusedTokens: figures[OUTCOME_FIGURES * uid + OUTCOME.reusedTokens],
    firstReusedTokens: figures[OUTCOME_FIGURES * uid + OUTCOME.firstReusedTokens],
    preemptions: figures[OUTCOME_FIGURES * uid + OUTCOME.preemptions],
  }));
  return {
    requests,
    placement,
    ...(split ? { decodePlacement, prefillWorkers: split.prefillWorkers } : {}),
    simulatedMs: clock,
    wallMs: performance.now() - wallStart,
    routeWallMs,
    upperBoundHitRatio: fleet.upperBoundHitRatio(),
    tokenGaps: fleet.tokenGaps(),
    hostLoadedBlocks: fleet.hostLoadedBlocks(),
    speculativeSteps: fleet.speculativeSteps(),
    sessions,
  };
}
