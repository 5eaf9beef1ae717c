/**
 * The simulated engine's KV block pool, modelled on vLLM's prefix cache: blocks in use are
 * reference-counted; a block nobody uses stays cached in an LRU pool until its room is needed.
 * It emits the KV events a real engine publishes: Stored when a new full block enters the cache,
 * Removed when one is evicted. Blocks taken for a load from host memory are in use but not yet
 * cached: no other request finds them, and they are announced, until the load ends (vLLM delays
 * caching the blocks of an asynchronous KV load; Dynamo's simulator activates them then).
 * @internal
 * @module
 */

import { HostPool } from './host-pool.js';
import { LruBlocks } from './lru-blocks.js';

/** A full block: its engine name (sequence hash) and local hash. */
export interface FullBlock {
  seq: bigint;
  local: bigint;
  /**
   * A number standing for `seq` within one simulation (equal seqs, equal ids), so the pool's maps
   * key on numbers: V8's maps are several times faster on small numbers than on bigints, and the
   * pool is the replay's hottest code.
   */
  id: number;
}

/**
 * KV events of one engine pass, in order: the GPU pool's, and with host offload (`host: true`)
 * the host pool's.
 */
export type CacheEvent = { stored: { parent: bigint | null; blocks: FullBlock[] }; host?: true } | { removed: bigint[]; host?: true };

export class KvCache {
  /** Full blocks in use (by id) → reference count. */
  private readonly active = new Map<number, number>();
  /** Full blocks cached but unused, least recently used first. */
  private readonly cached = new LruBlocks();
  /** Private blocks in use (partial blocks and, without reuse, anything else). */
  private privateBlocks = 0;
  /** Blocks in use whose load from host memory has not ended (ids; see `useLoading`). */
  private readonly loading = new Set<number>();
  readonly events: CacheEvent[] = [];
  /** Host memory behind the pool (CPU offload: the mock worker's and the replay's `hostBlocks`). */
  readonly host: HostPool | undefined;

  /** `hostBlocks` > 0 adds a host pool of that many blocks (see `host-pool.ts`). */
  constructor(
    readonly capacity: number,
    hostBlocks = 0,
  ) {
    this.host = hostBlocks > 0 ? new HostPool(hostBlocks, this.events) : undefined;
  }

  /** Blocks in use (the engine's KV occupancy). */
  get used(): number {
    return this.active.size + this.privateBlocks;
  }

  /** Whether the block is in the pool (in use or cached). */
  contains(block: FullBlock): boolean {
    return this.active.has(block.id) || this.cached.has(block.id);
  }

  /** Leading `blocks` that are cached (in use or not); a block still loading ends the run. */
  prefixHit(blocks: readonly FullBlock[]): number {
    let n = 0;
    while (n < blocks.length && (this.active.has(blocks[n].id) || this.cached.has(blocks[n].id))) n++;
    if (this.loading.size > 0) for (let i = 0; i < n; i++) if (this.loading.has(blocks[i].id)) return i;
    return n;
  }

  /** Whether the block is in use for a load from host memory that has not ended. */
  isLoading(block: FullBlock): boolean {
    return this.loading.size > 0 && this.loading.has(block.id);
  }

  /**
   * How many of the first `hit` blocks (a prefix the pool holds) are in use by some request:
   * taking them costs no room, unlike cached blocks that leave the LRU list.
   */
  activePrefix(blocks: readonly FullBlock[], hit: number): number {
    let n = 0;
    for (let i = 0; i < hit; i++) if (this.active.has(blocks[i].id)) n++;
    return n;
  }

  /** Makes room for one more block, evicting the LRU cached block if needed. */
  private reserve(): boolean {
    if (this.used + this.cached.size < this.capacity) return true;
    const lru = this.cached.shift();
    if (!lru) return false;
    this.pushRemoved(lru.seq);
    return true;
  }

  private pushRemoved(seq: bigint): void {
    const last = this.events[this.events.length - 1];
    if (last && 'removed' in last && !last.host) last.removed.push(seq);
    else this.events.push({ removed: [seq] });
  }

  /**
   * Takes `blocks` (consecutive, after `parent`) into use. Returns how many it took: fewer than
   * asked when the pool is full of blocks in use. One Stored event covers the newly cached ones.
   */
  use(blocks: readonly FullBlock[], parent: bigint | null): number {
    const { taken, stored } = this.take(blocks, parent, false);
    if (stored) this.events.push(stored);
    return taken;
  }

  /**
   * `use` for blocks a load from host memory fills: the new ones stay out of reach (see
   * `prefixHit`) and unannounced until `loaded` gets the returned Stored event.
   */
  useLoading(blocks: readonly FullBlock[], parent: bigint | null): { taken: number; stored: CacheEvent | undefined } {
    return this.take(blocks, parent, true);
  }

  /** The load that `stored` (from `useLoading`) came from ended: its blocks join the cache. */
  loaded(stored: CacheEvent | undefined): void {
    if (!stored || !('stored' in stored)) return;
    for (const b of stored.stored.blocks) this.loading.delete(b.id);
    this.events.push(stored);
  }

  /**
   * The request whose load `stored` (from `useLoading`) came from went away before it ended: the
   * blocks it alone was filling leave the pool, neither cached nor announced (the later `release`
   * of the request's blocks skips them). A block another request took meanwhile (one that
   * computes it: a prompt ending there recomputes its last block) stays, and is announced.
   */
  abandonLoad(stored: CacheEvent | undefined): void {
    if (!stored || !('stored' in stored)) return;
    const { parent, blocks } = stored.stored;
    blocks.forEach((b, i) => {
      this.loading.delete(b.id);
      if (this.active.get(b.id) === 1) this.active.delete(b.id);
      else this.events.push({ stored: { parent: i === 0 ? parent : blocks[i - 1].seq, blocks: [b] } });
    });
  }

  /**
   * Takes blocks for `use` or `useLoading`: how many it took, and the Stored event of the new
   * ones (`loading`: they are marked as filled by a load), for the caller to announce or hold back.
   */
  private take(blocks: readonly FullBlock[], parent: bigint | null, loading: boolean): { taken: number; stored: CacheEvent | undefined } {
    const fresh: FullBlock[] = [];
    let freshParent = parent;
    let taken = 0;
    for (const b of blocks) {
      const refs = this.active.get(b.id);
      if (refs !== undefined) {
        this.active.set(b.id, refs + 1);
      } else if (this.cached.delete(b.id)) {
        this.active.set(b.id, 1);
      } else {
        if (!this.reserve()) break;
        this.active.set(b.id, 1);
        if (loading) this.loading.add(b.id);
        if (fresh.length === 0) freshParent = taken === 0 ? parent : blocks[taken - 1].seq;
        fresh.push(b);
      }
      taken++;
    }
    this.host?.offload(taken === blocks.length ? blocks : blocks.slice(0, taken), parent);
    return { taken, stored: fresh.length > 0 ? { stored: { parent: freshParent, blocks: fresh } } : undefined };
  }

  /** Takes a private block (a partial block being filled). */
  usePrivate(): boolean {
    if (!this.reserve()) return false;
    this.privateBlocks++;
    return true;
  }

  releasePrivate(count = 1): void {
    this.privateBlocks -= count;
  }

  /**
   * A private (partial) block became full with this identity: it joins the prefix cache and is
   * announced, unless an identical block already exists, in which case the two merge. It is not
   * copied to host memory, which takes prompt blocks only (see `HostPool`).
   */
  promote(block: FullBlock, parent: bigint | null): void {
    this.privateBlocks--;
    const refs = this.active.get(block.id);
    if (refs !== undefined) {
      this.active.set(block.id, refs + 1);
    } else if (this.cached.delete(block.id)) {
      this.active.set(block.id, 1);
    } else {
      this.active.set(block.id, 1);
      this.events.push({ stored: { parent, blocks: [block] } });
    }
  }

  /** Releases blocks, most recent first; unused ones stay cached, newest last in the LRU. */
  release(blocks: readonly FullBlock[]): void {
    for (let i = blocks.length - 1; i >= 0; i--) {
      const b = blocks[i];
      const refs = this.active.get(b.id) ?? 0;
      if (refs > 1) this.active.set(b.id, refs - 1);
      else if (refs === 1) {
        this.active.delete(b.id);
        this.cached.push(b);
      }
    }
  }

  /** Hands over the events gathered since the last call. */
  takeEvents(): CacheEvent[] {
    return this.events.splice(0);
  }
}
