/**
 * Requests waiting because every candidate is busy (see admission.ts for when they leave). Higher `priority` first; within a priority,
 * the policy's order: fcfs (oldest first), lcfs (newest first), or wspt (weighted shortest
 * processing time: `(1 + priority) / max(1, ISL − bestCachedTokens)`, highest first).
 * @internal
 * @module
 */

import type { QueuePolicy } from './options.js';

export interface Waiter<T> {
  item: T;
  priority: number;
  /** Higher is served first, within a priority. */
  score: number;
  seq: number;
}

function before<T>(a: Waiter<T>, b: Waiter<T>): boolean {
  if (a.priority !== b.priority) return a.priority > b.priority;
  if (a.score !== b.score) return a.score > b.score;
  return a.seq < b.seq;
}

export class WaitQueue<T> {
  private readonly waiting: Waiter<T>[] = [];
  private seq = 0;

  constructor(private readonly policy: QueuePolicy) {}

  get length(): number {
    return this.waiting.length;
  }

  /** The policy score of a request arriving now. */
  score(isl: number, bestCachedTokens: number, priority: number): number {
    if (this.policy === 'wspt') return (1 + Math.max(0, priority)) / Math.max(1, isl - bestCachedTokens);
    return this.policy === 'lcfs' ? this.seq : -this.seq;
  }

  push(item: T, priority: number, score: number): Waiter<T> {
    const w: Waiter<T> = { item, priority, score, seq: this.seq++ };
    let i = this.waiting.length;
    while (i > 0 && before(w, this.waiting[i - 1])) i--;
    this.waiting.splice(i, 0, w);
    return w;
  }

  /** The waiting requests in release order (a copy: the queue may change while it is walked). */
  inOrder(): Waiter<T>[] {
    return [...this.waiting];
  }

  remove(w: Waiter<T>): boolean {
    const i = this.waiting.indexOf(w);
    if (i < 0) return false;
    this.waiting.splice(i, 1);
    return true;
  }
}
