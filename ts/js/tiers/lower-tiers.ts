/**
 * The pure-JS twin of kvroute-core's `tiers`: which rank holds which blocks in the host, disk
 * and external tiers, keyed by position (the sequence hash from the root), and the continuation
 * walk routing credits (see the Rust module docs for why positions, not parent hashes).
 * @internal
 * @module
 */

import { jsHashing } from '../hashing.js';
import { compareBigInt } from '../index/trie.js';
import { type Placed, type Run, runs } from './runs.js';

/** Lower tiers in walk order: host pinned, disk, external. */
const TIER_COUNT = 3;

class Tier {
  /** Position → rank key → how many of the rank's names point there. */
  readonly held = new Map<bigint, Map<string, number>>();
  /** Rank key → its names → where they are. */
  readonly names = new Map<string, Map<bigint, Placed>>();
  blocks = 0;
  stored = 0;
  removed = 0;
  unanchored = 0;
  conflicting = 0;
  notFound = 0;

  positionOf(rank: string, name: bigint): bigint | undefined {
    return this.names.get(rank)?.get(name)?.position;
  }

  holds(rank: string, position: bigint): boolean {
    return this.held.get(position)?.has(rank) === true;
  }

  hold(rank: string, position: bigint): void {
    let ranks = this.held.get(position);
    if (!ranks) {
      ranks = new Map();
      this.held.set(position, ranks);
    }
    ranks.set(rank, (ranks.get(rank) ?? 0) + 1);
    this.blocks++;
  }

  release(rank: string, position: bigint): void {
    const ranks = this.held.get(position);
    if (!ranks) return;
    const refs = ranks.get(rank);
    if (refs !== undefined) {
      if (refs === 1) ranks.delete(rank);
      else ranks.set(rank, refs - 1);
      this.blocks--;
    }
    if (ranks.size === 0) this.held.delete(position);
  }

  clearRank(rank: string): void {
    const names = this.names.get(rank);
    if (!names) return;
    this.names.delete(rank);
    for (const p of names.values()) this.release(rank, p.position);
  }
}

/** The sequence hash of a block whose parent's is `parent` (offload events are not a hot path). */
function childPosition(parent: bigint, local: bigint): bigint {
  return jsHashing.sequenceHashes(BigUint64Array.of(parent, local))[1];
}

/** The sequence hash of a path of local hashes from the root. */
export function pathPosition(locals: readonly bigint[]): bigint | undefined {
  return locals.length === 0 ? undefined : jsHashing.sequenceHashes(BigUint64Array.from(locals))[locals.length - 1];
}

/** A rank's key in the maps: `worker:dp`. */
export function rankKey(workerId: bigint, dpRank: number): string {
  return `${workerId}:${dpRank}`;
}

export class LowerTiers {
  private readonly tiers = [new Tier(), new Tier(), new Tier()];

  isEmpty(): boolean {
    return this.tiers.every((t) => t.blocks === 0);
  }

  /** Blocks held in all tiers, summed over ranks. */
  blockCount(): number {
    return this.tiers.reduce((sum, t) => sum + t.blocks, 0);
  }

  /**
   * A Stored event of `tier` (0-2): (engine hash, local hash) pairs, the first a child of
   * `parent`, looked up in the rank's lower tiers, then by `onDevice` (the position of the
   * rank's device block of that name).
   */
  store(
    rank: string,
    tier: number,
    parent: bigint | undefined,
    exts: readonly bigint[],
    locals: readonly bigint[],
    onDevice: (name: bigint) => bigint | undefined,
  ): void {
    let position: bigint | undefined;
    if (parent !== undefined) {
      position = this.anchor(rank, tier, parent) ?? onDevice(parent);
      if (position === undefined) {
        this.tiers[tier].unanchored += exts.length;
        return;
      }
    }
    const t = this.tiers[tier];
    let names = t.names.get(rank);
    if (!names) {
      names = new Map();
      t.names.set(rank, names);
    }
    for (let i = 0; i < exts.length; i++) {
      const here = position === undefined ? locals[i] : childPosition(position, locals[i]);
      const known = names.get(exts[i])?.position;
      if (known === undefined) {
        names.set(exts[i], { position: here, local: locals[i], parent: position ?? here });
        t.hold(rank, here);
        t.stored++;
      } else if (known !== here) {
        t.conflicting += exts.length - i;
        break;
      }
      position = here;
    }
    if (names.size === 0) t.names.delete(rank);
  }

  /** The parent's position: the rank's block of that name in this tier, else in the other lower tiers. */
  private anchor(rank: string, tier: number, name: bigint): bigint | undefined {
    const own = this.tiers[tier].positionOf(rank, name);
    if (own !== undefined) return own;
    for (let i = 0; i < TIER_COUNT; i++) {
      if (i === tier) continue;
      const other = this.tiers[i].positionOf(rank, name);
      if (other !== undefined) return other;
    }
    return undefined;
  }

  remove(rank: string, tier: number, hashes: readonly bigint[]): void {
    const t = this.tiers[tier];
    const names = t.names.get(rank);
    for (const name of hashes) {
      const placed = names?.get(name);
      if (placed === undefined) {
        t.notFound++;
        continue;
      }
      names?.delete(name);
      t.release(rank, placed.position);
      t.removed++;
    }
    if (names?.size === 0) t.names.delete(rank);
  }

  clearRank(rank: string): void {
    for (const t of this.tiers) t.clearRank(rank);
  }

  removeWorker(workerId: bigint, dpRank: number | undefined): void {
    const prefix = `${workerId}:`;
    for (const t of this.tiers) {
      for (const rank of [...t.names.keys()]) {
        if (rank.startsWith(prefix) && (dpRank === undefined || rank === rankKey(workerId, dpRank))) t.clearRank(rank);
      }
    }
  }

  /**
   * The blocks the host tier holds for `rank` from `start` (the end of its device prefix) on,
   * then the disk tier from where that run stops, then external: `[host, disk, external]`.
   * `positions` are the request's sequence hashes.
   */
  reach(positions: BigUint64Array, rank: string, start: number): [number, number, number] {
    let at = start;
    const hits: [number, number, number] = [0, 0, 0];
    for (let k = 0; k < TIER_COUNT; k++) {
      const t = this.tiers[k];
      const from = at;
      while (at < positions.length && t.holds(rank, positions[at])) at++;
      hits[k] = at - from;
    }
    return hits;
  }

  /**
   * Every block each rank holds in a lower tier, as runs of blocks that continue each other (the
   * first in position form: see `runs.ts`), ordered by rank (worker, then dp rank), tier and the
   * run's first name, as kvroute-core's `LowerTiers::runs` lists them.
   */
  runs(): Array<{ workerId: bigint; dpRank: number; tier: number; run: Run }> {
    const out: Array<{ workerId: bigint; dpRank: number; tier: number; run: Run }> = [];
    this.tiers.forEach((t, tier) => {
      for (const [rank, names] of t.names) {
        const [worker, dp] = rank.split(':');
        for (const run of runs(names)) out.push({ workerId: BigInt(worker), dpRank: Number(dp), tier, run });
      }
    });
    return out.sort(
      (a, b) => compareBigInt(a.workerId, b.workerId) || a.dpRank - b.dpRank || a.tier - b.tier || compareBigInt(a.run[0][0], b.run[0][0]),
    );
  }

  /** Per tier: blocks, stored, removed, unanchored, conflicting, not found (the native binding's order). */
  stats(): number[] {
    return this.tiers.flatMap((t) => [t.blocks, t.stored, t.removed, t.unanchored, t.conflicting, t.notFound]);
  }
}
