/**
 * The engine ranks of one replay run and the clock that steps them: the pure-JS twin of
 * `kvroute_core::replay::Fleet` (see `ReplayFleetBackend`). It runs engine passes by itself and
 * wakes the simulation loop (which owns the routers) only when a request arrives or a pass
 * produced first tokens, completions or KV events; both twins order every event, ties included,
 * the same way, so they give identical reports. In a disaggregated fleet its prefill ranks' legs
 * end in a handoff (`handOver`, the twin of `kvroute_core::replay::handoff`): the request comes
 * back to the loop at once for the decode router, the decode rank reserves room for its KV, and
 * the transfer's end (`endTransfer`) frees the prefill rank's blocks and lets the decode rank run it.
 * @internal
 * @module
 */

import { OUTCOME_FIGURES, type ReplayFleetBackend, type ReplayFleetSpec, type ReplayRankRole } from '../backend-types.js';
import { KvRouteError } from '../errors.js';
import {
  FLAG_DEVICE_TIER,
  FLAG_HAS_PARENT,
  KIND_REMOVED,
  KIND_STORED,
  LOWER_TIER_NAMES,
  type PackedEvents,
  PackedWriter,
  tierFlags,
} from '../events/packed.js';
import { BlockIds } from './block-ids.js';
import { prefixCeiling } from './ceiling.js';
import { Engine } from './engine.js';
import { type PassResult, ranNothing } from './engine-config.js';
import { EventQueue } from './event-queue.js';
import type { CacheEvent } from './kv-cache.js';
import { preemptionMode } from './preemption.js';
import { SimRequest } from './sim-request.js';
import { checkEngineSpeculative } from './speculative.js';

/** The host tier's index among the lower tiers (the engine's host pool publishes there). */
const HOST_TIER = LOWER_TIER_NAMES.indexOf('host_pinned');

/**
 * One pass's KV events as the packed batch the index consumes (the layout of
 * `events/packed.ts`). The engine produces them valid by construction, so they skip validation
 * and the event objects a caller would build.
 */
function packCacheEvents(events: CacheEvent[], workerId: number, dpRank: number): PackedEvents {
  const w = new PackedWriter();
  for (const e of events) {
    const tier = e.host ? tierFlags(HOST_TIER) : FLAG_DEVICE_TIER;
    if ('stored' in e) {
      const { parent, blocks } = e.stored;
      w.pushMeta(KIND_STORED, dpRank, tier | (parent === null ? 0 : FLAG_HAS_PARENT), blocks.length);
      w.pushNumber(workerId);
      w.pushNumber(0);
      if (parent !== null) w.pushBigInt(parent);
      for (const b of blocks) {
        w.pushBigInt(b.seq);
        w.pushBigInt(b.local);
      }
    } else {
      w.pushMeta(KIND_REMOVED, dpRank, tier, e.removed.length);
      w.pushNumber(workerId);
      w.pushNumber(0);
      for (const h of e.removed) w.pushBigInt(h);
    }
  }
  return w.finish();
}

interface Rank {
  workerId: number;
  dpRank: number;
  role: ReplayRankRole;
  engine: Engine;
  busy: boolean;
  /** The pass in flight (delivered when it ends). */
  result: PassResult | undefined;
  /** When a `load` wake of this rank is queued for (NaN for none), so it is queued once. */
  wakeAt: number;
}

const ROLES: readonly ReplayRankRole[] = ['aggregated', 'prefill', 'decode'];

/** What the previous wake left to do before the next event (besides the deferred passes). */
type Resume = { kind: 'nothing' } | { kind: 'pass'; rank: number };

export class JsFleet implements ReplayFleetBackend {
  private readonly ranks: Rank[];
  private readonly reqs: SimRequest[];
  private readonly queue = new EventQueue();
  private readonly nextTurn = new Map<number, { next: number; delayMs: number }>();
  /** Ranks whose next pass waits for the end of the current instant, in request order. */
  private readonly toStart = new Set<number>();
  private readonly defer: boolean;
  private clock = 0;
  /** Whether events were sent to the indexes since their last flush (see the Rust twin). */
  private unflushed = false;
  private resume: Resume = { kind: 'nothing' };
  /** One small number per distinct sequence hash, for the pools' maps (see `FullBlock.id`). */
  private readonly blockIds = new BlockIds();
  private readonly promptIds: Int32Array[];
  private readonly enqueued = new Set<number>();
  /** Disaggregated: how long a prefill leg's KV takes to reach the decode pool (ms per request, per prompt token). */
  private readonly handoff: { fixedMs: number; msPerToken: number; destinationMissing?: boolean };

  constructor(private readonly spec: ReplayFleetSpec) {
    const sizes = [spec.blockSize, spec.numGpuBlocks, spec.maxNumSeqs, spec.maxNumBatchedTokens];
    if (!sizes.every((n) => Number.isSafeInteger(n) && n > 0))
      throw new KvRouteError('ERR_INVALID_ARG', 'engine sizes must be positive integers');
    if (!(Number.isFinite(spec.speedup) && spec.speedup > 0))
      throw new KvRouteError('ERR_INVALID_ARG', 'speedup must be a positive number');
    if (!(Number.isFinite(spec.decodeSpeedup) && spec.decodeSpeedup > 0))
      throw new KvRouteError('ERR_INVALID_ARG', 'decodeSpeedup must be a positive number');
    if (!(Number.isSafeInteger(spec.hostBlocks) && spec.hostBlocks >= 0))
      throw new KvRouteError('ERR_INVALID_ARG', 'cpuOffloadBlocks must be a non-negative safe integer');
    if (!(Number.isFinite(spec.hostLoadMsPerBlock) && spec.hostLoadMsPerBlock >= 0))
      throw new KvRouteError('ERR_INVALID_ARG', 'the host load time must be a number >= 0');
    checkEngineSpeculative(spec.speculative);
    preemptionMode(spec.preemptionMode);
    const roles = spec.roles ?? spec.workers.map(() => 'aggregated' as const);
    if (spec.workers.length !== spec.dpRanks.length || spec.workers.length !== roles.length)
      throw new KvRouteError('ERR_INVALID_ARG', 'workers, dp ranks and roles differ in length');
    const bad = roles.find((r) => !ROLES.includes(r));
    if (bad !== undefined)
      throw new KvRouteError('ERR_INVALID_ARG', `a rank's role must be aggregated, prefill or decode, got ${String(bad)}`);
    this.handoff = spec.handoff ?? { fixedMs: 0, msPerToken: 0 };
    const delayOk = (v: number) => Number.isFinite(v) && v >= 0;
    if (!delayOk(this.handoff.fixedMs) || !delayOk(this.handoff.msPerToken))
      throw new KvRouteError('ERR_INVALID_ARG', 'the handoff delays must be finite numbers >= 0');
    this.ranks = spec.workers.map((workerId, i) => ({
      workerId,
      dpRank: spec.dpRanks[i],
      role: roles[i],
      engine: new Engine(spec, i),
      busy: false,
      result: undefined,
      wakeAt: Number.NaN,
    }));
    for (const rank of this.ranks) rank.engine.holds.holdsSources = rank.role === 'prefill';
    this.reqs = new Array(spec.requests);
    this.promptIds = new Array(spec.requests);
    this.defer = spec.timing === 'dynamo';
  }

  private uid(uid: number): number {
    if (!Number.isInteger(uid) || uid < 0 || uid >= this.spec.requests)
      throw new KvRouteError('ERR_INVALID_ARG', `request uid ${uid} is out of range (0..${this.spec.requests})`);
    return uid;
  }

  load(at: Float64Array, uids: Uint32Array): void {
    if (at.length !== uids.length) throw new KvRouteError('ERR_INVALID_ARG', 'arrival times and uids differ in length');
    for (const uid of uids) this.uid(uid);
    if (at.some((t) => !Number.isFinite(t))) throw new KvRouteError('ERR_INVALID_ARG', 'arrival times must be finite');
    this.queue.load(at, uids);
  }

  setNextTurn(prev: number, next: number, delayMs: number): void {
    this.uid(prev);
    this.uid(next);
    if (!(Number.isFinite(delayMs) && delayMs >= 0))
      throw new KvRouteError('ERR_INVALID_ARG', "a turn's delay must be a finite number >= 0");
    this.nextTurn.set(prev, { next, delayMs });
  }

  addRequest(uid: number, inputLength: number, outputLength: number, seqs: BigUint64Array, locals: BigUint64Array): void {
    this.uid(uid);
    if (this.reqs[uid]) throw new KvRouteError('ERR_INVALID_ARG', `request ${uid} was added already`);
    if (seqs.length !== locals.length) throw new KvRouteError('ERR_INVALID_ARG', 'sequence and local hashes differ in length');
    const ids = this.blockIds.of(seqs);
    this.promptIds[uid] = ids;
    const prompt = Array.from(ids, (id, k) => ({ seq: seqs[k], local: locals[k], id }));
    const sim = new SimRequest(uid, inputLength, outputLength, prompt);
    sim.arrivalMs = this.clock;
    this.reqs[uid] = sim;
  }

  enqueue(rank: number, uid: number): void {
    if (!Number.isInteger(rank) || rank < 0 || rank >= this.ranks.length)
      throw new KvRouteError('ERR_INVALID_ARG', `rank ${rank} is out of range (0..${this.ranks.length})`);
    const sim = this.reqs[this.uid(uid)];
    if (!sim) throw new KvRouteError('ERR_INVALID_ARG', `request ${uid} was not added`);
    if (this.enqueued.has(uid)) throw new KvRouteError('ERR_INVALID_ARG', `request ${uid} is enqueued already`);
    const role = this.ranks[rank].role;
    if (sim.handedOver !== (role === 'decode')) {
      throw new KvRouteError(
        'ERR_INVALID_ARG',
        sim.handedOver
          ? `request ${uid} was handed over: it goes to a decode rank, not rank ${rank}`
          : `rank ${rank} is a decode rank: request ${uid} must go through a prefill rank first`,
      );
    }
    if (role === 'prefill') sim.startPrefillLeg();
    this.enqueued.add(uid);
    if (role === 'decode') {
      this.acceptDestination(rank, sim);
      return;
    }
    this.ranks[rank].engine.enqueue(sim);
    this.requestPass(rank);
  }

  /**
   * A decode rank takes a handed-over request: it reserves the prompt's blocks now, or when a pass
   * of its frees room (not while a pass is in flight, as Dynamo's scheduler), and the transfer
   * starts once they are reserved (`handoff-holds.ts`).
   */
  private acceptDestination(rank: number, r: SimRequest): void {
    const blocks = Math.ceil(r.inputLength / this.spec.blockSize);
    if (blocks > this.spec.numGpuBlocks) {
      this.enqueued.delete(r.uid);
      throw new KvRouteError(
        'ERR_INVALID_ARG',
        `request ${r.uid}'s prompt of ${blocks} blocks cannot fit worker ${this.ranks[rank].workerId}'s KV cache of ${this.spec.numGpuBlocks} blocks (raise --num-gpu-blocks)`,
      );
    }
    r.destinationRank = rank;
    this.ranks[rank].engine.holds.accept(r);
    if (!this.ranks[rank].busy) this.startTransfers(rank);
  }

  /** Reserves what a decode rank can of its pending handoffs; each transfer ends after the handoff delay. */
  private startTransfers(rank: number): void {
    for (const { r, missingTokens } of this.ranks[rank].engine.reservePending()) {
      const tokens = this.handoff.destinationMissing ? missingTokens : r.inputLength;
      const delay = this.handoff.fixedMs + tokens * this.handoff.msPerToken;
      this.queue.push(this.clock + delay, 'transfer', r.uid);
    }
  }

  /** A transfer ended: the decode rank may run the request, the prefill rank frees its blocks. */
  private endTransfer(uid: number): void {
    const r = this.reqs[uid] as SimRequest;
    this.ranks[r.destinationRank].engine.activate(r);
    this.requestPass(r.destinationRank);
    this.ranks[r.sourceRank].engine.holds.releaseSource(uid);
    this.requestPass(r.sourceRank);
    this.startDeferred();
  }

  private startPass(i: number): void {
    const rank = this.ranks[i];
    if (rank.busy || rank.engine.idle) return;
    const result = rank.engine.step(this.clock);
    if (ranNothing(result)) {
      this.sleepOnLoads(rank, i, result);
      return;
    }
    rank.busy = true;
    rank.result = result;
    this.queue.push(this.clock + result.durationMs, 'pass', i);
  }

  /** A pass that ran nothing: the rank waits, idle, for its first load to end (see the Rust twin). */
  private sleepOnLoads(rank: Rank, i: number, result: PassResult): void {
    const ready = rank.engine.nextLoadReadyMs;
    // Room held for a transfer comes back when it ends, and the rank's next pass with it.
    if (ready === undefined && rank.engine.holds.awaitsTransfers) {
      this.deliver(rank, result);
      return;
    }
    if (ready === undefined) {
      throw new KvRouteError(
        'ERR_INVALID_ARG',
        `a request cannot fit worker ${rank.workerId}'s KV cache of ${this.spec.numGpuBlocks} blocks (raise --num-gpu-blocks)`,
      );
    }
    this.deliver(rank, result);
    if (rank.wakeAt !== ready) {
      rank.wakeAt = ready;
      this.queue.push(ready, 'load', i);
    }
  }

  private requestPass(i: number): void {
    if (this.defer) this.toStart.add(i);
    else this.startPass(i);
  }

  /** Dynamo timing: passes start once every event of the current instant is handled. */
  private startDeferred(): void {
    const next = this.queue.nextAt();
    if (this.toStart.size === 0 || (next !== undefined && next <= this.clock)) return;
    const starting = [...this.toStart];
    this.toStart.clear();
    for (const i of starting) this.startPass(i);
  }

  run(header: Float64Array): number {
    const resume = this.resume;
    this.resume = { kind: 'nothing' };
    if (resume.kind === 'pass') this.requestPass(resume.rank);
    this.startDeferred();
    for (let e = this.queue.pop(); e; e = this.queue.pop()) {
      this.clock = e.at;
      header[0] = this.clock;
      header[1] = e.subject;
      if (e.kind === 'arrival') {
        this.syncIndexes();
        return 1;
      }
      if (e.kind === 'handoff') return 3;
      if (e.kind === 'transfer') {
        this.endTransfer(e.subject);
        continue;
      }
      const rank = this.ranks[e.subject];
      if (e.kind === 'load') {
        if (rank.wakeAt === e.at) rank.wakeAt = Number.NaN;
        this.requestPass(e.subject);
        this.startDeferred();
        continue;
      }
      rank.busy = false;
      if (rank.role === 'decode') this.startTransfers(e.subject);
      const result = rank.result as PassResult;
      this.deliver(rank, result);
      if (result.firstTokens.length > 0 || result.finished.length > 0) {
        for (const r of result.finished) {
          if (rank.role === 'prefill') {
            this.handOver(e.subject, r);
            continue;
          }
          const turn = this.nextTurn.get(r.uid);
          if (turn) this.queue.push(this.clock + turn.delayMs, 'arrival', turn.next);
        }
        this.resume = { kind: 'pass', rank: e.subject };
        return 2;
      }
      this.requestPass(e.subject);
      this.startDeferred();
    }
    const stuck = this.ranks.find((rank) => rank.engine.holds.hasPending);
    if (stuck) {
      throw new KvRouteError(
        'ERR_INVALID_ARG',
        `a handed-over request found no room in worker ${stuck.workerId}'s KV cache of ${this.spec.numGpuBlocks} blocks (raise --num-gpu-blocks)`,
      );
    }
    this.syncIndexes();
    header[0] = this.clock;
    header[1] = 0;
    return 0;
  }

  /**
   * A prefill leg ended on rank `source`, which holds its KV: the decode pool's router places the
   * request at once.
   */
  private handOver(source: number, r: SimRequest): void {
    r.startDecodeLeg();
    r.sourceRank = source;
    this.enqueued.delete(r.uid);
    this.queue.push(this.clock, 'handoff', r.uid);
  }

  /**
   * Sends a pass's KV events to every index, stamped with the pass's end time. Decode ranks
   * publish to no router: the decode pool's does not weigh overlap.
   */
  private deliver(rank: Rank, result: PassResult): void {
    if (!this.spec.publishEvents || this.spec.indexes.length === 0 || result.events.length === 0 || rank.role === 'decode') return;
    const { meta, words } = packCacheEvents(result.events, rank.workerId, rank.dpRank);
    for (const index of this.spec.indexes) index.applyPacked(meta, words, this.clock);
    this.unflushed = true;
  }

  syncIndexes(): void {
    if (!this.unflushed) return;
    for (const index of this.spec.indexes) index.flushSync();
    this.unflushed = false;
  }

  firstTokens(rank: number): Uint32Array {
    return Uint32Array.from(this.ranks[rank]?.result?.firstTokens ?? [], (r) => r.uid);
  }

  finished(rank: number): Uint32Array {
    return Uint32Array.from(this.ranks[rank]?.result?.finished ?? [], (r) => r.uid);
  }

  upperBoundHitRatio(): number {
    return prefixCeiling(this.promptIds, this.reqs, this.spec.blockSize, this.blockIds.size);
  }

  outcomes(): Float64Array {
    const out = new Float64Array(OUTCOME_FIGURES * this.reqs.length);
    this.reqs.forEach((r, uid) => {
      out.set([r.arrivalMs, r.firstTokenMs, r.lastTokenMs, r.reusedTokens, r.firstReusedTokens, r.preemptions], OUTCOME_FIGURES * uid);
    });
    return out;
  }

  hostLoadedBlocks(): number {
    return this.ranks.reduce((n, r) => n + (r.engine.cache.host?.loaded ?? 0), 0);
  }

  tokenGaps(): Float64Array {
    return Float64Array.from(this.ranks.flatMap((r) => r.engine.tokenGaps));
  }

  speculativeSteps(): [steps: number, tokens: number] {
    return this.ranks.reduce<[number, number]>((n, r) => [n[0] + r.engine.decodeSteps, n[1] + r.engine.drawnTokens], [0, 0]);
  }
}
