/**
 * The replay's events in (at, seq) order: deterministic for simultaneous events. The events
 * known up front (the trace's arrivals) wait in a sorted array; a binary min-heap holds the rest
 * (engine passes, loads that end, later turns of sessions, handoffs), so it stays as small as the fleet
 * instead of as long as the trace. Mirrored by `kvroute_core::replay::event_queue`.
 * @internal
 * @module
 */

/**
 * What happens: an arrival (of request `subject`), the end of a pass (of rank `subject`), the
 * end of the first load from host memory of a rank (`subject`) that had nothing else to run, or
 * a disaggregated request's KV reaching the decode pool (request `subject`).
 */
export type SimEventKind = 'arrival' | 'pass' | 'load' | 'handoff' | 'transfer';

export interface SimEvent {
  at: number;
  seq: number;
  kind: SimEventKind;
  subject: number;
}

function less(a: SimEvent, b: SimEvent): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}

export class EventQueue {
  private readonly heap: SimEvent[] = [];
  private backlog: SimEvent[] = [];
  private head = 0;
  private seq = 0;

  /** Queues the arrivals known up front; call before any `push`. */
  load(at: Float64Array, uids: Uint32Array): void {
    const events: SimEvent[] = Array.from(uids, (uid, i) => ({ at: at[i], seq: this.seq++, kind: 'arrival', subject: uid }));
    this.backlog = events.sort((a, b) => a.at - b.at || a.seq - b.seq);
    this.head = 0;
  }

  push(at: number, kind: SimEventKind, subject: number): void {
    const h = this.heap;
    h.push({ at, seq: this.seq++, kind, subject });
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
