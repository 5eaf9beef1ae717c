/**
 * The reference model for the differential tests: per rank, name → path and path → name, with
 * paths as strings. Deliberately plain: it restates the semantics, with no tree at all.
 */

interface RankModel {
  names: Map<bigint, string>;
  held: Map<string, bigint>;
}

export interface ModelEvent {
  worker: bigint;
  dpRank: number;
  data: { stored: { parent: bigint | null; blocks: Array<{ ext: bigint; local: bigint }> } } | { removed: bigint[] } | 'cleared';
}

const key = (path: readonly bigint[]) => path.join(',');

export class Model {
  readonly ranks = new Map<string, { worker: bigint; dpRank: number; m: RankModel }>();

  private rank(worker: bigint, dpRank: number): RankModel {
    const k = `${worker}:${dpRank}`;
    let r = this.ranks.get(k);
    if (!r) {
      r = { worker, dpRank, m: { names: new Map(), held: new Map() } };
      this.ranks.set(k, r);
    }
    return r.m;
  }

  apply(e: ModelEvent): void {
    const r = this.rank(e.worker, e.dpRank);
    if (e.data === 'cleared') {
      r.names.clear();
      r.held.clear();
    } else if ('removed' in e.data) {
      for (const h of e.data.removed) {
        const path = r.names.get(h);
        if (path === undefined) continue;
        for (const [p, name] of [...r.held]) {
          if (p === path || p.startsWith(`${path},`)) {
            r.held.delete(p);
            r.names.delete(name);
          }
        }
      }
    } else {
      const { parent, blocks } = e.data.stored;
      let path: string[] = [];
      if (parent !== null) {
        const p = r.names.get(parent);
        if (p === undefined) return;
        path = p.split(',');
        if (blocks.some((b) => b.ext === parent)) return;
      }
      if (new Set(blocks.map((b) => b.ext)).size !== blocks.length) return;
      const planned: Array<[string, bigint]> = [];
      for (const b of blocks) {
        path = [...path, String(b.local)];
        const k = path.join(',');
        const named = r.names.get(b.ext);
        if (named !== undefined && named !== k) return;
        planned.push([k, b.ext]);
      }
      for (const [k, ext] of planned) {
        const old = r.held.get(k);
        if (old !== undefined) r.names.delete(old);
        r.held.set(k, ext);
        r.names.set(ext, k);
      }
    }
  }

  removeWorker(worker: bigint, dpRank?: number): void {
    for (const [k, r] of [...this.ranks]) if (r.worker === worker && (dpRank === undefined || r.dpRank === dpRank)) this.ranks.delete(k);
  }

  findMatches(query: readonly bigint[]): Array<{ workerId: bigint; dpRank: number; blocks: number; treeSize: number }> {
    const out = [];
    for (const { worker, dpRank, m } of this.ranks.values()) {
      let n = 0;
      while (n < query.length && m.held.has(key(query.slice(0, n + 1)))) n++;
      if (n > 0) out.push({ workerId: worker, dpRank, blocks: n, treeSize: m.held.size });
    }
    return out.sort(
      (a, b) => b.blocks - a.blocks || (a.workerId < b.workerId ? -1 : a.workerId > b.workerId ? 1 : 0) || a.dpRank - b.dpRank,
    );
  }

  totalBlocks(): number {
    let n = 0;
    for (const r of this.ranks.values()) n += r.m.held.size;
    return n;
  }

  /** Every path some rank holds, for generating valid parents and removals. */
  heldPaths(worker: bigint, dpRank: number): Array<{ path: bigint[]; ext: bigint }> {
    const r = this.ranks.get(`${worker}:${dpRank}`);
    if (!r) return [];
    return [...r.m.held].map(([p, ext]) => ({ path: p.split(',').map(BigInt), ext }));
  }
}
