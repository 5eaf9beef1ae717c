/**
 * The router's side of the replica load sync: turns its bookings into sync messages and peers'
 * messages into remote bookings in its router core, so remote load is weighed exactly like local
 * load (shared prefixes still count once per rank); with session affinity, it carries the
 * session bindings both ways too.
 * @internal
 * @module
 */

import type { RouterCoreBackend } from '../backend-types.js';
import type { ResolvedReplicaOptions } from '../replicas/options.js';
import { type ReplicaStats, ReplicaSync } from '../replicas/sync.js';
import type { ResolvedRouterOptions } from './options.js';
import type { SessionAffinity } from './session-affinity.js';

/**
 * The most block identities a booking tells its peers (768 KiB of them: a booking fits NATS's
 * default 1 MiB payload; 1.5 M tokens at block size 16).
 */
export const MAX_SHARED_BLOCKS = 98_304;

/** What the link calls back in its router. */
export interface RouterHooks {
  /** A fresh request handle (remote bookings share the router's handle space). */
  next(): number;
  /** Load dropped: waiting requests may fit now. */
  drain(): void;
}

/** @internal */
export class ReplicaLink {
  private readonly sync: ReplicaSync;

  constructor(
    opts: ResolvedReplicaOptions,
    private readonly router: ResolvedRouterOptions,
    private readonly core: RouterCoreBackend,
    hooks: RouterHooks,
    sessions: SessionAffinity | undefined,
  ) {
    const now = (): number => router.now();
    this.sync = new ReplicaSync(
      opts,
      {
        book: (b, prefillDone) => {
          const handle = hooks.next();
          try {
            core.bookRemote(handle, b.workerId, b.dpRank, b.blocks, b.unshared, prefillDone ? 0 : b.prefillTokens, now());
            return handle;
          } catch {
            return undefined;
          }
        },
        prefillCompleted: (h) => {
          core.prefillCompleted(h);
          hooks.drain();
        },
        // A peer's request that ends before its first token takes its prefill load with it.
        free: (h) => {
          core.free(h);
          hooks.drain();
        },
        touch: (h) => {
          core.touch(h, now());
        },
        now,
      },
      // Renewed well before the router's own expiry sweep could free a live peer's request.
      router.requestExpiryMs / 4,
      hooks.drain,
      sessions && {
        table: () => sessions.table(now()),
        merge: (updates) => sessions.merge(updates, now()),
        current: (ids) => sessions.current(ids, now()),
        renew: () => sessions.renew(now()),
      },
    );
    sessions?.share({ origin: opts.replicaId, publish: (id) => this.sync.sessionChanged(id) });
  }

  get ready(): Promise<void> {
    return this.sync.ready;
  }

  owns(handle: number): boolean {
    return this.sync.owns(handle);
  }

  /**
   * This replica booked a request: its peers learn the rank, prefill tokens and blocks. Past
   * `MAX_SHARED_BLOCKS` a booking's blocks go as a count that matches nothing, so that one
   * booking fits a sync message (the peers then count that tail once per request).
   */
  booked(handle: number, workerId: bigint, dpRank: number, prefillTokens: number, blockCount: number): void {
    const { trackActiveBlocks, assumeKvReuse } = this.router;
    const ids = trackActiveBlocks && assumeKvReuse ? this.core.bookedBlocks(handle) : new BigUint64Array(0);
    const blocks = ids.length > MAX_SHARED_BLOCKS ? ids.subarray(0, MAX_SHARED_BLOCKS) : ids;
    this.sync.booked({
      key: handle,
      workerId,
      dpRank,
      prefillTokens,
      blocks,
      unshared: (trackActiveBlocks && !assumeKvReuse ? blockCount : 0) + ids.length - blocks.length,
    });
  }

  prefilled(handle: number): void {
    this.sync.prefilled(handle);
  }

  /** A booking ended here: this replica's own (published) or a peer's (forgotten). */
  freed(handle: number): void {
    this.sync.freed(handle);
  }

  stats(): ReplicaStats {
    return this.sync.stats();
  }

  close(): Promise<void> {
    return this.sync.close();
  }
}
