/**
 * The reference model for approximate mode: per rank, path → (name, expiry or confirmed) and
 * name → path, with paths as strings. Deliberately plain: expiry is a number per held block,
 * checked block by block; no heap, no tree, no sweep cleverness. It restates the semantics the
 * index documents: a prediction holds its blocks until the TTL after the last prediction that
 * touched them (never shortened), real events confirm their blocks and everything above, and a
 * removal or an expiry takes the rank's blocks below it too.
 */

interface Held {
  name: bigint;
  /** `undefined` once confirmed by a real event. */
  expiry: number | undefined;
}

interface RankModel {
  held: Map<string, Held>;
  names: Map<bigint, string>;
}

export interface ModelScore {
  workerId: bigint;
  dpRank: number;
  blocks: number;
  treeSize: number;
}

const key = (path: readonly bigint[]) => path.join(',');
const isUnder = (path: string, top: string) => path === top || path.startsWith(`${top},`);

/** A store or prediction naming a block twice, or by a name the rank uses elsewhere, is refused. */
function refused(r: RankModel, paths: readonly string[], names: readonly bigint[]): boolean {
  if (new Set(names).size !== names.length) return true;
  return paths.some((path, i) => {
    const at = r.names.get(names[i]);
    return at !== undefined && at !== path;
  });
}

export class PredictionModel {
  readonly counters = { expiredBlocks: 0, invalidBlock: 0, parentBlockNotFound: 0, blockNotFound: 0 };
  private readonly ranks = new Map<bigint, RankModel>();

  private rank(worker: bigint): RankModel {
    let r = this.ranks.get(worker);
    if (!r) {
      r = { held: new Map(), names: new Map() };
      this.ranks.set(worker, r);
    }
    return r;
  }

  /** Removes `top` and everything the rank holds below it; returns how many blocks went. */
  private cut(r: RankModel, top: string): number {
    let n = 0;
    for (const [path, h] of [...r.held]) {
      if (!isUnder(path, top)) continue;
      r.held.delete(path);
      r.names.delete(h.name);
      n++;
    }
    return n;
  }

  /** Every predicted block whose TTL passed at `now` goes, with what the rank holds below it. */
  sweep(now: number): void {
    for (const r of this.ranks.values()) {
      for (const [path, h] of [...r.held]) {
        if (r.held.has(path) && h.expiry !== undefined && h.expiry <= now) this.counters.expiredBlocks += this.cut(r, path);
      }
    }
  }

  /** A routing decision: `locals` named by `names`, held until `expiry` unless confirmed. */
  predict(worker: bigint, locals: readonly bigint[], names: readonly bigint[], expiry: number): void {
    const r = this.rank(worker);
    const paths = locals.map((_, i) => key(locals.slice(0, i + 1)));
    if (refused(r, paths, names)) {
      this.counters.invalidBlock++;
      return;
    }
    for (const [i, path] of paths.entries()) {
      const h = r.held.get(path);
      if (!h) {
        r.held.set(path, { name: names[i], expiry });
        r.names.set(names[i], path);
      } else if (h.expiry !== undefined) {
        h.expiry = Math.max(h.expiry, expiry);
      }
    }
  }

  /** A Stored event of `locals` after the rank's block named `parent` (at the root if `null`). */
  store(worker: bigint, parent: bigint | null, locals: readonly bigint[], names: readonly bigint[]): void {
    const r = this.rank(worker);
    let prefix: bigint[] = [];
    if (parent !== null) {
      const at = r.names.get(parent);
      if (at === undefined) {
        this.counters.parentBlockNotFound++;
        return;
      }
      if (names.includes(parent)) {
        this.counters.invalidBlock++;
        return;
      }
      prefix = at.split(',').map(BigInt);
    }
    const paths = locals.map((_, i) => key([...prefix, ...locals.slice(0, i + 1)]));
    if (refused(r, paths, names)) {
      this.counters.invalidBlock++;
      return;
    }
    for (const [i, path] of paths.entries()) {
      const h = r.held.get(path);
      if (h) r.names.delete(h.name);
      r.held.set(path, { name: names[i], expiry: undefined });
      r.names.set(names[i], path);
    }
    for (let i = 1; i <= prefix.length; i++) {
      const h = r.held.get(key(prefix.slice(0, i)));
      if (h) h.expiry = undefined;
    }
  }

  /** A Removed event: each name on its own, in order. */
  remove(worker: bigint, names: readonly bigint[]): void {
    const r = this.rank(worker);
    for (const name of names) {
      const path = r.names.get(name);
      if (path === undefined) this.counters.blockNotFound++;
      else this.cut(r, path);
    }
  }

  removeWorker(worker: bigint): void {
    this.ranks.delete(worker);
  }

  /** The rank's held paths and names (to pick valid parents and removals). */
  heldPaths(worker: bigint): Array<{ path: bigint[]; name: bigint }> {
    const r = this.ranks.get(worker);
    return r ? [...r.held].map(([p, h]) => ({ path: p.split(',').map(BigInt), name: h.name })) : [];
  }

  findMatches(query: readonly bigint[], now: number): ModelScore[] {
    const out: ModelScore[] = [];
    for (const [workerId, r] of this.ranks) {
      let n = 0;
      for (; n < query.length; n++) {
        const h = r.held.get(key(query.slice(0, n + 1)));
        if (!h || (h.expiry !== undefined && h.expiry <= now)) break;
      }
      if (n > 0) out.push({ workerId, dpRank: 0, blocks: n, treeSize: r.held.size });
    }
    return out.sort((a, b) => b.blocks - a.blocks || (a.workerId < b.workerId ? -1 : 1));
  }

  totalBlocks(): number {
    let n = 0;
    for (const r of this.ranks.values()) n += r.held.size;
    return n;
  }
}
