/**
 * Engine-batch workloads for `bench:ingest` and the `bench/vs-dynamo` harness: the payloads an
 * engine fleet would publish, encoded exactly as vLLM 0.33's publisher lays them out (map
 * events, u64 hashes), generated once into a file so that every system ingests the same bytes.
 *
 * * **mooncake**: the conversation trace (or a generated one like it) routed to W workers by a
 *   seeded RNG, each with an LRU of 16,384 blocks of 64 tokens; per request one batch: a
 *   BlockStored for the blocks the worker lacks (parent-linked, tokens synthesised from the
 *   trace's hash ids) and a BlockRemoved per evicted block, as vLLM's block pool emits them.
 * * **captures**: every batch of `../shared/engine-events/` replayed for W workers (distinct
 *   worker ids), when the captures are present.
 *
 * File layout (little-endian): "KVIW", u32 version 1, u32 block size, u32 batch count, u32 query
 * count; per batch u32 worker, u32 dp rank, u32 seq, u32 block events, u32 length, payload; per
 * query u32 n and n u64 local hashes (kvroute's hashes of the request's tokens, so a harness can
 * compare overlaps without hashing).
 */

import { writeFileSync } from 'node:fs';
import { batchesByRank, captureNames, readCapture } from '../test/helpers/kvcap.js';
import { blockHashes, encodeEngineBatch, sequenceHashes, type Trace, type WireEvent } from '../ts/index.js';
import { Rng } from './index-workload.js';

const BLOCK = 64;
const PER_ID = 512 / BLOCK;
const CAPACITY = 16_384;

export interface EngineBatch {
  worker: number;
  dpRank: number;
  seq: number;
  /** Blocks stored plus hashes removed. */
  blockEvents: number;
  payload: Uint8Array;
}

export interface IngestWorkload {
  blockSize: number;
  batches: EngineBatch[];
  queries: BigUint64Array[];
  source: string;
}

function mix32(x: number): number {
  let h = Math.imul(x ^ (x >>> 16), 0x7feb352d) >>> 0;
  h = Math.imul(h ^ (h >>> 15), 0x846ca68b) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

/** The 64 tokens of sub-block `j` of trace hash id `id` (ids below a 152k vocabulary). */
function blockTokens(id: number, j: number): number[] {
  const out = new Array<number>(BLOCK);
  for (let t = 0; t < BLOCK; t++) out[t] = mix32(id * 512 + j * BLOCK + t) % 151_936;
  return out;
}

/** The Mooncake-derived stream for `workers` workers. */
export function mooncakeBatches(trace: Trace, workers: number, seed = 42): Omit<IngestWorkload, 'source'> {
  const rng = new Rng(seed);
  const caches = Array.from({ length: workers }, () => new Map<bigint, true>());
  const seqs = new Array<number>(workers).fill(0);
  const batches: EngineBatch[] = [];
  const queries: BigUint64Array[] = [];
  for (const req of trace.requests) {
    const tokens: number[][] = [];
    for (const id of req.hashIds) for (let j = 0; j < PER_ID; j++) tokens.push(blockTokens(id, j));
    const locals = blockHashes(tokens.flat(), BLOCK, { backend: 'native' });
    queries.push(locals);
    // Engine hashes: chained over the prefix, as vLLM's are (here with kvroute's own chain).
    const engine = sequenceHashes(locals, { backend: 'native' });
    const worker = rng.int(workers);
    const cache = caches[worker];
    let held = 0;
    while (held < engine.length && cache.has(engine[held])) held++;
    const events: WireEvent[] = [];
    if (held < engine.length) {
      events.push({
        type: 'BlockStored',
        blockHashes: [...engine.slice(held)],
        parent: held > 0 ? engine[held - 1] : null,
        tokens: tokens.slice(held).flat(),
        blockSize: BLOCK,
      });
    }
    for (let i = engine.length - 1; i >= 0; i--) {
      cache.delete(engine[i]);
      cache.set(engine[i], true);
    }
    const evicted: bigint[] = [];
    for (const key of cache.keys()) {
      if (cache.size - evicted.length <= CAPACITY) break;
      evicted.push(key);
    }
    for (const key of evicted) {
      cache.delete(key);
      events.push({ type: 'BlockRemoved', blockHashes: [key] });
    }
    if (events.length === 0) continue;
    // Exactly as vLLM 0.33's publisher lays batches out (the encoder is checked against its captures).
    const payload = encodeEngineBatch(req.timestampMs / 1000, events, 0, 'vllm-0.33');
    batches.push({ worker, dpRank: 0, seq: seqs[worker]++, blockEvents: engine.length - held + evicted.length, payload });
  }
  return { blockSize: BLOCK, batches, queries };
}

/** Every captured batch, for `workers` workers; undefined when the captures are absent. */
export function captureBatches(workers: number): Omit<IngestWorkload, 'source'> | undefined {
  const names = captureNames().filter((n) => readCapture(n).truth.block_size === 16);
  if (names.length === 0) return undefined;
  const batches: EngineBatch[] = [];
  for (let w = 0; w < workers; w++) {
    for (const name of names) {
      const capture = readCapture(name);
      for (const [rank, list] of batchesByRank(capture)) {
        for (const b of list) {
          const blocks = capture.truth.ranks[String(rank)].batches
            .filter((t) => t.seq === Number(b.seq))
            .flatMap((t) => t.events)
            .reduce((n, e) => n + ((e.block_hashes as unknown[] | undefined)?.length ?? 0), 0);
          // One worker id per (copy, capture) so that each capture's stream stays its own.
          batches.push({
            worker: w * names.length + names.indexOf(name),
            dpRank: rank,
            seq: Number(b.seq),
            blockEvents: blocks,
            payload: b.payload,
          });
        }
      }
    }
  }
  return { blockSize: 16, batches, queries: [] };
}

export function writeIngestWorkload(path: string, w: Omit<IngestWorkload, 'source'>): void {
  const parts: Uint8Array[] = [];
  const u32 = (...v: number[]) => parts.push(new Uint8Array(Uint32Array.from(v).buffer));
  parts.push(new TextEncoder().encode('KVIW'));
  u32(1, w.blockSize, w.batches.length, w.queries.length);
  for (const b of w.batches) {
    u32(b.worker, b.dpRank, b.seq, b.blockEvents, b.payload.length);
    parts.push(b.payload);
  }
  for (const q of w.queries) {
    u32(q.length);
    parts.push(new Uint8Array(q.buffer.slice(q.byteOffset, q.byteOffset + q.byteLength)));
  }
  writeFileSync(path, Buffer.concat(parts));
}
