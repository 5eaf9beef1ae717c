/**
 * A rank's side of the disaggregated handoff, as Dynamo's vLLM scheduler runs it (source first):
 * a prefill rank holds a finished leg's blocks until its KV has reached the decode rank; a decode
 * rank reserves the prompt's blocks before the transfer starts, in the order requests came, the
 * first one that finds no room holding back the rest (no running request is preempted for it),
 * and the request joins the waiting queue, its KV in place, once the transfer ends. Holding both
 * ends costs memory on both pools while the KV is in flight, which a plain delay does not. The
 * twin of `kvroute_core::replay::engine::handoff`; the clock's side is in `fleet.ts`.
 * @internal
 * @module
 */

import type { FullBlock, KvCache } from './kv-cache.js';
import type { SimRequest } from './sim-request.js';

/** What a rank holds for handoffs in progress. */
export class HandoffHolds {
  /** Prefill rank: a finished leg's blocks stay in use until its KV has been sent. */
  holdsSources = false;
  private readonly sources = new Map<number, { blocks: FullBlock[]; partial: boolean }>();
  /** Decode rank: requests handed over and waiting for room to receive their KV into. */
  private readonly pending: SimRequest[] = [];
  /** Requests whose blocks are reserved and whose KV is on its way. */
  private inTransit = 0;
  /** Requests whose KV has arrived, waiting to run. */
  private arrived = 0;
  /** Requests accepted so far: the next one's `transferSeq`. */
  private accepted = 0;

  constructor(private readonly cache: KvCache) {}

  /**
   * Whether an event will come that changes what this rank can run: the end of a transfer it
   * sends (a held source) or receives (a reservation). A pass that runs nothing waits for it.
   */
  get awaitsTransfers(): boolean {
    return this.sources.size > 0 || this.inTransit > 0;
  }

  /** Whether a handed-over request still waits for room to receive its KV into. */
  get hasPending(): boolean {
    return this.pending.length > 0;
  }

  /** A prefill leg finished: its blocks stay in use until `releaseSource`. */
  holdSource(r: SimRequest): void {
    this.sources.set(r.uid, { blocks: r.held, partial: r.partial });
    r.held = [];
    r.partial = false;
    r.forgetBlocks();
  }

  /** The KV of a held leg has reached its decode rank: its blocks go back to the pool (cached). */
  releaseSource(uid: number): void {
    const held = this.sources.get(uid);
    if (!held) return;
    this.sources.delete(uid);
    this.cache.release(held.blocks);
    if (held.partial) this.cache.releasePrivate();
  }

  /** A request handed over to this decode rank waits for its reservation (`reservePending`). */
  accept(r: SimRequest): void {
    r.transferSeq = ++this.accepted;
    this.pending.push(r);
  }

  /**
   * Reserves the blocks of the pending requests, in order, while `canRun` (the rank runs fewer
   * than `maxNumSeqs`) and the pool has room (`ensure`: a block cached here already is reused,
   * cached blocks no request uses are evicted, none in use is taken; on failure it gives back
   * what it took). Returns the requests whose
   * transfer may start, each with the prompt tokens this rank lacked (its fresh blocks, whole).
   */
  reservePending(
    canRun: () => boolean,
    ensure: (r: SimRequest, tokens: number) => boolean,
    blockSize: number,
  ): Array<{ r: SimRequest; missingTokens: number }> {
    const reserved: Array<{ r: SimRequest; missingTokens: number }> = [];
    while (this.pending.length > 0 && canRun()) {
      const r = this.pending[0];
      const resident = this.cache.prefixHit(r.promptBlocks);
      if (!ensure(r, r.inputLength)) break;
      this.pending.shift();
      this.inTransit++;
      r.kvReserved = true;
      reserved.push({ r, missingTokens: (r.held.length - resident + (r.partial ? 1 : 0)) * blockSize });
    }
    return reserved;
  }

  /**
   * A reserved request's KV has arrived: it waits among the others whose KV arrived in the order
   * the handoffs came (`firstArrived` starts them before any other).
   */
  activate(waiting: SimRequest[], r: SimRequest): void {
    this.inTransit--;
    this.arrived++;
    const at = waiting.findIndex((w) => w.kvReserved && w.transferSeq > r.transferSeq);
    waiting.splice(at < 0 ? waiting.length : at, 0, r);
  }

  /**
   * The first waiting request whose KV has arrived (its index), or -1: it starts before any
   * other, wherever a preemption put those (vLLM serves the requests whose remote KV arrived
   * before its waiting queue). It holds its blocks, so it always fits.
   */
  firstArrived(waiting: SimRequest[]): number {
    return this.arrived === 0 ? -1 : waiting.findIndex((w) => w.kvReserved);
  }

  /** Whether requests whose KV has arrived wait to run. */
  get hasArrived(): boolean {
    return this.arrived > 0;
  }

  /** An arrived request leaves the waiting queue. */
  arrivedStarted(): void {
    this.arrived--;
  }

  /**
   * Whether a waiting request that must compute its KV may start now: not while a handoff waits
   * for room here (the reservation comes first, as in Dynamo's scheduler).
   */
  get mayStart(): boolean {
    return this.pending.length === 0;
  }
}
