/**
 * The pure-JS KV index. Same semantics as kvroute-core's tree (see its module docs), applied
 * synchronously on the caller's thread: `flush()` has nothing to wait for.
 * @internal
 * @module
 */

import type { IndexBackend, RawIndexStats, RawScore } from '../../backend-types.js';
import {
  FLAG_DEVICE_TIER,
  FLAG_HAS_PARENT,
  KIND_CLEARED,
  KIND_REMOVED,
  KIND_STORED,
  lowerTierOf,
  PackedWriter,
  tierFlags,
} from '../../events/packed.js';
import { jsHashing } from '../hashing.js';
import { JsIngest } from '../ingest/engine.js';
import { LowerTiers, rankKey as lowerRankKey, pathPosition } from '../tiers/lower-tiers.js';
import { ExpiryHeap } from './expiry.js';
import { compareBigInt, compareRanks, RankState, TrieNode } from './trie.js';

type Outcome = 'changed' | 'duplicate' | 'parent_block_not_found' | 'invalid_block';

export class JsIndex implements IndexBackend {
  private readonly root = new TrieNode(0n, null);
  private readonly ranks = new Map<string, RankState>();
  private readonly expiry = new ExpiryHeap();
  private nodeCount = 0;
  private heldBlocks = 0;
  private readonly counters = {
    stored: 0,
    removed: 0,
    cleared: 0,
    parentBlockNotFound: 0,
    blockNotFound: 0,
    invalidBlock: 0,
    ignoredTier: 0,
    duplicateStores: 0,
    expiredBlocks: 0,
  };

  private ingestion: JsIngest | undefined;
  /** Host, disk and external tiers (kept apart from the trie, as the native index keeps them). */
  private readonly lower = new LowerTiers();

  ingest(blockSize: number): JsIngest {
    this.ingestion ??= new JsIngest(this, blockSize);
    return this.ingestion;
  }

  applyPacked(meta: Uint32Array, words: BigUint64Array, nowMs: number): void {
    let w = 0;
    for (let m = 0; m < meta.length; m += 4) {
      const kind = meta[m];
      const flags = meta[m + 2];
      const count = meta[m + 3];
      const rankKey = words[w];
      w += 2;
      this.expire(nowMs);
      const lower = lowerTierOf(flags);
      if (lower !== undefined) {
        w = this.applyLower(kind, lower, words, w, rankKey, meta[m + 1], flags, count);
        continue;
      }
      const rank = this.rank(rankKey, meta[m + 1]);
      if (kind === KIND_STORED) {
        const s = readStored(words, w, flags, count);
        w = s.next;
        this.countStore(this.store(rank, s.parent, s.exts, s.locals, undefined), count);
      } else if (kind === KIND_REMOVED) {
        for (let i = 0; i < count; i++) {
          if (!this.removeNamed(rank, words[w++])) this.counters.blockNotFound++;
        }
        this.counters.removed++;
      } else if (kind === KIND_CLEARED) {
        this.clear(rank);
        this.lower.clearRank(lowerRankKey(rank.workerId, rank.dpRank));
        this.counters.cleared++;
      }
    }
  }

  /** A lower tier's event (see kvroute-core's `tiers`); returns where the next event's words start. */
  private applyLower(
    kind: number,
    tier: number,
    words: BigUint64Array,
    at: number,
    workerId: bigint,
    dpRank: number,
    flags: number,
    count: number,
  ): number {
    let w = at;
    const rank = lowerRankKey(workerId, dpRank);
    if (kind === KIND_STORED) {
      const s = readStored(words, w, flags, count);
      w = s.next;
      this.lower.store(rank, tier, s.parent, s.exts, s.locals, (name) => this.devicePosition(workerId, dpRank, name));
    } else if (kind === KIND_REMOVED) {
      this.lower.remove(rank, tier, Array.from(words.subarray(w, w + count)));
      w += count;
    } else if (kind === KIND_CLEARED) {
      this.lower.clearRank(rank);
    }
    return w;
  }

  /** The position (sequence hash) of the block a rank names `name` in the trie, if it holds one. */
  private devicePosition(workerId: bigint, dpRank: number, name: bigint): bigint | undefined {
    const path: bigint[] = [];
    for (let n = this.ranks.get(`${workerId}:${dpRank}`)?.lookup.get(name); n && n !== this.root; n = n.parent ?? undefined)
      path.push(n.local);
    return pathPosition(path.reverse());
  }

  /** Whether any lower tier holds a block. */
  hasLowerTiers(): boolean {
    return !this.lower.isEmpty();
  }

  /**
   * Per rank (`worker:dp` keys), the blocks its host, disk and external tiers add past its
   * device overlap `device[i]` (`positions`: the query's sequence hashes); `undefined` while no lower tier holds a block.
   */
  lowerTierReach(positions: BigUint64Array, ranks: readonly string[], device: readonly number[]): [number, number, number][] | undefined {
    if (this.lower.isEmpty()) return undefined;
    return ranks.map((rank, i) => this.lower.reach(positions, rank, device[i]));
  }

  tieredMatches(locals: BigUint64Array, nowMs: number, workers: BigUint64Array, ranks: Uint32Array, out: Float64Array): void {
    const device = new Map<string, number>();
    for (const s of this.findMatches(locals, nowMs)) device.set(lowerRankKey(s.workerId, s.dpRank), s.blocks);
    const keys = Array.from(ranks, (r, i) => lowerRankKey(workers[i], r));
    const overlaps = keys.map((k) => device.get(k) ?? 0);
    const reach = this.lowerTierReach(jsHashing.sequenceHashes(locals), keys, overlaps);
    for (let i = 0; i < keys.length; i++) out.set([overlaps[i], ...(reach?.[i] ?? [0, 0, 0])], 4 * i);
  }

  private countStore(outcome: Outcome, blocks: number): void {
    if (outcome === 'parent_block_not_found') this.counters.parentBlockNotFound++;
    else if (outcome === 'invalid_block') this.counters.invalidBlock++;
    else {
      this.counters.stored++;
      if (outcome === 'duplicate' && blocks > 0) this.counters.duplicateStores++;
    }
  }

  private rank(workerId: bigint, dpRank: number): RankState {
    const key = `${workerId}:${dpRank}`;
    let r = this.ranks.get(key);
    if (!r) {
      r = new RankState(workerId, dpRank);
      this.ranks.set(key, r);
    }
    return r;
  }

  private store(rank: RankState, parent: bigint | undefined, exts: bigint[], locals: bigint[], predicted: number | undefined): Outcome {
    let start = this.root;
    if (parent !== undefined) {
      const p = rank.lookup.get(parent);
      if (!p) return 'parent_block_not_found';
      start = p;
      if (exts.includes(parent)) return 'invalid_block';
    }
    if (new Set(exts).size !== exts.length) return 'invalid_block';
    let at = start;
    for (let i = 0; i < exts.length; i++) {
      const next = at.children.get(locals[i]);
      if (!next) {
        for (let j = i; j < exts.length; j++) if (rank.lookup.has(exts[j])) return 'invalid_block';
        break;
      }
      const named = rank.lookup.get(exts[i]);
      if (named && named !== next) return 'invalid_block';
      at = next;
    }
    let changed = false;
    at = start;
    for (let i = 0; i < exts.length; i++) {
      let next = at.children.get(locals[i]);
      if (!next) {
        next = new TrieNode(locals[i], at);
        at.children.set(locals[i], next);
        this.nodeCount++;
      }
      if (!next.holders.has(rank)) {
        next.holders.add(rank);
        rank.names.set(next, exts[i]);
        rank.lookup.set(exts[i], next);
        this.heldBlocks++;
        if (predicted !== undefined) rank.predicted.set(next, predicted);
        changed = true;
      } else if (predicted !== undefined) {
        // A prediction never renames a block the engine named; it refreshes predictions only.
        const current = rank.predicted.get(next);
        // Never shortened, so expiry never increases along a path (even if the clock goes back).
        if (current !== undefined) rank.predicted.set(next, Math.max(current, predicted));
      } else {
        rank.predicted.delete(next);
        const old = rank.names.get(next) as bigint;
        if (old !== exts[i]) {
          rank.lookup.delete(old);
          rank.lookup.set(exts[i], next);
          rank.names.set(next, exts[i]);
          changed = true;
        }
      }
      at = next;
    }
    // One expiry entry for the whole prediction, at its deepest block (see expiry.ts).
    const deepest = predicted === undefined ? undefined : rank.predicted.get(at);
    if (deepest !== undefined) this.queueExpiry(rank, at, deepest);
    // A real event proves the parent chain is held: it is no longer a prediction.
    if (predicted === undefined && rank.predicted.size > 0) {
      for (let n: TrieNode | null = start; n && n !== this.root && rank.predicted.delete(n); n = n.parent);
    }
    return changed ? 'changed' : 'duplicate';
  }

  private queueExpiry(rank: RankState, node: TrieNode, at: number): void {
    this.expiry.push(at, rank, node, () => this.ranks.values());
  }

  private removeNamed(rank: RankState, ext: bigint): boolean {
    const node = rank.lookup.get(ext);
    if (!node) return false;
    this.cut(rank, node);
    return true;
  }

  /** Removes `top` and everything the rank holds below it, children first. */
  private cut(rank: RankState, top: TrieNode): void {
    const order: TrieNode[] = [];
    const stack = [top];
    while (stack.length > 0) {
      const n = stack.pop() as TrieNode;
      order.push(n);
      for (const c of n.children.values()) if (c.holders.has(rank)) stack.push(c);
    }
    for (let i = order.length - 1; i >= 0; i--) {
      const n = order[i];
      n.holders.delete(rank);
      rank.lookup.delete(rank.names.get(n) as bigint);
      rank.names.delete(n);
      rank.predicted.delete(n);
      this.heldBlocks--;
      if (n.holders.size === 0) {
        n.parent?.children.delete(n.local);
        this.nodeCount--;
      }
    }
    // The expiry entries under the cut are gone; the deepest predicted block left covers the
    // blocks above it (see expiry.ts).
    const parent = top.parent;
    const above = parent ? rank.predicted.get(parent) : undefined;
    if (parent && above !== undefined) this.queueExpiry(rank, parent, above);
  }

  private clear(rank: RankState): void {
    for (const child of [...this.root.children.values()]) if (child.holders.has(rank)) this.cut(rank, child);
  }

  private expire(nowMs: number): void {
    if (this.expiry.size === 0) return;
    const isLive = (r: RankState) => this.ranks.get(`${r.workerId}:${r.dpRank}`) === r;
    for (let e = this.expiry.popDue(nowMs, isLive); e; e = this.expiry.popDue(nowMs, isLive)) {
      const before = this.heldBlocks;
      // The expired blocks of the path are a suffix: cut at its top.
      let top = e.node;
      for (let up = top.parent; up; up = up.parent) {
        const at = e.rank.predicted.get(up);
        if (at === undefined || at > nowMs) break;
        top = up;
      }
      this.cut(e.rank, top);
      this.counters.expiredBlocks += before - this.heldBlocks;
    }
  }

  removeWorker(workerId: bigint, dpRank: number | undefined): void {
    this.lower.removeWorker(workerId, dpRank);
    for (const [key, r] of [...this.ranks]) {
      if (r.workerId === workerId && (dpRank === undefined || r.dpRank === dpRank)) {
        this.clear(r);
        this.ranks.delete(key);
      }
    }
  }

  recordRouting(workerId: bigint, dpRank: number, locals: BigUint64Array, nowMs: number, expiresAtMs: number): void {
    this.expire(nowMs);
    const seq = jsHashing.sequenceHashes(locals);
    const outcome = this.store(this.rank(workerId, dpRank), undefined, Array.from(seq), Array.from(locals), expiresAtMs);
    if (outcome === 'invalid_block') this.counters.invalidBlock++;
  }

  findMatches(locals: BigUint64Array, nowMs: number): RawScore[] {
    if (locals.length === 0) return [];
    const first = this.root.children.get(locals[0]);
    if (!first) return [];
    const trackPath = this.expiry.size > 0;
    const path: TrieNode[] = [first];
    const scores = new Map<RankState, number>();
    let active = Array.from(first.holders);
    let depth = 1;
    let node = first;
    for (let i = 1; i < locals.length; i++) {
      const child = node.children.get(locals[i]);
      if (!child) break;
      // Holders only shrink along a path, so equal sizes mean the same set.
      if (child.holders.size !== active.length) {
        for (const r of active) if (!child.holders.has(r)) scores.set(r, depth);
        active = Array.from(child.holders);
      }
      depth++;
      node = child;
      if (trackPath) path.push(child);
    }
    for (const r of active) scores.set(r, depth);
    const out: RawScore[] = [];
    for (const [r, held] of scores) {
      const blocks = trackPath ? unexpiredPrefix(path, held, r, nowMs) : held;
      if (blocks > 0) out.push({ workerId: r.workerId, dpRank: r.dpRank, blocks, treeSize: r.lookup.size });
    }
    out.sort((a, b) => b.blocks - a.blocks || compareBigInt(a.workerId, b.workerId) || a.dpRank - b.dpRank);
    return out;
  }

  /** Blocks held by a rank (0 when unknown). */
  treeSize(workerId: bigint, dpRank: number): number {
    return this.ranks.get(`${workerId}:${dpRank}`)?.lookup.size ?? 0;
  }

  flush(): Promise<void> {
    return Promise.resolve();
  }

  flushSync(): void {}

  /** Events apply on the caller's thread, so nothing is ever queued. */
  pending(): number {
    return 0;
  }

  dump(): { meta: Uint32Array; words: BigUint64Array } {
    const w = new PackedWriter();
    for (const rank of [...this.ranks.values()].sort(compareRanks)) dumpRank(rank, this.root, w);
    // The lower tiers, one root store per run, headed by a block in position form (see
    // kvroute-core's `LowerTierState::dump`).
    for (const { workerId, dpRank, tier, run } of this.lower.runs()) {
      w.pushMeta(KIND_STORED, dpRank, tierFlags(tier), run.length);
      w.pushBigInt(workerId);
      w.pushBigInt(0n);
      for (const [ext, local] of run) {
        w.pushBigInt(ext);
        w.pushBigInt(local);
      }
    }
    return w.finish();
  }

  stats(): RawIndexStats {
    const workers = new Set<bigint>();
    for (const r of this.ranks.values()) workers.add(r.workerId);
    return {
      workers: workers.size,
      ranks: this.ranks.size,
      blocks: this.heldBlocks,
      treeNodes: this.nodeCount,
      treeBlocks: this.nodeCount,
      // A rough model of V8's footprint: a trie node with its Map and Set, plus per held block
      // two map entries (lookup, names), plus per lower-tier block its two map entries and its
      // record (about 380 bytes, measured with 200,000 host blocks).
      memoryBytes: this.nodeCount * 400 + this.heldBlocks * 120 + this.lower.blockCount() * 380,
      pending: 0,
      ...this.counters,
      lowerTiers: this.lower.stats(),
    };
  }

  close(): void {}
}

/** A packed Stored event's parent and (name, local hash) pairs from `at`, and where the next event starts. */
function readStored(words: BigUint64Array, at: number, flags: number, count: number) {
  let w = at;
  const parent = flags & FLAG_HAS_PARENT ? words[w++] : undefined;
  const exts: bigint[] = new Array(count);
  const locals: bigint[] = new Array(count);
  for (let i = 0; i < count; i++) {
    exts[i] = words[w++];
    locals[i] = words[w++];
  }
  return { parent, exts, locals, next: w };
}

/** Expired predictions form a suffix of a rank's path (see matches.rs); binary-search its start. */
function unexpiredPrefix(path: TrieNode[], held: number, rank: RankState, nowMs: number): number {
  if (rank.predicted.size === 0) return held;
  let lo = 0;
  let hi = held;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const at = rank.predicted.get(path[mid]);
    if (at !== undefined && at <= nowMs) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** Same walk and order as kvroute-core's dump, so both backends emit identical events. */
function dumpRank(rank: RankState, root: TrieNode, w: PackedWriter): void {
  const heldChildren = (n: TrieNode) =>
    [...n.children.entries()]
      .filter(([, c]) => c.holders.has(rank))
      .sort((a, b) => compareBigInt(a[0], b[0]))
      .map(([, c]) => c);
  const stack: Array<[TrieNode, bigint | undefined]> = heldChildren(root)
    .reverse()
    .map((c) => [c, undefined]);
  while (stack.length > 0) {
    const [start, parent] = stack.pop() as [TrieNode, bigint | undefined];
    const blocks: Array<[bigint, bigint]> = [];
    let node = start;
    let next: TrieNode[] = [];
    for (;;) {
      if (rank.predicted.has(node)) break;
      blocks.push([rank.names.get(node) as bigint, node.local]);
      const children = heldChildren(node);
      if (children.length !== 1) {
        next = children;
        break;
      }
      node = children[0];
    }
    if (blocks.length === 0) continue;
    w.pushMeta(KIND_STORED, rank.dpRank, FLAG_DEVICE_TIER | (parent === undefined ? 0 : FLAG_HAS_PARENT), blocks.length);
    w.pushBigInt(rank.workerId);
    w.pushBigInt(0n);
    if (parent !== undefined) w.pushBigInt(parent);
    for (const [ext, local] of blocks) {
      w.pushBigInt(ext);
      w.pushBigInt(local);
    }
    const last = blocks[blocks.length - 1][0];
    for (let i = next.length - 1; i >= 0; i--) stack.push([next[i], last]);
  }
}
