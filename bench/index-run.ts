/**
 * Runs the index workload on one backend in this process and prints its figures as JSON.
 * `bench/index.ts` starts one such process per backend so that peak RSS is per backend.
 * Usage: tsx bench/index-run.ts <workload file> <native|js>
 */

import { KIND_REMOVED, KIND_STORED } from '../ts/events/packed.js';
import { KvIndex, type RouterEvent, stringifyEvents } from '../ts/index.js';
import { percentile, sortedCopy } from './common.js';
import { readWorkload } from './index-workload.js';

const [path, backend] = process.argv.slice(2) as [string, 'native' | 'js'];
const BATCH = 512;

/** Rebuilds event objects, as a service would hold them after parsing, so validation is timed. */
function toEvents(meta: Uint32Array, words: BigUint64Array): RouterEvent[] {
  const out: RouterEvent[] = [];
  let w = 0;
  for (let m = 0; m < meta.length; m += 4) {
    const [kind, dpRank, flags, count] = [meta[m], meta[m + 1], meta[m + 2], meta[m + 3]];
    const worker_id = words[w];
    w += 2;
    if (kind === KIND_STORED) {
      const parent_hash = flags & 1 ? words[w++] : null;
      const blocks = [];
      for (let i = 0; i < count; i++, w += 2) blocks.push({ block_hash: words[w], tokens_hash: words[w + 1] });
      out.push({ worker_id, event: { event_id: m, dp_rank: dpRank, data: { stored: { parent_hash, blocks } } } });
    } else if (kind === KIND_REMOVED) {
      out.push({
        worker_id,
        event: { event_id: m, dp_rank: dpRank, data: { removed: { block_hashes: Array.from(words.subarray(w, w + count)) } } },
      });
      w += count;
    }
  }
  return out;
}

const workload = readWorkload(path);
type Step = { query: BigUint64Array } | { events: RouterEvent[]; blockEvents: number };
const steps: Step[] = workload.ops.map((op) =>
  'query' in op ? { query: op.query } : { events: toEvents(op.meta, op.words), blockEvents: op.blockEvents },
);
const allEvents = steps.flatMap((s) => ('events' in s ? s.events : []));
const blockEvents = steps.reduce((n, s) => n + ('blockEvents' in s ? s.blockEvents : 0), 0);
global.gc?.();
const rssBefore = process.memoryUsage().rss;

// 1. Ingest: every event in batches, until all are visible.
const ingest = new KvIndex({ blockSize: workload.blockSize, backend });
let t0 = performance.now();
for (let i = 0; i < allEvents.length; i += BATCH) ingest.applyEvents(allEvents.slice(i, i + BATCH));
await ingest.flush();
const ingestSeconds = (performance.now() - t0) / 1000;
ingest.close();

// 1b. The same ingest from JSON text (NDJSON batches written before timing: a service that
// receives events as text, parsed in Rust on the native backend) and from packed columns (the
// validated form both backends consume: validation and parsing excluded, for comparison).
const texts: string[] = [];
for (let i = 0; i < allEvents.length; i += BATCH) texts.push(stringifyEvents(allEvents.slice(i, i + BATCH), 'ndjson'));
const textIndex = new KvIndex({ blockSize: workload.blockSize, backend });
t0 = performance.now();
for (const text of texts) textIndex.applyEvents(text);
await textIndex.flush();
const jsonIngestSeconds = (performance.now() - t0) / 1000;
textIndex.close();
const packedIndex = new KvIndex({ blockSize: workload.blockSize, backend });
const inner = (packedIndex as unknown as { inner: { applyPacked(m: Uint32Array, w: BigUint64Array, now: number): void } }).inner;
t0 = performance.now();
for (const op of workload.ops) if ('meta' in op) inner.applyPacked(op.meta, op.words, 0);
await packedIndex.flush();
const packedIngestSeconds = (performance.now() - t0) / 1000;
packedIndex.close();

// 2. Interleaved, in trace order: a query, then that request's events.
global.gc?.();
const index = new KvIndex({ blockSize: workload.blockSize, backend });
const latencies: number[] = [];
let queryNs = 0;
t0 = performance.now();
for (const step of steps) {
  if ('query' in step) {
    const start = process.hrtime.bigint();
    index.findMatches(step.query);
    const ns = Number(process.hrtime.bigint() - start);
    latencies.push(ns);
    queryNs += ns;
  } else {
    index.applyEvents(step.events);
  }
}
await index.flush();
const interleavedSeconds = (performance.now() - t0) / 1000;
const stats = index.stats();
const sorted = sortedCopy(latencies);

// 3. The same queries on the settled index, with no writes running: the read path alone.
const quiet: number[] = [];
for (const step of steps) {
  if (!('query' in step)) continue;
  const start = process.hrtime.bigint();
  index.findMatches(step.query);
  quiet.push(Number(process.hrtime.bigint() - start));
}
const quietSorted = sortedCopy(quiet);
const peakRss = process.resourceUsage().maxRSS * 1024;
index.close();

console.log(
  JSON.stringify({
    backend,
    events: allEvents.length,
    blockEvents,
    queries: latencies.length,
    ingestSeconds,
    eventsPerSec: allEvents.length / ingestSeconds,
    blockEventsPerSec: blockEvents / ingestSeconds,
    jsonBlockEventsPerSec: blockEvents / jsonIngestSeconds,
    packedBlockEventsPerSec: blockEvents / packedIngestSeconds,
    interleavedSeconds,
    findMatchesPerSec: latencies.length / (queryNs / 1e9),
    p50us: percentile(sorted, 50) / 1000,
    p99us: percentile(sorted, 99) / 1000,
    p999us: percentile(sorted, 99.9) / 1000,
    quietP50us: percentile(quietSorted, 50) / 1000,
    quietP99us: percentile(quietSorted, 99) / 1000,
    heldBlocks: stats.blocks,
    treeNodes: stats.treeNodes,
    memoryBytes: stats.memoryBytes,
    bytesPerHeldBlock: stats.bytesPerHeldBlock,
    peakRssDeltaMiB: (peakRss - rssBefore) / 2 ** 20,
  }),
);
