/**
 * Expiry times of predictions: a binary min-heap with lazy deletion (a refresh pushes a new
 * entry; stale ones are skipped when popped), compacted each time it doubles. One entry per
 * prediction, at its deepest block, as in the native index (`expiry.rs`, which explains why the
 * blocks above it stay covered): the blocks above it with the same expiry expire with it.
 * @internal
 * @module
 */

import type { RankState, TrieNode } from './trie.js';

interface Entry {
  at: number;
  rank: RankState;
  node: TrieNode;
}

const FIRST_COMPACTION = 4096;

export class ExpiryHeap {
  private heap: Entry[] = [];
  private nextCompaction = FIRST_COMPACTION;

  get size(): number {
    return this.heap.length;
  }

  push(at: number, rank: RankState, node: TrieNode, liveRanks: () => Iterable<RankState>): void {
    this.heap.push({ at, rank, node });
    this.up(this.heap.length - 1);
    if (this.heap.length >= this.nextCompaction) {
      const live = new Set(liveRanks());
      this.compact(live);
      this.nextCompaction = Math.max(2 * this.heap.length, FIRST_COMPACTION);
    }
  }

  /** The next due prediction that is still current, or undefined. */
  popDue(now: number, isLive: (rank: RankState) => boolean): Entry | undefined {
    while (this.heap.length > 0 && this.heap[0].at <= now) {
      const top = this.pop();
      if (isLive(top.rank) && top.rank.predicted.get(top.node) === top.at) return top;
    }
    return undefined;
  }

  private compact(live: Set<RankState>): void {
    const kept = this.heap.filter((e) => live.has(e.rank) && e.rank.predicted.get(e.node) === e.at);
    this.heap = [];
    for (const e of kept) {
      this.heap.push(e);
      this.up(this.heap.length - 1);
    }
  }

  private pop(): Entry {
    const top = this.heap[0];
    const last = this.heap.pop() as Entry;
    if (this.heap.length > 0) {
      this.heap[0] = last;
      this.down(0);
    }
    return top;
  }

  private up(i: number): void {
    const h = this.heap;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (h[p].at <= h[i].at) break;
      [h[p], h[i]] = [h[i], h[p]];
      i = p;
    }
  }

  private down(i: number): void {
    const h = this.heap;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && h[l].at < h[m].at) m = l;
      if (r < h.length && h[r].at < h[m].at) m = r;
      if (m === i) return;
      [h[m], h[i]] = [h[i], h[m]];
      i = m;
    }
  }
}
