/**
 * Session affinity (Dynamo's `router_session_affinity_ttl_secs` and `X-Dynamo-Session-ID`): the
 * first request of a session that is booked binds the session to its (worker, dp rank); later
 * requests of the session go there without choosing, so an agent's or a conversation's turns
 * stay where their KV cache grows even when a cost would send one elsewhere. A binding never
 * expires while one of its requests is in flight; once the last one ends, it lives `ttlMs` of
 * router clock more. A binding whose rank is gone or not allowed for a request is dropped, and
 * that request binds the session anew where it is routed. Bindings are this router's own: router
 * replicas do not share them.
 * @internal
 * @module
 */

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
}

interface Binding extends SessionTarget {
  /** Requests of the session in flight on this binding. */
  active: number;
  /** Router clock when the last of them ended (meaningful while `active` is 0). */
  idleSince: number;
}

export class SessionAffinity {
  private readonly sessions = new Map<string, Binding>();
  /** In-flight requests of a session, with the binding they count in. */
  private readonly requests = new Map<string, Binding>();
  private readonly counts = { hits: 0, bindings: 0, invalidated: 0, expired: 0 };

  constructor(private readonly ttlMs: number) {}

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
   * another request of the session bound it elsewhere meanwhile (both routed by cost, one after
   * waiting in the queue), the first binding stands and this request does not count in it.
   */
  booked(sessionId: string, requestId: string, workerId: bigint, dpRank: number, now: number): void {
    let binding = this.live(sessionId, now);
    if (!binding) {
      binding = { workerId, dpRank, active: 0, idleSince: now };
      this.sessions.set(sessionId, binding);
      this.counts.bindings++;
    } else if (binding.workerId !== workerId || binding.dpRank !== dpRank) {
      return;
    }
    binding.active++;
    this.requests.set(requestId, binding);
  }

  /** A request ended (freed, expired, dropped with its worker): its session idles once none is left. */
  released(requestId: string, now: number): void {
    const binding = this.requests.get(requestId);
    if (!binding) return;
    this.requests.delete(requestId);
    binding.active--;
    if (binding.active === 0) binding.idleSince = now;
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

  /** Drops bindings idle past the TTL (also done lazily on lookup); keeps memory to live sessions. */
  sweep(now: number): void {
    for (const [id, b] of this.sessions) if (this.idleExpired(b, now)) this.drop(id);
  }

  stats(): SessionStats {
    return { bound: this.sessions.size, ...this.counts };
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
