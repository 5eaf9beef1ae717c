/**
 * A simulated vLLM-like engine rank: continuous batching with chunked prefill, a prefix-caching
 * KV block pool, Dynamo's admission rule (a waiting request starts only when its whole context
 * fits), preemption of the newest (or the oldest) running request when blocks run out
 * (`preemption.ts`), loads from host memory that run beside the passes (CPU offload),
 * speculative decoding's multi-token steps (`speculative.ts`), and Dynamo's mocker timing model.
 * Each `step` is one engine pass in virtual time. Used by the JS replay fleet (`fleet.ts`) and by
 * `kvroute mock-worker`; the native replay runs its Rust twin (`kvroute_core::replay`), which
 * must match it step for step, host memory behind the pool (`hostBlocks`, CPU offload) included.
 * Without host memory (the default) every step is the same as before it existed.
 * @internal
 * @module
 */

import type { EngineConfig, PassResult } from './engine-config.js';
import { HandoffHolds } from './handoff-holds.js';
import { KvCache } from './kv-cache.js';
import { preemptionVictim } from './preemption.js';
import { type SimRequest, uniqueOutputBlock } from './sim-request.js';
import { BurstSampler, type SpeculativeStats } from './speculative.js';
import { decodeMs, prefillMs } from './timing.js';

export class Engine {
  readonly cache: KvCache;
  /** Disaggregated handoffs in progress (`handoff-holds.ts`). */
  readonly holds: HandoffHolds;
  private readonly waiting: SimRequest[] = [];
  private readonly prefill: SimRequest[] = [];
  private readonly decode: SimRequest[] = [];
  /**
   * Requests whose prefix is loading back from host memory, in the order their loads end. They
   * hold their blocks and wait beside the passes, as with vLLM's offloading connector and
   * Dynamo's mocker; the loads share one link, one after another. The blocks a load fills join
   * the prefix cache when it ends (`KvCache.useLoading`); a waiting request whose prefix
   * continues in them is passed over until then (`nextToStart`).
   */
  private readonly loading: SimRequest[] = [];
  /** Requests whose load ended, next to prefill (before any waiting request: they hold blocks). */
  private readonly loaded: SimRequest[] = [];
  /** When the host-to-GPU link is free again (ms). */
  private linkFreeMs = 0;
  /** Requests that left the queue so far: the next one's `admittedSeq`. */
  private admissions = 0;
  /**
   * This pass's first tokens and later tokens, so far. A request preempted after the decode
   * loop served it (FIFO takes the oldest, which the loop serves first; and a request whose load
   * from host memory ended late decodes after newer ones) has its token taken back: vLLM
   * preempts while it schedules, before the forward runs.
   */
  private passFirstTokens: SimRequest[] = [];
  private readonly passProduced: SimRequest[] = [];
  private passPreempted = 0;
  /**
   * Every gap between two consecutive tokens of a request (ms), as Dynamo's replay reports its
   * ITL distribution: a decode stalled behind a long prefill, or a preemption, is one long gap.
   */
  readonly tokenGaps: number[] = [];
  /** Reused for each pass's decode batch (one array per pass was garbage). */
  private readonly scratch: SimRequest[] = [];
  private readonly bursts: BurstSampler | undefined;
  /**
   * Speculative decode steps of requests past their first token, and the tokens they drew before
   * a request's end cut a burst: their ratio is the mean accept length Dynamo reports.
   */
  decodeSteps = 0;
  drawnTokens = 0;

  /**
   * `rank`: the rank's position in its fleet, which seeds its speculative draws; `stats` counts
   * them (bookkeeping for the mock worker's metrics, so the Rust twin keeps none).
   */
  constructor(
    readonly config: EngineConfig,
    rank = 0,
    stats?: SpeculativeStats,
  ) {
    this.cache = new KvCache(config.numGpuBlocks, config.hostBlocks ?? 0);
    this.holds = new HandoffHolds(this.cache);
    this.bursts = config.speculative ? new BurstSampler(config.speculative, rank, stats) : undefined;
  }

  get idle(): boolean {
    return (
      this.waiting.length === 0 &&
      this.prefill.length === 0 &&
      this.decode.length === 0 &&
      this.loading.length === 0 &&
      this.loaded.length === 0
    );
  }

  get running(): number {
    return this.prefill.length + this.decode.length;
  }

  /**
   * When the first load from host memory in flight ends, if any: a pass that ran nothing while
   * loads are in flight leaves the rank waiting until then, or until a request arrives, which may
   * run at once beside the loads.
   */
  get nextLoadReadyMs(): number | undefined {
    return this.loading[0]?.loadReadyMs;
  }

  get waitingCount(): number {
    return this.waiting.length + this.loading.length + this.loaded.length;
  }

  enqueue(r: SimRequest): void {
    this.waiting.push(r);
  }

  /** Drops a request wherever it is (a client that went away); its blocks return to the pool. */
  abort(r: SimRequest): boolean {
    for (const list of [this.waiting, this.prefill, this.decode, this.loading, this.loaded]) {
      const i = list.indexOf(r);
      if (i < 0) continue;
      list.splice(i, 1);
      if (list === this.loading) {
        // The blocks its load was filling never got their KV: they leave the pool unannounced.
        this.cache.abandonLoad(r.loadStored);
        r.loadStored = undefined;
        r.loadReadyMs = -1;
      }
      r.inDecode = false;
      if (r.admitted || r.held.length > 0 || r.partial) this.releaseAll(r);
      return true;
    }
    return false;
  }

  /** Makes `r`'s blocks cover its first `tokens` tokens; false when the pool is full. */
  private ensure(r: SimRequest, tokens: number): boolean {
    const bs = this.config.blockSize;
    const wantPrompt = Math.min(Math.floor(tokens / bs), r.promptBlocks.length);
    if (r.promptTaken < wantPrompt) {
      const parent = r.promptTaken > 0 ? r.promptBlocks[r.promptTaken - 1].seq : null;
      const slice = r.promptBlocks.slice(r.promptTaken, wantPrompt);
      const taken = this.cache.use(slice, parent);
      for (let i = 0; i < taken; i++) r.held.push(slice[i]);
      r.promptTaken += taken;
      if (taken < slice.length) return false;
    }
    const full = Math.floor(tokens / bs);
    while (r.promptTaken + r.outputFull < full) {
      // The block being filled (prompt tail and/or output) is full: it joins the prefix cache
      // under an identity unique to this request's output.
      if (!r.partial) {
        if (!this.cache.usePrivate()) return false;
        r.partial = true;
      }
      const last = r.held.length > 0 ? r.held[r.held.length - 1] : undefined;
      const block = this.config.outputBlock?.(r, r.outputFull, last) ?? uniqueOutputBlock(r, r.outputFull);
      const parent = last ? last.seq : null;
      this.cache.promote(block, parent);
      r.held.push(block);
      r.outputFull++;
      r.partial = false;
    }
    if (tokens % bs !== 0 && !r.partial) {
      if (!this.cache.usePrivate()) return false;
      r.partial = true;
    }
    return true;
  }

  private releaseAll(r: SimRequest): void {
    this.dropBlocks(r);
    r.forgetBlocks();
  }

  /** Gives the request's blocks back to the pool (cached, when full) and forgets which it took. */
  private dropBlocks(r: SimRequest): void {
    this.cache.release(r.held);
    if (r.partial) this.cache.releasePrivate();
    r.held = [];
    r.partial = false;
    r.promptTaken = 0;
    r.outputFull = 0;
  }

  /**
   * Reserves what this decode rank can of its pending handoffs (`HandoffHolds.reservePending`);
   * returns the requests whose transfer may start.
   */
  reservePending(): Array<{ r: SimRequest; missingTokens: number }> {
    return this.holds.reservePending(
      () => this.running < this.config.maxNumSeqs,
      (r, tokens) => {
        if (this.ensure(r, tokens)) return true;
        this.dropBlocks(r);
        return false;
      },
      this.config.blockSize,
    );
  }

  /** A reserved request's KV has arrived: it waits to run (`HandoffHolds.activate`). */
  activate(r: SimRequest): void {
    this.holds.activate(this.waiting, r);
  }

  /**
   * Preempts the running request the rank's mode picks so that `current` can go on (see
   * `preemption.ts`) and returns it; undefined when there is none. The victim may be `current`.
   */
  private preempt(current?: SimRequest): SimRequest | undefined {
    const victim = preemptionVictim(this.config.preemptionMode ?? 'lifo', [this.decode, this.prefill], current);
    if (victim) this.requeue(victim);
    return victim;
  }

  /**
   * `ensure`, preempting as the mode says until it succeeds: `'ok'`; `'full'` when none is left
   * to preempt (`r` still runs); `'preempted'` when `r` was the victim.
   */
  private ensurePreempting(r: SimRequest, tokens: number): 'ok' | 'full' | 'preempted' {
    while (!this.ensure(r, tokens)) {
      const victim = this.preempt(r);
      if (!victim) return 'full';
      if (victim === r) return 'preempted';
    }
    return 'ok';
  }

  private requeue(victim: SimRequest): void {
    const list = victim.inDecode ? this.decode : this.prefill;
    list.splice(list.indexOf(victim), 1);
    victim.inDecode = false;
    this.releaseAll(victim);
    victim.preemptions++;
    this.passPreempted++;
    this.waiting.unshift(victim);
    const produced = this.passProduced.indexOf(victim);
    if (produced >= 0) {
      this.passProduced.splice(produced, 1);
      victim.generated--;
    }
    const first = this.passFirstTokens.indexOf(victim);
    if (first >= 0) {
      this.passFirstTokens.splice(first, 1);
      victim.generated = 0;
    }
  }

  /**
   * How many leading blocks of the request may come from a cache: vLLM computes at least the
   * context's last token (its logits sample the next one), so a context that is all cached
   * recomputes its last block when it ends on a block boundary (Dynamo's mocker does the same).
   */
  private cacheableBlocks(r: SimRequest): number {
    return Math.min(r.promptBlocks.length, Math.floor(Math.max(0, r.context - 1) / this.config.blockSize));
  }

  /**
   * Blocks of a cached prefix of `found` blocks the request reuses: with speculative decoding
   * vLLM recomputes the last one (the drafter needs its hidden states), as Dynamo's mocker models it.
   */
  private reusedBlocks(found: number): number {
    return this.bursts ? Math.max(0, found - 1) : found;
  }

  /**
   * Takes the request's cached prefix: its GPU hit, then the blocks host memory holds right after
   * it, loaded back as far as the GPU pool has room. Returns how many blocks were loaded.
   */
  private admit(r: SimRequest, now: number): number {
    // A decode leg whose KV arrived into blocks reserved for it (`handoff-holds.ts`).
    if (r.kvReserved) {
      this.holds.arrivedStarted();
      r.kvReserved = false;
      r.admitted = true;
      r.prefilled = r.inputLength;
      return 0;
    }
    const bs = this.config.blockSize;
    const limit = this.cacheableBlocks(r);
    const found = Math.min(this.cache.prefixHit(r.promptBlocks), limit);
    const host = this.cache.host;
    const foundHost = host ? Math.min(host.prefixHit(r.promptBlocks, found), limit - found) : 0;
    // The block recomputed under speculative decoding is the prefix's last: host memory's when
    // the prefix continues there.
    const reused = this.reusedBlocks(found + foundHost);
    const hit = Math.min(found, reused);
    const offloaded = reused - hit;
    const first = r.firstAdmitMs < 0;
    if (first) r.firstAdmitMs = now;
    r.admitted = true;
    // Cached blocks are in the pool already: taking them cannot fail.
    this.ensure(r, hit * bs);
    if (host && offloaded > 0) {
      if ((this.config.hostLoadMsPerBlock ?? 0) > 0) this.takeLoading(r, hit + offloaded);
      else this.ensure(r, (hit + offloaded) * bs);
      host.load(r.promptBlocks.slice(hit, r.promptTaken));
    }
    const cached = Math.min(r.promptTaken * bs, r.inputLength);
    // The best over admissions, as Dynamo reports it: a decode leg comes here only when it
    // recomputes after a preemption (its first admission, with the KV it received, counts none:
    // see the top of this function).
    if (cached >= r.reusedTokens) {
      r.reusedTokens = cached;
      r.reusedHostTokens = cached - Math.min(hit * bs, r.inputLength);
    }
    if (first) r.firstReusedTokens = cached;
    r.prefilled = cached;
    return r.promptTaken - hit;
  }

  /**
   * Takes the prompt blocks up to `end` that a load from host memory fills: out of other
   * requests' reach until the load ends (see `KvCache.useLoading`).
   */
  private takeLoading(r: SimRequest, end: number): void {
    const parent = r.promptTaken > 0 ? r.promptBlocks[r.promptTaken - 1].seq : null;
    const slice = r.promptBlocks.slice(r.promptTaken, end);
    const { taken, stored } = this.cache.useLoading(slice, parent);
    for (let i = 0; i < taken; i++) r.held.push(slice[i]);
    r.promptTaken += taken;
    r.loadStored = stored;
  }

  /** A load ended: its blocks join the cache, announced (`abort` abandons a load instead). */
  private endLoad(r: SimRequest): void {
    r.loadReadyMs = -1;
    this.cache.loaded(r.loadStored);
    r.loadStored = undefined;
  }

  /**
   * Whether the request's prefix continues in blocks another request is loading from host
   * memory: it waits until that load ends and then finds them on the GPU (Dynamo defers such a
   * request's own load; vLLM does not cache the blocks until theirs ends).
   */
  private waitsForALoad(r: SimRequest): boolean {
    const limit = this.cacheableBlocks(r);
    const hit = Math.min(this.cache.prefixHit(r.promptBlocks), limit);
    return hit < limit && this.cache.isLoading(r.promptBlocks[hit]);
  }

  /**
   * The waiting request to start next (its index), or -1: in order, the first that does not fit
   * stops the walk (Dynamo's rule), and one waiting for another's load is passed over.
   */
  private nextToStart(): number {
    if (this.running >= this.config.maxNumSeqs) return -1;
    const arrived = this.holds.firstArrived(this.waiting);
    if (arrived >= 0) return arrived;
    if (!this.holds.mayStart) return -1;
    for (let i = 0; i < this.waiting.length; i++) {
      const r = this.waiting[i];
      if (!this.fits(r)) return -1;
      if (this.loading.length === 0 || !this.waitsForALoad(r)) return i;
    }
    return -1;
  }

  /** Blocks a request needs beyond those it holds to cover its context. */
  private stillNeeded(r: SimRequest): number {
    return Math.max(0, Math.ceil(r.context / this.config.blockSize) - r.held.length - (r.partial ? 1 : 0));
  }

  /**
   * Dynamo's vLLM admission rule: a waiting request starts only when its whole known context fits
   * in the blocks no running request holds (its prefix blocks that are in use cost nothing). A
   * request admitted on room for one chunk would be the first preempted when the running requests
   * grow, and come back to find its own blocks cached.
   */
  private fits(r: SimRequest): boolean {
    const bs = this.config.blockSize;
    // Requests loading from host memory (or loaded, about to prefill) will need the rest of their
    // context: that room is spoken for, as Dynamo reserves it for in-flight loads.
    let promised = 0;
    for (const x of this.loading) promised += this.stillNeeded(x);
    for (const x of this.loaded) promised += this.stillNeeded(x);
    const room = Math.max(0, this.config.numGpuBlocks - this.cache.used - promised);
    const blocks = Math.ceil(r.context / bs);
    // Without pressure the whole context fits outright: no need to walk the prefix.
    if (blocks <= room) return true;
    const hit = this.reusedBlocks(Math.min(this.cache.prefixHit(r.promptBlocks), this.cacheableBlocks(r)));
    return blocks - this.cache.activePrefix(r.promptBlocks, hit) <= room;
  }

  /**
   * Dynamo's decode step: none unless a sequence is decoding; else the polynomial at the summed
   * lengths (in blocks) of the decoding sequences over the rank's GPU blocks.
   */
  private dynamoDecodeMs(): number {
    const bs = this.config.blockSize;
    // Without speculation the first token comes from the prefill's forward; with it, the first
    // step after prefill is a decode forward too (Dynamo's mocker).
    const firstFromPrefill = !this.bursts;
    let blocks = 0;
    let decoding = false;
    for (const r of this.decode) {
      // A decode leg's first token needs a forward of its own: the prefill's ran elsewhere.
      if ((r.justPrefilled && firstFromPrefill && r.remoteTokens === 0) || !r.inDecode) continue;
      decoding = true;
      blocks += Math.ceil(r.context / bs);
    }
    return decoding ? decodeMs(blocks / this.config.numGpuBlocks) : 0;
  }

  /** Blocks the decoding requests need beyond those they hold for their longest bursts. */
  private burstBlocksNeeded(maxBurst: number): number {
    const bs = this.config.blockSize;
    let need = 0;
    for (const r of this.decode) need += Math.max(0, Math.ceil((r.context + maxBurst) / bs) - r.held.length - (r.partial ? 1 : 0));
    return need;
  }

  /**
   * Before a speculative decode step, room for every decoding request's longest burst, as Dynamo
   * reserves it: the newest running requests are preempted until it fits. The step's decode time
   * then counts only the requests left.
   */
  private reserveBursts(sampler: BurstSampler): void {
    const free = () => Math.max(0, this.config.numGpuBlocks - this.cache.used);
    while (this.decode.length > 0 && this.burstBlocksNeeded(sampler.maxBurst) > free()) if (!this.preempt()) break;
  }

  /**
   * A speculative decode step of `r` (its first after prefill, or a later one; room was
   * reserved): the burst is drawn and its tokens' KV kept. Returns the burst's length.
   */
  private speculativeStep(r: SimRequest, sampler: BurstSampler, first: boolean): number {
    const drawn = sampler.burst();
    // As Dynamo's accept length: decode-only steps (not the one finishing a prefill).
    if (!first) {
      this.decodeSteps++;
      this.drawnTokens += drawn;
    }
    const burst = Math.max(1, Math.min(drawn, r.outputLength - r.generated));
    // The step computed the KV of the last token and of the drafts accepted; the token it sampled
    // last is computed by the next step, as without speculation.
    this.ensure(r, r.context + burst - 1);
    return burst;
  }

  /**
   * One engine pass starting at `now`: a prefill step, then a decode step. A pass that ran
   * nothing lasts 0 ms and produces nothing (see `nextLoadReadyMs`).
   */
  step(now: number): PassResult {
    const cfg = this.config;
    const dynamo = (cfg.timing ?? 'dynamo') === 'dynamo';
    let budget = cfg.maxNumBatchedTokens - this.decode.length;
    let prefillTime = 0;
    let prefillTokens = 0;
    // Before anything can be preempted: the lists a preemption takes a token back from.
    this.passFirstTokens = [];
    this.passProduced.length = 0;
    // Loads that ended: those requests prefill next, their blocks in place.
    while (this.loading.length > 0 && this.loading[0].loadReadyMs <= now) {
      const r = this.loading.shift() as SimRequest;
      this.endLoad(r);
      this.loaded.push(r);
    }
    while (budget > 0) {
      if (this.prefill.length === 0) {
        if (this.loaded.length > 0) this.prefill.push(this.loaded.shift() as SimRequest);
        else {
          const i = this.nextToStart();
          if (i < 0) break;
          const next = (i === 0 ? this.waiting.shift() : this.waiting.splice(i, 1)[0]) as SimRequest;
          next.admittedSeq = ++this.admissions;
          this.prefill.push(next);
        }
      }
      const r = this.prefill[0];
      if (!r.admitted) {
        const loaded = this.admit(r, now);
        const loadMs = (loaded * (cfg.hostLoadMsPerBlock ?? 0)) / cfg.speedup;
        if (loadMs > 0) {
          r.loadReadyMs = Math.max(now, this.linkFreeMs) + loadMs;
          this.linkFreeMs = r.loadReadyMs;
          this.loading.push(this.prefill.shift() as SimRequest);
          continue;
        }
      }
      // Pulled KV (see `SimRequest.remoteTokens`) is filled in whole, without compute and outside
      // the pass's token budget (a compute budget); what is left is computed, chunked as usual.
      const pulled = Math.max(0, Math.min(r.remoteTokens, r.context) - r.prefilled);
      const computed = Math.min(r.context - r.prefilled - pulled, budget);
      const chunk = pulled + computed;
      const room = this.ensurePreempting(r, r.prefilled + chunk);
      // Requests whose KV arrived hold blocks it needs and cannot start behind it: it yields its
      // own (vLLM preempts it and serves the arrived KV first).
      if (room === 'full' && this.holds.hasArrived) {
        this.requeue(r);
        continue;
      }
      if (room !== 'ok') break;
      if (!dynamo) prefillTime += prefillMs(computed);
      prefillTokens += computed;
      r.prefilled += chunk;
      budget -= computed;
      if (r.prefilled < r.context) break;
      this.prefill.shift();
      r.justPrefilled = r.generated === 0;
      r.inDecode = true;
      this.decode.push(r);
    }
    if (dynamo) prefillTime = prefillMs(prefillTokens);
    const firstTokens = this.passFirstTokens;
    const finished: SimRequest[] = [];
    /** Requests that produced a token after their first in this pass. */
    const produced = this.passProduced;
    /** Tokens emitted after another of the same request in this pass (speculative bursts): gaps of 0. */
    let burstFollowers = 0;
    let decodeTime = 0;
    if (this.bursts) this.reserveBursts(this.bursts);
    if (this.decode.length > 0) {
      decodeTime = dynamo ? this.dynamoDecodeMs() : decodeMs(this.cache.used / cfg.numGpuBlocks);
      // A snapshot: finishing and preemption remove requests from `decode` during the loop.
      const batch = this.scratch;
      batch.length = 0;
      for (const r of this.decode) batch.push(r);
      for (const r of batch) {
        if (!r.inDecode) continue;
        if (this.bursts) {
          const first = r.justPrefilled;
          r.justPrefilled = false;
          const burst = this.speculativeStep(r, this.bursts, first);
          r.generated += burst;
          burstFollowers += burst - 1;
          (first ? firstTokens : produced).push(r);
        } else if (r.justPrefilled) {
          // The pass that completes a prefill produces the first token.
          r.justPrefilled = false;
          r.generated = 1;
          firstTokens.push(r);
        } else {
          // The pass computes the KV of the last token sampled (the context's last) and samples
          // one more, whose KV the next pass computes: blocks cover the context, as in vLLM and
          // Dynamo's mocker.
          const room = this.ensurePreempting(r, r.context);
          if (room !== 'ok') {
            // With none to preempt (LIFO: it is the newest), the request yields its own blocks.
            if (room === 'full') this.requeue(r);
            continue;
          }
          r.generated++;
          produced.push(r);
        }
        if (r.generated >= r.outputLength) {
          this.decode.splice(this.decode.indexOf(r), 1);
          r.inDecode = false;
          if (this.holds.holdsSources) this.holds.holdSource(r);
          else this.releaseAll(r);
          finished.push(r);
        }
      }
    }
    // As Dynamo's mocker scales them: prefill by the speedup, decode by both ratios.
    const durationMs = prefillTime / cfg.speedup + decodeTime / (cfg.speedup * (cfg.decodeSpeedup ?? 1));
    const end = now + durationMs;
    for (const r of produced) this.tokenGaps.push(end - r.lastTokenMs);
    for (let i = 0; i < burstFollowers; i++) this.tokenGaps.push(0);
    for (const r of firstTokens) r.firstTokenMs = end;
    for (const r of this.decode) if (r.generated > 0) r.lastTokenMs = end;
    for (const r of finished) r.lastTokenMs = end;
    const preempted = this.passPreempted;
    this.passPreempted = 0;
    return { durationMs, firstTokens, finished, preempted, events: this.cache.takeEvents() };
  }
}
