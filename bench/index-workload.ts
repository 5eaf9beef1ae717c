/**
 * The Mooncake-derived index workload, generated once and shared as a file so that the native,
 * pure-JS and pure-Rust runs replay exactly the same stream.
 *
 * Each trace hash id (512 tokens) becomes 512 / 64 = 8 blocks. Requests go to W workers chosen
 * by a seeded RNG; each worker keeps an LRU cache of 16,384 blocks (touched deepest first, so
 * prefixes outlive their tails, as in vLLM). Per request, in trace order: one query for its
 * blocks, then a Stored event for the blocks its worker lacks (parent-linked), then a Removed
 * event for what that worker evicts. Blocks are named by their sequence hashes, as Dynamo
 * engines name them.
 *
 * File layout (little-endian): "KVRW", u32 version 1, u32 workers, u32 block size, u32 op count;
 * then per op a u32 kind (1 query, 2 events) followed by, for a query, u32 n and n u64 local
 * hashes; for events, u32 meta length, u32 words length, the meta u32s and the words u64s of a
 * packed batch (see ts/events/packed.ts).
 */

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { packEvents } from '../ts/events/validate.js';
import { generateTrace, loadTrace, type RouterEvent, sequenceHashes, type Trace } from '../ts/index.js';
import { ROOT } from './common.js';

export const TRACE_PATH = join(ROOT, '..', 'shared', 'traces', 'conversation_trace.jsonl');
const BLOCKS_PER_ID = 8;
const CAPACITY = 16_384;

export type WorkloadOp = { query: BigUint64Array } | { meta: Uint32Array; words: BigUint64Array; blockEvents: number };

export interface Workload {
  workers: number;
  blockSize: number;
  ops: WorkloadOp[];
  source: string;
}

/** The real trace when present, else a generated one of similar shape. */
export function benchTrace(limit?: number): { trace: Trace; source: string } {
  if (existsSync(TRACE_PATH)) {
    const trace = loadTrace(TRACE_PATH);
    if (limit) trace.requests = trace.requests.slice(0, limit);
    return { trace, source: `${TRACE_PATH} (${trace.requests.length} requests)` };
  }
  console.log(`note: ${TRACE_PATH} is absent; using a generated trace instead`);
  const trace = generateTrace({ requests: limit ?? 12_000, rate: 3.4, seed: 1 });
  return { trace, source: `generated (${trace.requests.length} requests)` };
}

/** A 64-bit mix of (id, block) as (hi, lo) halves: the local hash of a sub-block. */
function localHash(id: number, j: number): bigint {
  let a = Math.imul((id * BLOCKS_PER_ID + j) ^ 0x9e3779b9, 0x85ebca6b) >>> 0;
  a = Math.imul(a ^ (a >>> 13), 0xc2b2ae35) >>> 0;
  let b = Math.imul((id ^ 0x27d4eb2f) + j * 0x165667b1, 0x9e3779b1) >>> 0;
  b = Math.imul(b ^ (b >>> 15), 0x85ebca77) >>> 0;
  return (BigInt((a ^ (a >>> 16)) >>> 0) << 32n) | BigInt((b ^ (b >>> 16)) >>> 0);
}

/** The benchmarks' seeded generator (an LCG: cheap, and the same stream in every run). */
export class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0;
  }
  int(n: number): number {
    this.s = (Math.imul(this.s, 1664525) + 1013904223) >>> 0;
    return Math.floor((this.s / 4294967296) * n);
  }
}

export function buildWorkload(trace: Trace, workers: number, seed = 42, capacity = CAPACITY): Omit<Workload, 'source'> {
  const rng = new Rng(seed);
  const caches = Array.from({ length: workers }, () => new Map<bigint, true>());
  const ops: WorkloadOp[] = [];
  for (const req of trace.requests) {
    const locals: bigint[] = [];
    for (const id of req.hashIds) for (let j = 0; j < BLOCKS_PER_ID; j++) locals.push(localHash(id, j));
    const query = BigUint64Array.from(locals);
    const seq = sequenceHashes(query, { backend: 'native' });
    ops.push({ query });
    const worker = rng.int(workers);
    const cache = caches[worker];
    let held = 0;
    while (held < seq.length && cache.has(seq[held])) held++;
    const events: RouterEvent[] = [];
    if (held < seq.length) {
      const blocks = [];
      for (let i = held; i < seq.length; i++) blocks.push({ block_hash: seq[i], tokens_hash: query[i] });
      events.push({
        worker_id: worker,
        event: { event_id: 0, data: { stored: { parent_hash: held > 0 ? seq[held - 1] : null, blocks } } },
      });
    }
    for (let i = seq.length - 1; i >= 0; i--) {
      cache.delete(seq[i]);
      cache.set(seq[i], true);
    }
    const evicted: bigint[] = [];
    for (const key of cache.keys()) {
      if (cache.size - evicted.length <= capacity) break;
      evicted.push(key);
    }
    for (const key of evicted) cache.delete(key);
    if (evicted.length > 0) events.push({ worker_id: worker, event: { event_id: 0, data: { removed: { block_hashes: evicted } } } });
    if (events.length > 0) {
      const packed = packEvents(events, (i) => `events[${i}]`);
      ops.push({ ...packed, blockEvents: seq.length - held + evicted.length });
    }
  }
  return { workers, blockSize: 64, ops };
}

/**
 * The synthetic churn trace: many short prompts that branch early (a tree of 32 roots, each id
 * drawn from a small alphabet at every depth of 1–6), so the index is mostly short branching
 * prefixes, and a small per-worker cache (use with a capacity of 1,024 blocks) so that most
 * events are removals.
 */
export function churnTrace(requests: number, seed = 7): Trace {
  const rng = new Rng(seed);
  const out: Trace['requests'] = [];
  for (let r = 0; r < requests; r++) {
    const depth = 1 + rng.int(6);
    const hashIds: number[] = [rng.int(32)];
    for (let d = 1; d < depth; d++) hashIds.push(hashIds[d - 1] * 8 + 1 + rng.int(8));
    out.push({ line: 0, timestampMs: r, inputLength: 512 * depth, outputLength: 1, hashIds });
  }
  return { traceBlockSize: 512, requests: out };
}

export const CHURN_CAPACITY = 1024;

export function writeWorkload(path: string, w: Omit<Workload, 'source'>): void {
  const parts: Uint8Array[] = [];
  const u32 = (...values: number[]) => parts.push(new Uint8Array(Uint32Array.from(values).buffer));
  parts.push(new TextEncoder().encode('KVRW'));
  u32(1, w.workers, w.blockSize, w.ops.length);
  for (const op of w.ops) {
    if ('query' in op) {
      u32(1, op.query.length);
      parts.push(new Uint8Array(op.query.buffer.slice(0)));
    } else {
      u32(2, op.meta.length, op.words.length);
      parts.push(new Uint8Array(op.meta.buffer.slice(0)), new Uint8Array(op.words.buffer.slice(0)));
    }
  }
  writeFileSync(path, Buffer.concat(parts));
}

export function readWorkload(path: string): Omit<Workload, 'source'> {
  const buf = readFileSync(path);
  const bytes = new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (new TextDecoder().decode(bytes.subarray(0, 4)) !== 'KVRW' || view.getUint32(4, true) !== 1)
    throw new Error(`${path} is not a kvroute index workload`);
  const workers = view.getUint32(8, true);
  const blockSize = view.getUint32(12, true);
  const count = view.getUint32(16, true);
  let o = 20;
  const ops: WorkloadOp[] = [];
  const copy64 = (n: number) => {
    const out = new BigUint64Array(bytes.slice(o, o + 8 * n).buffer);
    o += 8 * n;
    return out;
  };
  for (let k = 0; k < count; k++) {
    const kind = view.getUint32(o, true);
    o += 4;
    if (kind === 1) {
      const n = view.getUint32(o, true);
      o += 4;
      ops.push({ query: copy64(n) });
    } else {
      const metaLen = view.getUint32(o, true);
      const wordsLen = view.getUint32(o + 4, true);
      o += 8;
      const meta = new Uint32Array(bytes.slice(o, o + 4 * metaLen).buffer);
      o += 4 * metaLen;
      const words = copy64(wordsLen);
      let blockEvents = 0;
      for (let m = 0; m < meta.length; m += 4) blockEvents += meta[m + 3];
      ops.push({ meta, words, blockEvents });
    }
  }
  return { workers, blockSize, ops };
}
