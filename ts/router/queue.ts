/**
 * Requests waiting because every candidate is busy, grouped by candidate set (see admission.ts
 * for when they leave). Release order: higher `priority` first; within a priority, the policy's
 * order: fcfs (oldest first), lcfs (newest first), or wspt (weighted shortest processing time:
 * `(1 + priority) / max(1, ISL − bestCachedTokens)`, highest first). Each group is kept in that
 * order, so a release pass looks at one request per group (its head), not at every waiting one.
 * @internal
 * @module
 */

import type { QueuePolicy } from './options.js';

export interface Waiter<T> {
  item: T;
  /** The candidate set it waits for: requests of one group have the same candidates. */
  group: string;
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
  private readonly groups = new Map<string, Waiter<T>[]>();
  private count = 0;
  private seq = 0;

  constructor(private readonly policy: QueuePolicy) {}

  get length(): number {
    return this.count;
  }

  /** The policy score of a request arriving now. */
  score(isl: number, bestCachedTokens: number, priority: number): number {
    if (this.policy === 'wspt') return (1 + Math.max(0, priority)) / Math.max(1, isl - bestCachedTokens);
    return this.policy === 'lcfs' ? this.seq : -this.seq;
  }

  push(item: T, group: string, priority: number, score: number): Waiter<T> {
    const w: Waiter<T> = { item, group, priority, score, seq: this.seq++ };
    const waiting = this.groups.get(group) ?? [];
    if (waiting.length === 0) this.groups.set(group, waiting);
    let i = waiting.length;
    while (i > 0 && before(w, waiting[i - 1])) i--;
    waiting.splice(i, 0, w);
    this.count++;
    return w;
  }

  /** Whether requests of this group wait. */
  waits(group: string): boolean {
    return this.groups.has(group);
  }

  /** The first waiting request of each group, in release order. */
  heads(): Waiter<T>[] {
    const heads = [...this.groups.values()].map((waiting) => waiting[0]);
    return heads.sort((a, b) => (before(a, b) ? -1 : 1));
  }

  /** Every waiting request (a copy: the queue may change while it is walked). */
  all(): Waiter<T>[] {
    return [...this.groups.values()].flat();
  }

  remove(w: Waiter<T>): boolean {
    const waiting = this.groups.get(w.group);
    const i = waiting ? waiting.indexOf(w) : -1;
    if (!waiting || i < 0) return false;
    waiting.splice(i, 1);
    if (waiting.length === 0) this.groups.delete(w.group);
    this.count--;
    return true;
  }
}
