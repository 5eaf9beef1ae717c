/**
 * A broadcast transport for replica tests that delivers like a real message bus across
 * publishers: each message reaches each other member after its own random delay, so two members
 * can see two publishers' messages in opposite orders, while one publisher's messages still
 * arrive in the order it sent them (as NATS keeps them). Delivery happens at `deliverDue()`, on
 * the test's clock; seeded, so a failure replays.
 */

import type { ReplicaTransport, ReplicaTransportHandlers } from '../../ts/index.js';
import type { Rng } from './random.js';

interface InTransit {
  at: number;
  seq: number;
  to: Member;
  data: Uint8Array;
}

class Member implements ReplicaTransport {
  readonly synchronous = true;
  handlers: ReplicaTransportHandlers | undefined;

  constructor(private readonly bus: JitterBus) {}

  start(handlers: ReplicaTransportHandlers): void {
    this.handlers = handlers;
    this.bus.join(this);
    handlers.onStatus(true);
  }

  publish(data: Uint8Array): void {
    this.bus.send(this, data);
  }

  async close(): Promise<void> {
    this.bus.leave(this);
  }
}

export class JitterBus {
  private readonly members = new Set<Member>();
  private queue: InTransit[] = [];
  private seq = 0;
  /** When the last message from one member to another arrives (per-publisher order). */
  private readonly lastAt = new Map<Member, Map<Member, number>>();

  /** Each delay is `minMs` plus up to `jitterMs` more, drawn from `rng`. */
  constructor(
    private readonly now: () => number,
    private readonly rng: Rng,
    private readonly minMs: number,
    private readonly jitterMs: number,
  ) {}

  transport(): ReplicaTransport {
    return new Member(this);
  }

  /** Messages not delivered yet. */
  pending(): number {
    return this.queue.length;
  }

  /** Delivers everything on its way, calling `advance` (which moves the clock) before each round. */
  settle(advance: () => void): void {
    while (this.pending() > 0) {
      advance();
      this.deliverDue();
    }
  }

  /** Delivers every message due by now, in arrival order. */
  deliverDue(): void {
    const now = this.now();
    for (;;) {
      const due = this.queue.filter((m) => m.at <= now);
      if (due.length === 0) return;
      due.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = due[0];
      this.queue = this.queue.filter((m) => m !== next);
      if (this.members.has(next.to)) next.to.handlers?.onMessage(next.data);
    }
  }

  join(m: Member): void {
    this.members.add(m);
  }

  leave(m: Member): void {
    this.members.delete(m);
  }

  send(from: Member, data: Uint8Array): void {
    const sent = this.lastAt.get(from) ?? new Map<Member, number>();
    this.lastAt.set(from, sent);
    for (const to of this.members) {
      if (to === from) continue;
      const at = Math.max(this.now() + this.minMs + this.rng.int(this.jitterMs + 1), sent.get(to) ?? 0);
      sent.set(to, at);
      this.queue.push({ at, seq: this.seq++, to, data });
    }
  }
}
