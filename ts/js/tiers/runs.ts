/**
 * A tier's blocks written back as chains, for dumps: the pure-JS twin of kvroute-core's
 * `tiers/runs.rs` (see it for why a run's head is in position form and why a restore dumps the
 * same runs again).
 * @internal
 * @module
 */

import { compareBigInt } from '../index/trie.js';

/** Where a rank's block sits in a tier, and what it was stored under. */
export interface Placed {
  /** Its position (the sequence hash from the root). */
  readonly position: bigint;
  /** Its local hash. */
  readonly local: bigint;
  /** Its parent's position; a root block's own. */
  readonly parent: bigint;
}

/** A run's blocks as (engine hash, local hash) pairs, the first in position form. */
export type Run = Array<readonly [bigint, bigint]>;

/**
 * One rank's blocks in one tier (`names`: name → placement) as runs, the first block of each in
 * position form. Every block is in exactly one run; runs come in no particular order.
 */
export function runs(names: ReadonlyMap<bigint, Placed>): Run[] {
  const alone = (name: bigint, p: Placed): Run => [[name, p.position]];
  const byName = [...names].sort((a, b) => compareBigInt(a[0], b[0]));
  const out: Run[] = [];
  // Each position is written under its smallest name; its other names go alone.
  const first = new Map<bigint, readonly [bigint, Placed]>();
  for (const [name, p] of byName) {
    if (first.has(p.position)) out.push(alone(name, p));
    else first.set(p.position, [name, p]);
  }
  const heads: Array<readonly [bigint, Placed]> = [];
  const children = new Map<bigint, Array<readonly [bigint, Placed]>>();
  // `first` was filled in name order, so each child list is too.
  for (const entry of first.values()) {
    const p = entry[1];
    if (p.parent !== p.position && first.has(p.parent)) {
      const list = children.get(p.parent);
      if (list) list.push(entry);
      else children.set(p.parent, [entry]);
    } else heads.push(entry);
  }
  for (let head = heads.pop(); head !== undefined; head = heads.pop()) {
    const run = alone(head[0], head[1]);
    let at = head[1].position;
    // Taking a position's children out of the map visits each position once.
    for (let list = children.get(at); list !== undefined; list = children.get(at)) {
      children.delete(at);
      const [[next, p], ...rest] = list;
      heads.push(...rest);
      run.push([next, p.local]);
      at = p.position;
    }
    out.push(run);
  }
  // What no head reached would sit on a cycle of positions (only a hash collision makes one).
  for (const list of children.values()) for (const [name, p] of list) out.push(alone(name, p));
  return out;
}
