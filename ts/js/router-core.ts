/**
 * The pure-JS router core: per-rank active load and per-request scoring, with the same
 * semantics as kvroute-core's `load.rs` and `routing.rs`.
 * @internal
 * @module
 */

import { CANDIDATE_FIGURES, type RawRankLoad, type RouterCoreBackend } from '../backend-types.js';
import { KvRouteError } from '../errors.js';
import { jsHashing } from './hashing.js';
import type { JsIndex } from './index/js-index.js';

type BlockId = bigint | string;

/** As kvroute-core's `MAX_OUTPUT_BLOCKS`: output blocks one request may hold. */
const MAX_OUTPUT_BLOCKS = 1 << 24;

/** As kvroute-core's `MAX_REMOTE_UNSHARED_BLOCKS`: a corrupt peer message cannot allocate gigabytes. */
const MAX_REMOTE_UNSHARED_BLOCKS = 1 << 20;

interface RankLoad {
  workerId: bigint;
  dpRank: number;
  prefillTokens: number;
  blocks: Map<BlockId, number>;
  /** Blocks held by one request whose weight that request decayed below 1 (see load.rs). */
  fractions: Map<BlockId, number>;
  /** The sum of `1 - fraction` over `fractions`; exactly 0 when it is empty. */
  decayed: number;
  requests: number;
}

/** Active blocks: each block's weight, summed and rounded (load.rs's `active_blocks`). */
function activeBlocks(load: RankLoad): number {
  return Math.max(0, Math.round(load.blocks.size - load.decayed));
}

/** Sets a block's weight (1 removes the decay). */
function setFraction(load: RankLoad, id: BlockId, fraction: number): void {
  const old = load.fractions.get(id);
  if (fraction < 1) load.fractions.set(id, fraction);
  else load.fractions.delete(id);
  load.decayed += 1 - Math.min(fraction, 1) - (old === undefined ? 0 : 1 - old);
  if (load.fractions.size === 0) load.decayed = 0;
}

/** One more request holds the block: a block two requests hold is no longer decayed. */
function hold(load: RankLoad, id: BlockId): void {
  const n = (load.blocks.get(id) ?? 0) + 1;
  load.blocks.set(id, n);
  if (n === 2 && load.fractions.has(id)) setFraction(load, id, 1);
}

/** One request fewer holds the block. */
function release(load: RankLoad, id: BlockId): void {
  const n = load.blocks.get(id);
  if (n === undefined) return;
  if (n > 1) {
    load.blocks.set(id, n - 1);
    return;
  }
  load.blocks.delete(id);
  setFraction(load, id, 1);
}

/** What `book` needs of a scored request. */
interface Scored {
  blocks: BlockId[];
  /** The hashes it was scored with, for a prediction (see routing.rs). */
  locals: BigUint64Array | undefined;
}

interface Booking {
  rankKey: string;
  blocks: BlockId[];
  /** Output blocks added since booking. */
  outputs: string[];
  prefillTokens: number;
  bookedAt: number;
}

/** Orders block identity lists lexicographically (sequence hashes before unshared identities). */
function compareBlocks(a: readonly BlockId[], b: readonly BlockId[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const [x, y] = [a[i], b[i]];
    if (x === y) continue;
    if (typeof x !== typeof y) return typeof x === 'bigint' ? -1 : 1;
    return x < y ? -1 : 1;
  }
  return a.length - b.length;
}

export class JsRouterCore implements RouterCoreBackend {
  private readonly ranks = new Map<string, RankLoad>();
  private readonly bookings = new Map<number, Booking>();
  private readonly order: Array<[number, number]> = [];
  private orderHead = 0;
  private readonly pending = new Map<number, Scored>();

  constructor(private readonly index: JsIndex) {}

  score(
    handle: number,
    tokens: Uint32Array,
    blockSize: number,
    loraName: string | undefined,
    cacheNamespace: string | undefined,
    eagle: boolean,
    mmOffsets: Uint32Array | undefined,
    mmHashes: BigUint64Array | undefined,
    workers: BigUint64Array,
    ranks: Uint32Array,
    nowMs: number,
    assumeKvReuse: boolean,
    out: Float64Array,
  ): number {
    const locals = jsHashing.blockHashes(tokens, blockSize, loraName, cacheNamespace, eagle, mmOffsets, mmHashes);
    // Without KV reuse, block identities that never match another request's (see routing.rs).
    // Only when a lower tier holds blocks: routing pays nothing for tiers it does not use.
    const tiers = this.index.hasLowerTiers();
    // The sequence hashes serve both the load tracker (with KV reuse) and the tier walk.
    const positions = assumeKvReuse || tiers ? jsHashing.sequenceHashes(locals) : undefined;
    const blocks: BlockId[] = positions && assumeKvReuse ? Array.from(positions) : Array.from(locals, (_, i) => `${handle}:${i}`);
    const matches = new Map<string, [number, number]>();
    for (const s of this.index.findMatches(locals, nowMs)) matches.set(`${s.workerId}:${s.dpRank}`, [s.blocks, s.treeSize]);
    const keys: string[] = tiers ? new Array(workers.length) : [];
    const device: number[] = tiers ? new Array(workers.length) : [];
    for (let c = 0; c < workers.length; c++) {
      const key = `${workers[c]}:${ranks[c]}`;
      const [overlap, treeSize] = matches.get(key) ?? [0, this.index.treeSize(workers[c], ranks[c])];
      if (tiers) {
        keys[c] = key;
        device[c] = overlap;
      }
      const load = this.ranks.get(key);
      let fresh = blocks.length;
      if (load) {
        fresh = 0;
        for (const b of blocks) if (!load.blocks.has(b)) fresh++;
      }
      out.set(
        [overlap, treeSize, load?.prefillTokens ?? 0, load ? activeBlocks(load) : 0, fresh, load?.requests ?? 0, 0, 0],
        CANDIDATE_FIGURES * c,
      );
    }
    const reach = positions && tiers ? this.index.lowerTierReach(positions, keys, device) : undefined;
    if (reach) for (let c = 0; c < reach.length; c++) out.set([reach[c][0], reach[c][1] + reach[c][2]], CANDIDATE_FIGURES * c + 6);
    this.pending.set(handle, { blocks, locals });
    return locals.length;
  }

  book(
    handle: number,
    workerId: bigint,
    dpRank: number,
    prefillTokens: number,
    trackBlocks: boolean,
    nowMs: number,
    predictUntilMs?: number,
  ): void {
    const scored = this.pending.get(handle);
    if (!scored) throw new KvRouteError('ERR_INVALID_ARG', `request handle ${handle} was not scored`);
    if (this.bookings.has(handle)) throw new KvRouteError('ERR_INVALID_ARG', `request handle ${handle} is already booked`);
    this.pending.delete(handle);
    const { blocks, locals } = scored;
    if (predictUntilMs !== undefined && locals) this.index.recordRouting(workerId, dpRank, locals, nowMs, predictUntilMs);
    const rankKey = `${workerId}:${dpRank}`;
    let load = this.ranks.get(rankKey);
    if (!load) {
      load = { workerId, dpRank, prefillTokens: 0, blocks: new Map(), fractions: new Map(), decayed: 0, requests: 0 };
      this.ranks.set(rankKey, load);
    }
    const held = trackBlocks ? blocks : [];
    load.prefillTokens += prefillTokens;
    load.requests++;
    for (const b of held) hold(load, b);
    this.bookings.set(handle, { rankKey, blocks: held, outputs: [], prefillTokens, bookedAt: nowMs });
    this.order.push([nowMs, handle]);
  }

  bookRemote(
    handle: number,
    workerId: bigint,
    dpRank: number,
    blocks: BigUint64Array,
    unshared: number,
    prefillTokens: number,
    nowMs: number,
  ): void {
    if (unshared > MAX_REMOTE_UNSHARED_BLOCKS)
      throw new KvRouteError(
        'ERR_INVALID_ARG',
        `a remote booking holds at most ${MAX_REMOTE_UNSHARED_BLOCKS} unshared blocks, got ${unshared}`,
      );
    const ids: BlockId[] = Array.from(blocks);
    for (let i = 0; i < unshared; i++) ids.push(`${handle}:${i}`);
    this.pending.set(handle, { blocks: ids, locals: undefined });
    this.book(handle, workerId, dpRank, prefillTokens, true, nowMs);
  }

  bookedBlocks(handle: number): BigUint64Array {
    // Unshared identities (strings) stay private: a peer receives their count, not them.
    const held = this.bookings.get(handle)?.blocks ?? [];
    return BigUint64Array.from(held.filter((b): b is bigint => typeof b === 'bigint'));
  }

  /** As routing.rs's `shared_leading_blocks`: sorted by block identities, each shares with the one before. */
  sharedLeadingBlocks(group: Float64Array, count: number): void {
    if (count > group.length) throw new KvRouteError('ERR_INVALID_ARG', 'count exceeds the group buffer');
    const lists = Array.from(group.subarray(0, count), (handle) => {
      const scored = this.pending.get(handle);
      if (!scored) throw new KvRouteError('ERR_INVALID_ARG', `request handle ${handle} was not scored`);
      return scored.blocks;
    });
    const order = lists.map((_, i) => i).sort((a, b) => compareBlocks(lists[a], lists[b]));
    group.fill(0, 0, count);
    for (let k = 1; k < order.length; k++) {
      const [before, mine] = [lists[order[k - 1]], lists[order[k]]];
      let n = 0;
      while (n < before.length && n < mine.length && before[n] === mine[n]) n++;
      group[order[k]] = n;
    }
  }

  discard(handle: number): void {
    this.pending.delete(handle);
  }

  prefillCompleted(handle: number): boolean {
    const b = this.bookings.get(handle);
    if (!b) return false;
    const load = this.ranks.get(b.rankKey);
    if (load) load.prefillTokens -= b.prefillTokens;
    b.prefillTokens = 0;
    return true;
  }

  free(handle: number): boolean {
    const b = this.bookings.get(handle);
    if (!b) return false;
    this.bookings.delete(handle);
    const load = this.ranks.get(b.rankKey);
    if (load) {
      load.prefillTokens -= b.prefillTokens;
      load.requests--;
      for (const id of b.blocks) release(load, id);
      for (const id of b.outputs) release(load, id);
      if (load.requests === 0) this.ranks.delete(b.rankKey);
    }
    return true;
  }

  addOutputBlocks(handle: number, count: number, decay: number | undefined): boolean {
    if (decay !== undefined && !(decay >= 0 && decay <= 1))
      throw new KvRouteError('ERR_INVALID_ARG', `an output block decay must be in [0, 1], got ${decay}`);
    const b = this.bookings.get(handle);
    if (!b) return false;
    if (b.outputs.length + count > MAX_OUTPUT_BLOCKS)
      throw new KvRouteError('ERR_INVALID_ARG', `a request holds at most ${MAX_OUTPUT_BLOCKS} output blocks; ${count} more were asked for`);
    const load = this.ranks.get(b.rankKey);
    if (!load) return true;
    for (let i = 0; i < count; i++) {
      // Identities no prompt block (bigint) and no other request has.
      const id = `${handle}:out:${b.outputs.length}`;
      b.outputs.push(id);
      hold(load, id);
    }
    if (decay === undefined) return true;
    // The prompt's blocks, then the outputs: the order load.rs weighs them in.
    for (const id of b.blocks) if (load.blocks.get(id) === 1) setFraction(load, id, decay);
    for (const id of b.outputs) if (load.blocks.get(id) === 1) setFraction(load, id, decay);
    return true;
  }

  touch(handle: number, nowMs: number): boolean {
    const b = this.bookings.get(handle);
    if (!b) return false;
    b.bookedAt = nowMs;
    // The older entry in `order` no longer matches and is skipped by `expire`.
    this.order.push([nowMs, handle]);
    return true;
  }

  expire(cutoffMs: number): number[] {
    const out: number[] = [];
    while (this.orderHead < this.order.length && this.order[this.orderHead][0] < cutoffMs) {
      const [at, handle] = this.order[this.orderHead++];
      if (this.bookings.get(handle)?.bookedAt === at && this.free(handle)) out.push(handle);
    }
    if (this.orderHead > 1024 && this.orderHead * 2 > this.order.length) {
      this.order.splice(0, this.orderHead);
      this.orderHead = 0;
    }
    return out;
  }

  removeWorker(workerId: bigint): number[] {
    const out: number[] = [];
    for (const [handle, b] of this.bookings) if (this.ranks.get(b.rankKey)?.workerId === workerId) out.push(handle);
    for (const handle of out) this.free(handle);
    return out;
  }

  snapshot(): RawRankLoad[] {
    return [...this.ranks.values()]
      .map((l) => ({
        workerId: l.workerId,
        dpRank: l.dpRank,
        activePrefillTokens: l.prefillTokens,
        activeBlocks: activeBlocks(l),
        requests: l.requests,
      }))
      .sort((a, b) => (a.workerId < b.workerId ? -1 : a.workerId > b.workerId ? 1 : a.dpRank - b.dpRank));
  }
}
