/**
 * Session affinity (Dynamo's `router_session_affinity_ttl_secs` and `X-Dynamo-Session-ID`): the
 * first request of a session that is booked binds the session to its (worker, dp rank); later
 * requests of the session go there without choosing, so an agent's or a conversation's turns
 * stay where their KV cache grows even when a cost would send one elsewhere. A binding never
 * expires while one of its requests is in flight; once the last one ends, it lives `ttlMs` of
 * router clock more. A binding whose rank is gone or not allowed for a request is dropped, and
 * that request binds the session anew where it is routed.
 *
 * Router replicas share their bindings (see {@link SessionPeers}): a replica publishes a binding
 * when it makes one and when a request of the session starts or ends on it; a
 * peer adopts it unless it holds a later one. Each binding carries a Lamport stamp and the id of
 * the replica that made it, so two replicas that bind one session at once (both route its first
 * request by cost) settle on the same binding, the one with the higher (stamp, origin), whatever
 * order the messages arrive in; a rebinding after an invalidation has a higher stamp than the
 * binding it replaces, so it wins everywhere. A peer's binding lives `ttlMs` after the last
 * request start or end heard of, here or at any peer; a binding with a request in flight here is
 * published again every `ttlMs / 2` (at a heartbeat), so its peers' copies live as long as it is
 * in use.
 * @internal
 * @module
 */

import type { WireSession } from '../replicas/wire.js';

/** Where a session's requests go. */
export interface SessionTarget {
  workerId: bigint;
  dpRank: number;
}

/**
 * Session affinity's counters.
 * @group Router
 */
export interface SessionStats {
  /** Sessions bound now. */
  bound: number;
  /** Requests sent to their session's bound rank. */
  hits: number;
  /** Sessions bound by a request routed by cost (a first request, or one after its binding went). */
  bindings: number;
  /** Bindings dropped because their rank was gone or not allowed for a request of the session. */
  invalidated: number;
  /** Bindings dropped after `ttlMs` idle. */
  expired: number;
  /** Router replicas: peers' binding updates received (a binding made, used or idle at a peer). */
  peerUpdates: number;
  /** Sessions bound here by a peer's binding (none was held, or an earlier one it supersedes). */
  adopted: number;
  /** Of those, bindings held here to another rank that a peer's later binding replaced. */
  superseded: number;
  /** Peers' updates of a binding older than the one held here, or already idle past the TTL (ignored). */
  stalePeerUpdates: number;
  /** Bindings dropped to make room for a new one (`sessionAffinityMaxSessions` reached): the longest idle. */
  evicted: number;
  /** Sessions left unbound because every binding had a request in flight (the limit reached). */
  overflow: number;
}

/**
 * A session's binding, as `KvRouter.session()` reports it.
 * @group Router
 */
export interface SessionBinding {
  /** The worker the session's requests go to. */
  workerId: bigint;
  /** Its data-parallel rank. */
  dpRank: number;
  /** This router's requests of the session in flight. */
  inFlight: number;
  /** How long the session has been idle here, ms of router clock (0 while a request is in flight); it ends at the TTL. */
  idleMs: number;
  /** The router replica that made the binding ('' without replicas). */
  origin: string;
}

/** The replica sync's side of session affinity, when router replicas share bindings. */
export interface SessionPeers {
  /** This replica's id: the origin of the bindings it makes. */
  readonly origin: string;
  /** A session's binding was made, used or went idle here: tell the peers (its binding as it is when they are told). */
  publish(sessionId: string): void;
}

interface Binding extends SessionTarget {
  /** Requests of the session in flight on this binding. */
  active: number;
  /** Router clock when the last of them ended (meaningful while `active` is 0). */
  idleSince: number;
  /** Lamport stamp: a later binding of the session has a higher one. */
  stamp: number;
  /** The replica that made it ('' without replicas). */
  origin: string;
  /** Router clock when this replica last published it. */
  publishedAt: number;
}

/** Whether binding `a` supersedes binding `b` of the same session. */
function later(a: { stamp: number; origin: string }, b: { stamp: number; origin: string }): boolean {
  return a.stamp > b.stamp || (a.stamp === b.stamp && a.origin > b.origin);
}

export class SessionAffinity {
  private readonly sessions = new Map<string, Binding>();
  /** Where the next budgeted sweep resumes (a Map's iterator stays valid as entries come and go). */
  private sweepCursor: IterableIterator<[string, Binding]> | undefined;
  /** Bindings with a request in flight here, with their session (see `renew`). */
  private readonly inUse = new Map<Binding, string>();
  /** In-flight requests of a session, with the binding they count in. */
  private readonly requests = new Map<string, { sessionId: string; binding: Binding }>();
  private readonly counts = {
    hits: 0,
    bindings: 0,
    invalidated: 0,
    expired: 0,
    peerUpdates: 0,
    adopted: 0,
    superseded: 0,
    stalePeerUpdates: 0,
    evicted: 0,
    overflow: 0,
  };
  /** Lamport counter: above every stamp made or heard here. */
  private clock = 0;
  private peers: SessionPeers | undefined;

  /**
   * @param maxSessions bindings held at most; `sessions` is kept in order of last use (a binding
   * moves to the end when its last request ends), so the first idle one is the one to evict.
   */
  constructor(
    private readonly ttlMs: number,
    private readonly maxSessions = 100_000,
  ) {}

  /** Shares this router's bindings with its replicas' (see the module doc). */
  share(peers: SessionPeers): void {
    this.peers = peers;
  }

  /**
   * The rank a request of `sessionId` must go to, or undefined to route it by cost; `usable`
   * says whether a bound rank can take this request (registered, allowed).
   */
  target(sessionId: string, now: number, usable: (t: SessionTarget) => boolean): SessionTarget | undefined {
    const binding = this.live(sessionId, now);
    if (!binding) return undefined;
    if (!usable(binding)) {
      this.sessions.delete(sessionId);
      this.counts.invalidated++;
      return undefined;
    }
    this.counts.hits++;
    return { workerId: binding.workerId, dpRank: binding.dpRank };
  }

  /**
   * A request of `sessionId` was booked on (worker, rank): it binds the session if unbound. When
   * the session is bound elsewhere by then (the request waited in the queue for the session's
   * rank while a peer's later binding moved the session), that binding stands and this request
   * does not count in it.
   */
  booked(sessionId: string, requestId: string, workerId: bigint, dpRank: number, now: number): void {
    let binding = this.live(sessionId, now);
    if (!binding) {
      if (!this.room()) return;
      const origin = this.peers?.origin ?? '';
      binding = { workerId, dpRank, active: 0, idleSince: now, stamp: ++this.clock, origin, publishedAt: now };
      this.sessions.set(sessionId, binding);
      this.counts.bindings++;
    } else if (binding.workerId !== workerId || binding.dpRank !== dpRank) {
      return;
    }
    if (binding.active++ === 0) this.inUse.set(binding, sessionId);
    this.requests.set(requestId, { sessionId, binding });
    this.publish(sessionId, binding, now);
  }

  /** A request ended (freed, expired, dropped with its worker): its session idles once none is left. */
  released(requestId: string, now: number): void {
    const entry = this.requests.get(requestId);
    if (!entry) return;
    this.requests.delete(requestId);
    const { sessionId, binding } = entry;
    if (--binding.active === 0) {
      binding.idleSince = now;
      this.inUse.delete(binding);
      this.touch(sessionId, binding);
    }
    // Peers count the TTL from here too. A binding a peer's later one replaced is no one's business.
    if (this.sessions.get(sessionId) === binding) this.publish(sessionId, binding, now);
  }

  /**
   * Peers' bindings (made, used, gone idle, or a peer's whole table): each one is adopted unless
   * the binding held here is later; the one held here is refreshed by its own updates.
   */
  merge(updates: readonly WireSession[], now: number): void {
    for (const u of updates) {
      this.counts.peerUpdates++;
      this.clock = Math.max(this.clock, u.stamp);
      const held = this.live(u.sessionId, now);
      const idleSince = now - u.idleMs;
      const same = held !== undefined && u.stamp === held.stamp && u.origin === held.origin;
      if (held && !same && !later(u, held)) {
        this.counts.stalePeerUpdates++;
      } else if (held && held.workerId === u.workerId && held.dpRank === u.dpRank) {
        // The same binding (or a later one to the same rank): it was active at the peer.
        held.stamp = u.stamp;
        held.origin = u.origin;
        held.idleSince = Math.max(held.idleSince, idleSince);
        this.touch(u.sessionId, held);
      } else if (u.idleMs >= this.ttlMs) {
        this.counts.stalePeerUpdates++;
      } else if (held || this.room()) {
        if (held) this.counts.superseded++;
        this.counts.adopted++;
        const { workerId, dpRank, stamp, origin } = u;
        this.sessions.set(u.sessionId, { workerId, dpRank, active: 0, idleSince, stamp, origin, publishedAt: now });
      }
    }
  }

  /** A live binding, or undefined (none, or idle past the TTL). */
  binding(sessionId: string, now: number): SessionBinding | undefined {
    const b = this.live(sessionId, now);
    if (!b) return undefined;
    const { workerId, dpRank, origin } = b;
    return { workerId, dpRank, inFlight: b.active, idleMs: b.active > 0 ? 0 : now - b.idleSince, origin };
  }

  /** Sessions bound with a request in flight here, last published `ttlMs / 2` ago or more: to publish now. */
  renew(now: number): string[] {
    const out: string[] = [];
    for (const [b, sessionId] of this.inUse) {
      if (this.sessions.get(sessionId) !== b || now - b.publishedAt < this.ttlMs / 2) continue;
      b.publishedAt = now;
      out.push(sessionId);
    }
    return out;
  }

  /** The live bindings of these sessions, as the peers get them. */
  current(sessionIds: Iterable<string>, now: number): WireSession[] {
    const out: WireSession[] = [];
    for (const id of sessionIds) {
      const b = this.live(id, now);
      if (b) out.push(this.wire(id, b, now));
    }
    return out;
  }

  /** Every live binding, for a peer that joins. */
  table(now: number): WireSession[] {
    // A copy of the keys: looking a binding up drops it when it has expired.
    return this.current([...this.sessions.keys()], now);
  }

  /** The worker left: the sessions bound to it route by cost again (one already idle past the TTL counts as expired). */
  dropWorker(workerId: bigint, now: number): void {
    for (const [id, b] of this.sessions) {
      if (b.workerId !== workerId) continue;
      if (this.idleExpired(b, now)) this.drop(id);
      else {
        this.sessions.delete(id);
        this.counts.invalidated++;
      }
    }
  }

  /**
   * Drops bindings idle past the TTL (also done lazily on lookup), so memory holds live sessions.
   * With a `budget`, it looks at that many at most, resuming where the last call stopped: the
   * router's once-a-second sweep then costs the same at a hundred thousand sessions as at ten
   * (a full pass over 100,000 took 1.2 ms, a stall of the routing thread every second).
   */
  sweep(now: number, budget = Number.POSITIVE_INFINITY): void {
    if (budget === Number.POSITIVE_INFINITY) {
      for (const [id, b] of this.sessions) if (this.idleExpired(b, now)) this.drop(id);
      return;
    }
    this.sweepCursor ??= this.sessions.entries();
    for (let n = 0; n < budget; n++) {
      const next = this.sweepCursor.next();
      if (next.done) {
        this.sweepCursor = undefined;
        return;
      }
      const [id, b] = next.value;
      if (this.idleExpired(b, now)) this.drop(id);
    }
  }

  stats(): SessionStats {
    return { bound: this.sessions.size, ...this.counts };
  }

  /** Room for one more binding: at the limit, the binding idle the longest goes (false: every one is in use). */
  private room(): boolean {
    if (this.sessions.size < this.maxSessions) return true;
    for (const [id, b] of this.sessions) {
      if (b.active > 0) continue;
      this.sessions.delete(id);
      this.counts.evicted++;
      return true;
    }
    this.counts.overflow++;
    return false;
  }

  /** Moves a binding to the end of the eviction order (it was just used). */
  private touch(sessionId: string, b: Binding): void {
    if (this.sessions.get(sessionId) !== b) return;
    this.sessions.delete(sessionId);
    this.sessions.set(sessionId, b);
  }

  private wire(sessionId: string, b: Binding, now: number): WireSession {
    const idleMs = b.active > 0 ? 0 : Math.max(0, Math.floor(now - b.idleSince));
    return { sessionId, workerId: b.workerId, dpRank: b.dpRank, stamp: b.stamp, origin: b.origin, idleMs };
  }

  private publish(sessionId: string, b: Binding, now: number): void {
    if (!this.peers) return;
    b.publishedAt = now;
    this.peers.publish(sessionId);
  }

  private live(sessionId: string, now: number): Binding | undefined {
    const b = this.sessions.get(sessionId);
    if (b && this.idleExpired(b, now)) {
      this.drop(sessionId);
      return undefined;
    }
    return b;
  }

  private idleExpired(b: Binding, now: number): boolean {
    return b.active === 0 && now - b.idleSince >= this.ttlMs;
  }

  private drop(sessionId: string): void {
    this.sessions.delete(sessionId);
    this.counts.expired++;
  }
}
