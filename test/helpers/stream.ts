import type { RouterEvent } from '../../ts/index.js';
import { names } from './events.js';
import { Model, type ModelEvent } from './model.js';
import { Rng } from './random.js';

export type Step = { events: RouterEvent[] } | { removeWorker: bigint; dpRank?: number };

const WORKERS = [0n, 1n, 2n, 3n];
const RANKS = [0, 1];
const ALPHABET = 5;

/**
 * Seeded random KV-event streams for differential tests. The stream keeps its own reference
 * model, which it uses to pick realistic parents and removals (held paths, continuations,
 * duplicates) mixed with foreign and unknown ones. Worker 3 names blocks differently from the
 * others. A small local-hash alphabet makes paths share prefixes, branch and split edges.
 */
export class RandomStream {
  readonly model = new Model();
  private readonly rng: Rng;
  private readonly recent: ModelEvent[] = [];
  emitted = 0;

  constructor(seed: number) {
    this.rng = new Rng(seed);
  }

  next(): Step {
    const r = this.rng;
    if (r.chance(0.01)) {
      const worker = r.pick(WORKERS);
      const dpRank = r.chance(0.5) ? r.pick(RANKS) : undefined;
      this.model.removeWorker(worker, dpRank);
      return { removeWorker: worker, dpRank };
    }
    const events: RouterEvent[] = [];
    for (let n = 1 + r.int(40); n > 0; n--) {
      const e = this.event();
      this.model.apply(e);
      this.recent.push(e);
      if (this.recent.length > 64) this.recent.shift();
      events.push(toRouterEvent(e));
    }
    this.emitted += events.length;
    return { events };
  }

  /**
   * What an engine's LRU evicts: a held block and its ancestors, leaf first (the order engines
   * send), sometimes cut short, reversed, or with an unknown or repeated name mixed in.
   */
  private evictedChain(held: Array<{ path: bigint[]; ext: bigint }>): bigint[] {
    const r = this.rng;
    const leaf = r.pick(held);
    const isPrefix = (p: bigint[]) => p.length <= leaf.path.length && p.every((x, i) => x === leaf.path[i]);
    const chain = held.filter((h) => isPrefix(h.path)).sort((a, b) => b.path.length - a.path.length);
    const hashes = chain.slice(0, 1 + r.int(chain.length)).map((h) => h.ext);
    const twist = r.u32() % 6;
    if (twist === 0) hashes.reverse();
    if (twist === 1) hashes.splice(r.int(hashes.length + 1), 0, r.u64());
    if (twist === 2) hashes.splice(r.int(hashes.length + 1), 0, r.pick(hashes));
    return hashes;
  }

  private event(): ModelEvent {
    const r = this.rng;
    const worker = r.pick(WORKERS);
    const dpRank = r.pick(RANKS);
    const salt = worker === 3n ? 0x5eedn + BigInt(dpRank) : 0n;
    const held = this.model.heldPaths(worker, dpRank);
    const roll = r.u32() / 4294967296;
    if (roll < 0.05 && this.recent.length > 0) return r.pick(this.recent); // replay: duplicates, or stale for another state
    if (roll < 0.08) return { worker, dpRank, data: 'cleared' };
    if (roll < 0.22 && held.length > 0) return { worker, dpRank, data: { removed: this.evictedChain(held) } };
    if (roll < 0.35) {
      const hashes: bigint[] = [];
      for (let k = 1 + r.int(3); k > 0; k--) hashes.push(held.length > 0 && !r.chance(0.15) ? r.pick(held).ext : r.u64());
      return { worker, dpRank, data: { removed: hashes } };
    }
    let prefix: bigint[] = [];
    let parent: bigint | null = null;
    const p = r.u32() / 4294967296;
    if (p < 0.55 && held.length > 0) {
      const h = r.pick(held);
      prefix = h.path;
      parent = h.ext;
    } else if (p < 0.62) {
      const other = this.model.heldPaths(r.pick(WORKERS), r.pick(RANKS));
      if (other.length > 0) {
        const h = r.pick(other);
        prefix = h.path;
        parent = h.ext; // usually foreign: rejected unless this rank happens to hold it
      }
    } else if (p < 0.65) {
      parent = r.u64();
    }
    // Mostly short stores; now and then one long enough to be applied in parts natively.
    const length = r.chance(0.02) ? 65 + r.int(100) : 1 + r.int(4);
    const locals = Array.from({ length }, () => BigInt(1 + r.int(ALPHABET)));
    let exts = names([...prefix, ...locals], salt).slice(prefix.length);
    if (r.chance(0.03)) exts = exts.map(() => BigInt(1 + r.int(6))); // provoke renames and name conflicts
    return { worker, dpRank, data: { stored: { parent, blocks: locals.map((local, i) => ({ ext: exts[i], local })) } } };
  }

  /** Queries that hit held paths, their extensions, and random sequences. */
  queries(count: number): bigint[][] {
    const out: bigint[][] = [];
    for (let k = 0; k < count; k++) {
      const held = this.model.heldPaths(this.rng.pick(WORKERS), this.rng.pick(RANKS));
      if (held.length > 0 && this.rng.chance(0.7)) {
        const h = this.rng.pick(held).path;
        out.push([...h, ...Array.from({ length: this.rng.int(3) }, () => BigInt(1 + this.rng.int(ALPHABET)))]);
      } else {
        out.push(Array.from({ length: 1 + this.rng.int(6) }, () => BigInt(1 + this.rng.int(ALPHABET))));
      }
    }
    return out;
  }
}

function toRouterEvent(e: ModelEvent): RouterEvent {
  const event = (data: RouterEvent['event']['data']): RouterEvent => ({
    worker_id: e.worker,
    event: { event_id: 0, dp_rank: e.dpRank, data },
  });
  if (e.data === 'cleared') return event('cleared');
  if ('removed' in e.data) return event({ removed: { block_hashes: e.data.removed } });
  const { parent, blocks } = e.data.stored;
  return event({ stored: { parent_hash: parent, blocks: blocks.map((b) => ({ block_hash: b.ext, tokens_hash: b.local })) } });
}
