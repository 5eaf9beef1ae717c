/**
 * The simulated engine's KV block pool, modelled on vLLM's prefix cache: blocks in use are
 * reference-counted; a block nobody uses stays cached in an LRU pool until its room is needed.
 * It emits the KV events a real engine publishes: Stored when a new full block enters the cache,
 * Removed when one is evicted.
 * @internal
 * @module
 */

/** A full block: its engine name (sequence hash) and local hash. */
export interface FullBlock {
  seq: bigint;
  local: bigint;
}

/** KV events of one engine pass, in order. */
export type CacheEvent = { stored: { parent: bigint | null; blocks: FullBlock[] } } | { removed: bigint[] };

export class KvCache {
  /** Full blocks in use → reference count. */
  private readonly active = new Map<bigint, number>();
  /** Full blocks cached but unused, least recently used first (Map order). */
  private readonly cached = new Map<bigint, FullBlock>();
  /** Private blocks in use (partial blocks and, without reuse, anything else). */
  private privateBlocks = 0;
  readonly events: CacheEvent[] = [];

  constructor(readonly capacity: number) {}

  /** Blocks in use (the engine's KV occupancy). */
  get used(): number {
    return this.active.size + this.privateBlocks;
  }

  /** Whether the block is in the pool (in use or cached). */
  contains(seq: bigint): boolean {
    return this.active.has(seq) || this.cached.has(seq);
  }

  /** Leading blocks of `seqs` that are cached (in use or not). */
  prefixHit(seqs: readonly bigint[]): number {
    let n = 0;
    while (n < seqs.length && (this.active.has(seqs[n]) || this.cached.has(seqs[n]))) n++;
    return n;
  }

  /** Makes room for one more block, evicting the LRU cached block if needed. */
  private reserve(): boolean {
    if (this.used + this.cached.size < this.capacity) return true;
    const lru = this.cached.keys().next();
    if (lru.done) return false;
    this.cached.delete(lru.value);
    this.pushRemoved(lru.value);
    return true;
  }

  private pushRemoved(seq: bigint): void {
    const last = this.events[this.events.length - 1];
    if (last && 'removed' in last) last.removed.push(seq);
    else this.events.push({ removed: [seq] });
  }

  /**
   * Takes `blocks` (consecutive, after `parent`) into use. Returns how many it took: fewer than
   * asked when the pool is full of blocks in use. One Stored event covers the newly cached ones.
   */
  use(blocks: readonly FullBlock[], parent: bigint | null): number {
    const fresh: FullBlock[] = [];
    let freshParent = parent;
    let taken = 0;
    for (const b of blocks) {
      const refs = this.active.get(b.seq);
      if (refs !== undefined) {
        this.active.set(b.seq, refs + 1);
      } else if (this.cached.delete(b.seq)) {
        this.active.set(b.seq, 1);
      } else {
        if (!this.reserve()) break;
        this.active.set(b.seq, 1);
        if (fresh.length === 0) freshParent = taken === 0 ? parent : blocks[taken - 1].seq;
        fresh.push(b);
      }
      taken++;
    }
    if (fresh.length > 0) this.events.push({ stored: { parent: freshParent, blocks: fresh } });
    return taken;
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
   * announced, unless an identical block already exists, in which case the two merge.
   */
  promote(block: FullBlock, parent: bigint | null): void {
    this.privateBlocks--;
    const refs = this.active.get(block.seq);
    if (refs !== undefined) {
      this.active.set(block.seq, refs + 1);
    } else if (this.cached.delete(block.seq)) {
      this.active.set(block.seq, 1);
    } else {
      this.active.set(block.seq, 1);
      this.events.push({ stored: { parent, blocks: [block] } });
    }
  }

  /** Releases blocks, most recent first; unused ones stay cached, newest last in the LRU. */
  release(blocks: readonly FullBlock[]): void {
    for (let i = blocks.length - 1; i >= 0; i--) {
      const b = blocks[i];
      const refs = this.active.get(b.seq) ?? 0;
      if (refs > 1) this.active.set(b.seq, refs - 1);
      else if (refs === 1) {
        this.active.delete(b.seq);
        this.cached.set(b.seq, b);
      }
    }
  }

  /** Hands over the events gathered since the last call. */
  takeEvents(): CacheEvent[] {
    return this.events.splice(0);
  }
}
