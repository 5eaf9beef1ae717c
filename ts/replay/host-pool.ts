/**
 * The simulated engine's host-memory tier, as vLLM's CPU offloading (`--kv-offloading-size`) keeps
 * it: every prompt block a request takes into the GPU pool is copied to host memory (unless held
 * there already), which keeps the most recently used blocks up to its capacity. Output blocks are
 * not copied, as in Dynamo's simulator of vLLM's offloading connector: a later turn's prompt,
 * which holds them, copies them then. A request whose prefix continues there past its GPU hit
 * loads those blocks back instead of recomputing them. Its KV events are the ones vLLM's offload
 * tracker publishes with the request's metadata: Stored (medium CPU) for the blocks newly
 * copied, Removed for the ones its LRU evicts, many per event.
 *
 * The mock worker turns it on with `cpuOffloadBlocks`, `kvroute replay` with
 * `--cpu-offload-blocks` (its Rust twin is `kvroute_core::replay::host_pool`); by default both
 * simulate the GPU pool alone, as Dynamo's replay does unless given `native_host_offload`.
 * @internal
 * @module
 */

import type { CacheEvent, FullBlock } from './kv-cache.js';
import { LruBlocks } from './lru-blocks.js';

export class HostPool {
  private readonly blocks = new LruBlocks();
  /** Blocks loaded back to the GPU since the pool began. */
  loaded = 0;

  /** `events` is the GPU pool's event list: both tiers' events stay in one order. */
  constructor(
    readonly capacity: number,
    private readonly events: CacheEvent[],
  ) {}

  get size(): number {
    return this.blocks.size;
  }

  /** How many of `blocks`, from `from` on, the pool holds in a row. */
  prefixHit(blocks: readonly FullBlock[], from: number): number {
    let n = from;
    while (n < blocks.length && this.blocks.has(blocks[n].id)) n++;
    return n - from;
  }

  /**
   * Copies blocks a request just took into the GPU pool (a chain after `parent`). Blocks the
   * pool holds become the most recently used; the others are stored, after the least recently
   * used are evicted to make room (a chain longer than the whole pool keeps its last blocks).
   * Each run of consecutive new blocks is one Stored event whose parent is the block before it,
   * so a consumer always reads a true chain.
   */
  offload(stored: readonly FullBlock[], parent: bigint | null): void {
    const fresh: number[] = [];
    for (let i = 0; i < stored.length; i++) {
      const b = stored[i];
      if (this.blocks.delete(b.id)) this.blocks.push(b);
      else fresh.push(i);
    }
    if (fresh.length > this.capacity) fresh.splice(0, fresh.length - this.capacity);
    while (this.blocks.size + fresh.length > this.capacity) this.pushRemoved((this.blocks.shift() as FullBlock).seq);
    let run: FullBlock[] = [];
    fresh.forEach((i, k) => {
      if (k === 0 || fresh[k - 1] !== i - 1) {
        run = [];
        this.events.push({ stored: { parent: i === 0 ? parent : stored[i - 1].seq, blocks: run }, host: true });
      }
      run.push(stored[i]);
      this.blocks.push(stored[i]);
    });
  }

  /** Blocks loaded back to the GPU become the most recently used. */
  load(blocks: readonly FullBlock[]): void {
    for (const b of blocks) if (this.blocks.delete(b.id)) this.blocks.push(b);
    this.loaded += blocks.length;
  }

  private pushRemoved(seq: bigint): void {
    const last = this.events[this.events.length - 1];
    if (last && 'removed' in last && last.host) last.removed.push(seq);
    else this.events.push({ removed: [seq], host: true });
  }
}
