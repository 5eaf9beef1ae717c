/** Chains of vLLM-wire batches, and the names an index holds: the engine-source tests' vocabulary. */
import type { KvIndex } from '../../ts/index.js';
import { packBatch, vllmStored } from './engine-wire.js';

/** A chain of `n` one-block batches under `parent`: hashes base+1..base+n, tokens derived from them. */
export function chain(base: bigint, n: number, parent: bigint | null = null): Uint8Array[] {
  const out: Uint8Array[] = [];
  let p = parent;
  for (let i = 1n; i <= BigInt(n); i++) {
    const h = base + i;
    out.push(packBatch([vllmStored([h], p, [Number(h % 1000n), 1, 2, 3])]));
    p = h;
  }
  return out;
}

/** The names `chain(base, n)` gives its blocks: base+1..base+n. */
export const chainNames = (base: bigint, n: number): bigint[] => Array.from({ length: n }, (_, i) => base + BigInt(i) + 1n);

/** The engine names the index holds for a dp rank, sorted. */
export function heldNames(index: KvIndex, dpRank = 0): bigint[] {
  return index
    .dump()
    .filter((e) => e.event.dp_rank === dpRank)
    .flatMap((e) => e.event.data.stored.blocks.map((b) => BigInt(b.block_hash)))
    .sort((a, b) => (a < b ? -1 : 1));
}
