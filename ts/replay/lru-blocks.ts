/**
 * A least-recently-used list of blocks: the GPU pool's unused cached blocks, and every block of
 * the host pool (CPU offload).
 * @internal
 * @module
 */

import type { FullBlock } from './kv-cache.js';

/** A cached (unused) block in the LRU list. */
interface LruNode {
  block: FullBlock;
  prev: LruNode | undefined;
  next: LruNode | undefined;
}

/**
 * Unused cached blocks, least recently used first: a map by id plus a doubly-linked list, so
 * evicting the oldest is O(1). (A Map's insertion order alone would do, but finding its first
 * entry after many deletions from the front scans the deleted slots: quadratic in a long replay.)
 */
export class LruBlocks {
  private readonly nodes = new Map<number, LruNode>();
  private head: LruNode | undefined;
  private tail: LruNode | undefined;

  get size(): number {
    return this.nodes.size;
  }

  has(id: number): boolean {
    return this.nodes.has(id);
  }

  /** Appends as the most recently used. */
  push(block: FullBlock): void {
    const node: LruNode = { block, prev: this.tail, next: undefined };
    if (this.tail) this.tail.next = node;
    else this.head = node;
    this.tail = node;
    this.nodes.set(block.id, node);
  }

  /** Removes the block; false if it was not cached. */
  delete(id: number): boolean {
    const node = this.nodes.get(id);
    if (!node) return false;
    this.nodes.delete(id);
    if (node.prev) node.prev.next = node.next;
    else this.head = node.next;
    if (node.next) node.next.prev = node.prev;
    else this.tail = node.prev;
    return true;
  }

  /** Removes and returns the least recently used block. */
  shift(): FullBlock | undefined {
    const node = this.head;
    if (!node) return undefined;
    this.delete(node.block.id);
    return node.block;
  }
}
