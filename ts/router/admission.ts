/**
 * Admission while queueing is on (`routerQueueThreshold`): a request whose candidates are all
 * busy waits, and waiting requests are released in queue order as soon as one of their own
 * candidates has room.
 *
 * Dynamo's queue releases from its head only, and a new request waits whenever anything waits.
 * That is right for Dynamo, which runs one router per model, so every request has the same
 * candidates. One `KvRouter` serves requests with different candidates: several models or LoRA
 * adapters behind one gateway, `allowedWorkers`, pinned workers, a gateway's retry among the
 * workers not tried yet. Under the head-only rule a request waited behind others that wait for
 * other workers, its own idle (a model with free workers queued behind a model whose workers were
 * all busy). A release pass here lets go, again and again, the first request in queue order one
 * of whose candidates has room, skipping those whose candidates are all busy. Every change that
 * frees room runs a pass, so afterwards no waiting request has a candidate with room: a new request
 * whose candidates have room takes none that a waiting one could use, and one with the candidates
 * of waiting requests waits behind them. Requests that compete for the same workers keep their
 * order, and when every request has the same candidates this is Dynamo's rule exactly. Requests with the same candidates form a group kept in release order, so
 * a pass looks at each group's first request only: its cost grows with the number of distinct
 * candidate sets waiting (models, adapters), not with the length of the queue.
 * @internal
 * @module
 */

import type { RawRankLoad } from '../backend-types.js';
import { KvRouteError } from '../errors.js';
import type { QueuePolicy } from './options.js';
import { type Waiter, WaitQueue } from './queue.js';
import type { Pending, Prepared } from './request.js';
import type { RouteDecision } from './types.js';
import { type Candidates, prefillByRank, type WorkerRegistry } from './workers.js';

/** What admission needs from its router. */
export interface AdmissionHooks {
  /** The request's candidates now (workers come and go while it waits); throws as routing does. */
  candidatesFor(p: Prepared): Candidates;
  /** Scores, chooses and books the request. */
  schedule(p: Prepared, c: Candidates, queuedMs: number): RouteDecision;
  /** The same for a request that waited (its session may have been bound meanwhile). */
  release(p: Prepared, c: Candidates, queuedMs: number): RouteDecision;
  /** The most tokens any candidate has cached (the `wspt` policy's score). */
  bestCachedTokens(p: Prepared, c: Candidates): number;
  /** Prefill load per rank, this router's and its peers'. */
  loads(): readonly RawRankLoad[];
  clock(): number;
  /** A request started waiting. */
  waited(): void;
}

/** The counters admission keeps in the router's stats. */
export interface AdmissionCounts {
  queuedTotal: number;
  aborted: number;
}

/**
 * A key per candidate set: requests with the same key had the same candidates when they came.
 * Taken from the candidates' bytes as a string (about 1 µs for 16 workers, 12 for 256; a sorted
 * list of the allowed ids in decimal took 47 for 256), and `*` for a request that any worker may
 * take. Workers that join or leave later make a group's key stale, which costs nothing but a
 * second group with the same candidates: groups are released in queue order across groups too.
 */
function candidateKey(p: Prepared, c: Candidates): string {
  if (!p.allowed && !p.pinned) return '*';
  const workers = new Uint16Array(c.workers.buffer, c.workers.byteOffset, c.workers.length * 4);
  const ranks = new Uint16Array(c.ranks.buffer, c.ranks.byteOffset, c.ranks.length * 2);
  return charCodes(workers) + charCodes(ranks);
}

/** The units as a string, in chunks small enough to pass as arguments. */
function charCodes(units: Uint16Array): string {
  let out = '';
  for (let at = 0; at < units.length; at += 8192) out += String.fromCharCode(...units.subarray(at, at + 8192));
  return out;
}

/**
 * Which candidate sets are all busy, during one release pass. A release only adds load, so a set
 * found busy stays busy for the rest of the pass and is not checked again.
 */
class BusyPass {
  private prefill: Map<string, number> | undefined;
  private readonly busy = new Set<string>();

  constructor(
    private readonly workers: WorkerRegistry,
    private readonly loads: () => readonly RawRankLoad[],
    private readonly threshold: number,
  ) {}

  /** Known busy in this pass (no need to find its candidates). */
  knownBusy(key: string): boolean {
    return this.busy.has(key);
  }

  allBusy(key: string, c: Candidates): boolean {
    if (this.busy.has(key)) return true;
    this.prefill ??= prefillByRank(this.loads());
    if (!this.workers.allBusy(c, this.prefill, this.threshold)) return false;
    this.busy.add(key);
    return true;
  }

  /** A request was booked: the load changed. */
  booked(): void {
    this.prefill = undefined;
  }
}

/** The router's queue and the rules for entering and leaving it (see the module's comment). */
export class Admission {
  private readonly queue: WaitQueue<Pending>;
  private readonly waiting = new Map<string, Waiter<Pending>>();
  /**
   * Each waiting group's workers, as of the last pass that looked at it: a pass after one
   * worker's load went down (`drain(freed)`) skips the groups without it, which the last pass
   * left all busy and which still are.
   */
  private readonly groupWorkers = new Map<string, ReadonlySet<bigint>>();

  constructor(
    private readonly threshold: number,
    private readonly policy: QueuePolicy,
    private readonly workers: WorkerRegistry,
    private readonly hooks: AdmissionHooks,
    private readonly counts: AdmissionCounts,
  ) {
    this.queue = new WaitQueue(policy);
  }

  /** Requests waiting. */
  get length(): number {
    return this.queue.length;
  }

  has(requestId: string): boolean {
    return this.waiting.has(requestId);
  }

  /**
   * Routes the request now when one of its candidates has room, else it waits. Requests with its
   * candidates already waiting means they are all busy (the last pass left them so), which needs
   * no look at the load.
   */
  admit(p: Prepared, c: Candidates): Promise<RouteDecision> {
    const group = candidateKey(p, c);
    if (this.queue.waits(group) || this.pass().allBusy(group, c)) return this.enqueue(p, c, group);
    return Promise.resolve(this.hooks.schedule(p, c, 0));
  }

  private pass(): BusyPass {
    return new BusyPass(this.workers, this.hooks.loads, this.threshold);
  }

  private enqueue(p: Prepared, c: Candidates, group: string): Promise<RouteDecision> {
    const now = this.hooks.clock();
    const best = this.policy === 'wspt' ? this.hooks.bestCachedTokens(p, c) : 0;
    return new Promise<RouteDecision>((resolve, reject) => {
      const pending: Pending = { prepared: p, enqueuedAt: now, resolve, reject };
      const waiter = this.queue.push(pending, group, p.priority, this.queue.score(p.tokens.length, best, p.priority));
      if (!this.groupWorkers.has(group)) this.groupWorkers.set(group, new Set(c.workers));
      const id = p.req.requestId;
      this.waiting.set(id, waiter);
      this.counts.queuedTotal++;
      this.hooks.waited();
      const signal = p.req.signal;
      if (signal) {
        pending.onAbort = () => this.cancel(id, new KvRouteError('ERR_ABORTED', `request ${id} was aborted while queued`));
        signal.addEventListener('abort', pending.onAbort, { once: true });
      }
    });
  }

  /** Takes a waiting request out and rejects it with `err`; false when it is not waiting. */
  cancel(requestId: string, err: KvRouteError): boolean {
    const waiter = this.waiting.get(requestId);
    if (!waiter) return false;
    this.leave(waiter);
    this.counts.aborted++;
    waiter.item.reject(err);
    return true;
  }

  private leave(waiter: Waiter<Pending>): void {
    this.queue.remove(waiter);
    if (!this.queue.waits(waiter.group)) this.groupWorkers.delete(waiter.group);
    this.waiting.delete(waiter.item.prepared.req.requestId);
    const { onAbort, prepared } = waiter.item;
    if (onAbort) prepared.req.signal?.removeEventListener('abort', onAbort);
  }

  /**
   * Releases, in queue order, every waiting request that one of its candidates has room for now.
   * `freed`: only this worker's load went down since the last pass (a request of its had its first
   * token, or ended), so only the groups that may use it are looked at.
   */
  drain(freed?: bigint): void {
    if (this.queue.length === 0) return;
    const pass = this.pass();
    for (let next = this.firstReleasable(pass, freed); next; next = this.firstReleasable(pass, freed)) {
      const [waiter, c] = next;
      const pending = waiter.item;
      this.leave(waiter);
      try {
        pending.resolve(this.hooks.release(pending.prepared, c, this.hooks.clock() - pending.enqueuedAt));
      } catch (err) {
        pending.reject(err);
      }
      pass.booked();
    }
  }

  /**
   * The first waiting request, in queue order, that one of its candidates has room for, with its
   * candidates. Only groups' heads can be: the rest of a group waits for the same workers. A
   * request whose candidates cannot be found any more (its workers were removed) is rejected.
   */
  private firstReleasable(pass: BusyPass, freed: bigint | undefined): [Waiter<Pending>, Candidates] | undefined {
    for (let heads = this.queue.heads(), i = 0; i < heads.length; i++) {
      const head = heads[i];
      if (pass.knownBusy(head.group)) continue;
      if (freed !== undefined && !this.groupWorkers.get(head.group)?.has(freed)) continue;
      let c: Candidates;
      try {
        c = this.hooks.candidatesFor(head.item.prepared);
        // Workers come and go only with a full pass (no `freed`): only then can the group's change.
        if (freed === undefined) this.groupWorkers.set(head.group, new Set(c.workers));
      } catch (err) {
        this.leave(head);
        head.item.reject(err);
        // Its group's next request (the same candidates) may have become a head.
        heads = this.queue.heads();
        i = -1;
        continue;
      }
      if (!pass.allBusy(head.group, c)) return [head, c];
    }
    return undefined;
  }

  /** Rejects every waiting request (the router closed). */
  rejectAll(reason: (requestId: string) => KvRouteError): void {
    for (const waiter of this.queue.all()) {
      this.leave(waiter);
      waiter.item.reject(reason(waiter.item.prepared.req.requestId));
    }
  }
}
