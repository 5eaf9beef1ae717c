/**
 * The pure-JS index's data: an uncompressed trie (one node per block position), with the same
 * invariants as the native compressed tree: a child's holders are a subset of its parent's, every
 * node is held by some rank, and a rank's predicted blocks lie below its confirmed ones.
 * Simplicity over memory: this backend is the portable fallback, and the behavioural twin the
 * test suite checks the native one against.
 * @internal
 * @module
 */

export class TrieNode {
  readonly children = new Map<bigint, TrieNode>();
  readonly holders = new Set<RankState>();

  constructor(
    readonly local: bigint,
    readonly parent: TrieNode | null,
  ) {}
}

export class RankState {
  /** The rank's name for each block it holds → that block. */
  readonly lookup = new Map<bigint, TrieNode>();
  /** Held block → the rank's name for it. */
  readonly names = new Map<TrieNode, bigint>();
  /** Predicted (approximate-mode) blocks → expiry in ms. */
  readonly predicted = new Map<TrieNode, number>();

  constructor(
    readonly workerId: bigint,
    readonly dpRank: number,
  ) {}
}

/** Orders ranks by worker id, then dp rank. */
export function compareRanks(a: RankState, b: RankState): number {
  if (a.workerId !== b.workerId) return a.workerId < b.workerId ? -1 : 1;
  return a.dpRank - b.dpRank;
}

export function compareBigInt(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
