/**
 * The receiving half of the load sync: peers' bookings applied to this router's load as remote
 * load, per peer, idempotently and in any order.
 *
 * - Each booking is known by (peer, instance, key); a duplicate is ignored, a free that overtakes
 *   its booking leaves a tombstone so the late booking is ignored, a prefill completion that
 *   overtakes it is remembered.
 * - A peer unheard for `leaseMs` (this replica's clock: durations only, never a peer's wall
 *   time, so clock skew cannot matter) is presumed dead and all its load is dropped.
 * - A full state (`state` messages, all parts) is authoritative as of its sequence number: what
 *   the peer booked before it and is not in it was freed in a message this replica missed.
 */

import type { WireBooking, WireMessage } from './wire.js';

/** What the sync does to this router's load. @internal */
export interface LoadLedger {
  /** Books remote load; returns its handle, or undefined when the router refuses it (counted). */
  book(b: WireBooking, prefillDone: boolean): number | undefined;
  prefillCompleted(handle: number): void;
  free(handle: number): void;
  /** Renews the local expiry lease of a remote booking (its owner is alive). */
  touch(handle: number): void;
  now(): number;
}

interface Entry {
  handle: number | undefined;
  /** Sequence number of the message that booked it (a state's, for bookings learnt from one). */
  bookedSeq: number;
  prefilled: boolean;
  freed: boolean;
  /** When this replica last changed the entry (tombstones and early prefills are dropped later). */
  at: number;
}

interface Peer {
  replicaId: string;
  instance: number;
  lastHeardAt: number;
  lastRenewAt: number;
  maxSeq: number;
  entries: Map<number, Entry>;
  booked: number;
  /** Parts of the state being received. */
  state: { seq: number; parts: Set<number>; keys: Set<number> } | undefined;
  /** Heartbeats in a row whose in-flight count disagreed with what this replica holds. */
  mismatches: number;
  lastStateRequestAt: number;
}

/** Counters of the receiving side. @internal */
export interface PeerCounters {
  /** Peers' bookings added to this replica's load. */
  bookingsApplied: number;
  /** Changes seen twice (ignored). */
  duplicates: number;
  /** Changes that overtook their booking (a free or prefill before the booking). */
  reordered: number;
  /** Sequence gaps in a peer's messages: lost messages (a state was requested). */
  gaps: number;
  /** Complete peer states applied. */
  statesApplied: number;
  /** Peers' bookings freed by a state because their free was lost. */
  repaired: number;
  /** Peers dropped because their lease ran out (crashed, partitioned, NATS down). */
  leaseExpiries: number;
  /** Bookings dropped with those peers. */
  expiredBookings: number;
  /** Peers' bookings the router refused (a rank it cannot book). */
  refused: number;
}

/** @internal */
export class PeerLoad {
  private readonly peers = new Map<string, Peer>();
  private readonly byHandle = new Map<number, { peer: Peer; key: number }>();
  readonly counters: PeerCounters = {
    bookingsApplied: 0,
    duplicates: 0,
    reordered: 0,
    gaps: 0,
    statesApplied: 0,
    repaired: 0,
    leaseExpiries: 0,
    expiredBookings: 0,
    refused: 0,
  };

  /**
   * @param requestState asks one peer for its whole state (after a gap or a disagreeing heartbeat).
   * @param renewEveryMs how often a live peer's bookings have their local expiry renewed.
   */
  constructor(
    private readonly ledger: LoadLedger,
    private readonly leaseMs: number,
    private readonly renewEveryMs: number,
    private readonly requestState: (replicaId: string, instance: number) => void,
  ) {}

  /** Peers currently heard from. */
  get peerCount(): number {
    return this.peers.size;
  }

  /** Remote bookings held. */
  get inFlight(): number {
    return this.byHandle.size;
  }

  owns(handle: number): boolean {
    return this.byHandle.has(handle);
  }

  /** The router dropped a remote booking itself (worker removed, local expiry): forget it. */
  dropped(handle: number): void {
    const ref = this.byHandle.get(handle);
    if (!ref) return;
    this.byHandle.delete(handle);
    const e = ref.peer.entries.get(ref.key);
    if (e) {
      e.handle = undefined;
      e.freed = true;
      e.at = this.ledger.now();
      ref.peer.booked--;
    }
  }

  private peer(m: WireMessage, now: number): Peer {
    const id = `${m.replicaId}\u0000${m.instance}`;
    let p = this.peers.get(id);
    if (!p) {
      p = {
        replicaId: m.replicaId,
        instance: m.instance,
        lastHeardAt: now,
        lastRenewAt: now,
        maxSeq: m.seq - 1,
        entries: new Map(),
        booked: 0,
        state: undefined,
        mismatches: 0,
        lastStateRequestAt: Number.NEGATIVE_INFINITY,
      };
      this.peers.set(id, p);
    }
    return p;
  }

  private askState(p: Peer, now: number): void {
    if (now - p.lastStateRequestAt < this.leaseMs / 4) return;
    p.lastStateRequestAt = now;
    this.requestState(p.replicaId, p.instance);
  }

  /** Applies one message from a peer. */
  receive(m: WireMessage): void {
    const now = this.ledger.now();
    const isNew = !this.peers.has(`${m.replicaId}\u0000${m.instance}`);
    const p = this.peer(m, now);
    p.lastHeardAt = now;
    if (m.seq > p.maxSeq + 1 && !isNew && m.kind !== 'state') {
      this.counters.gaps++;
      this.askState(p, now);
    }
    p.maxSeq = Math.max(p.maxSeq, m.seq);
    switch (m.kind) {
      case 'ops':
        for (const op of m.ops) {
          if (op.op === 'book') this.book(p, op.booking, m.seq, now);
          else if (op.op === 'prefill') this.prefill(p, op.key, now);
          else this.free(p, op.key, now);
        }
        break;
      case 'heartbeat':
        this.heartbeat(p, m.inFlight, now);
        break;
      case 'state':
        this.state(p, m.seq, m.part, m.parts, m.bookings, now);
        break;
      case 'leave':
        this.drop(p);
        break;
      case 'join':
      case 'sessions': // the sync hands bindings to session affinity; here they only prove the peer alive
        break;
    }
  }

  private book(p: Peer, b: WireBooking, seq: number, now: number): void {
    const e = p.entries.get(b.key);
    if (e && (e.handle !== undefined || e.freed)) {
      if (e.freed && e.handle === undefined && e.bookedSeq < 0) this.counters.reordered++;
      else this.counters.duplicates++;
      return;
    }
    const prefilled = (e?.prefilled ?? false) || b.prefillTokens === 0;
    const handle = this.ledger.book(b, prefilled);
    if (handle === undefined) {
      this.counters.refused++;
      return;
    }
    p.entries.set(b.key, { handle, bookedSeq: seq, prefilled, freed: false, at: now });
    this.byHandle.set(handle, { peer: p, key: b.key });
    p.booked++;
    this.counters.bookingsApplied++;
  }

  private prefill(p: Peer, key: number, now: number): void {
    const e = p.entries.get(key);
    if (!e) {
      this.overtaken(p, key, now, false);
      return;
    }
    if (e.prefilled || e.handle === undefined) {
      this.counters.duplicates++;
      return;
    }
    e.prefilled = true;
    this.ledger.prefillCompleted(e.handle);
  }

  private free(p: Peer, key: number, now: number): void {
    const e = p.entries.get(key);
    if (!e) {
      this.overtaken(p, key, now, true);
      return;
    }
    if (e.freed) {
      this.counters.duplicates++;
      return;
    }
    this.release(p, e, now);
  }

  /**
   * A prefill completion or free that overtook its booking: remembered, so the late booking
   * arrives already prefilled, or (freed: a tombstone) is a no-op.
   */
  private overtaken(p: Peer, key: number, now: number, freed: boolean): void {
    p.entries.set(key, { handle: undefined, bookedSeq: -1, prefilled: true, freed, at: now });
    this.counters.reordered++;
  }

  private release(p: Peer, e: Entry, now: number): void {
    if (e.handle !== undefined) {
      this.byHandle.delete(e.handle);
      this.ledger.free(e.handle);
      p.booked--;
    }
    e.handle = undefined;
    e.freed = true;
    e.at = now;
  }

  private heartbeat(p: Peer, inFlight: number, now: number): void {
    if (inFlight !== p.booked) {
      // Two disagreeing heartbeats in a row (one may cross a change in flight): resynchronise.
      if (++p.mismatches >= 2) {
        p.mismatches = 0;
        this.askState(p, now);
      }
    } else {
      p.mismatches = 0;
    }
  }

  private state(p: Peer, seq: number, part: number, parts: number, bookings: WireBooking[], now: number): void {
    if (!p.state || p.state.seq < seq) p.state = { seq, parts: new Set(), keys: new Set() };
    else if (p.state.seq > seq) return; // an older state overtaken by a newer one
    const s = p.state;
    s.parts.add(part);
    for (const b of bookings) {
      s.keys.add(b.key);
      const e = p.entries.get(b.key);
      if (e?.handle !== undefined && !e.prefilled && b.prefillTokens === 0) this.prefill(p, b.key, now);
      else if (!e || (e.handle === undefined && !e.freed)) this.book(p, b, seq, now);
    }
    if (s.parts.size < parts) return;
    // Complete: bookings made before the state and absent from it were freed in a lost message.
    for (const e of [...p.entries.entries()]) {
      const [key, entry] = e;
      if (entry.handle !== undefined && entry.bookedSeq < seq && !s.keys.has(key)) {
        this.release(p, entry, now);
        this.counters.repaired++;
      }
    }
    p.state = undefined;
    this.counters.statesApplied++;
  }

  private drop(p: Peer): number {
    let n = 0;
    for (const e of p.entries.values()) {
      if (e.handle === undefined) continue;
      this.byHandle.delete(e.handle);
      this.ledger.free(e.handle);
      n++;
    }
    this.peers.delete(`${p.replicaId}\u0000${p.instance}`);
    return n;
  }

  /**
   * Drops peers whose lease ran out, forgets old tombstones and renews live peers' bookings.
   * Returns how many bookings were dropped.
   */
  sweep(): number {
    const now = this.ledger.now();
    let dropped = 0;
    for (const p of [...this.peers.values()]) {
      if (now - p.lastHeardAt > this.leaseMs) {
        this.counters.leaseExpiries++;
        const n = this.drop(p);
        this.counters.expiredBookings += n;
        dropped += n;
        continue;
      }
      for (const [key, e] of p.entries) if (e.handle === undefined && now - e.at > 2 * this.leaseMs) p.entries.delete(key);
      if (now - p.lastRenewAt >= this.renewEveryMs) {
        p.lastRenewAt = now;
        for (const e of p.entries.values()) if (e.handle !== undefined) this.ledger.touch(e.handle);
      }
    }
    return dropped;
  }

  /** Drops every peer's load (the router closes). */
  clear(): void {
    for (const p of [...this.peers.values()]) this.drop(p);
  }
}
