/**
 * `npm run bench:vs-dynamo`: kvroute-core against NVIDIA Dynamo 1.6.1's own crate
 * (`bench/vs-dynamo`, a separate cargo workspace depending on `dynamo-kv-router = "=1.6.1"`):
 * the `bench:ingest` engine payloads (frames → visible in the index), then the `bench:index`
 * workload on both indexes (ingest, lockstep walk, idle finds, memory), both systems alternating
 * over 3 rounds in one process. Each system gets its events built before its timed region (the
 * index's work is timed, not the copying of events); the earlier method, cloning each event
 * inside the timed loop, is still reported beside it, and so are each round's page faults (about
 * 2 µs each on this VM, and which system gets recycled memory varies). The first build fetches and compiles Dynamo
 * and tokio, which takes minutes on 2 cores. Not run in CI.
 */

import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { fmt, printTable, QUICK, RESULTS, writeResult } from './common.js';
import { benchTrace } from './index-workload.js';
import { captureBatches, type IngestWorkload, mooncakeBatches, writeIngestWorkload } from './ingest-workload.js';
import { buildVsDynamo, indexWorkloadFiles } from './vs-dynamo-setup.js';

const binary = buildVsDynamo();

mkdirSync(RESULTS, { recursive: true });
const { trace, source } = benchTrace(QUICK ? 300 : 4000);
const workloads: IngestWorkload[] = [{ ...mooncakeBatches(trace, 16), source: `mooncake W=16: ${source}` }];
const captures = captureBatches(QUICK ? 4 : 64);
if (captures) workloads.push({ ...captures, source: `captures ×${QUICK ? 4 : 64} workers` });

/**
 * Each CPU's effective clock in GHz (`kvroute-vs-dynamo clock`: a chain of dependent additions,
 * pinned with `taskset` when it is there). On a VM whose virtual CPUs share physical cores with
 * other tenants it moves between sittings, and the index's rates with it: the figure says which
 * kind of sitting a result comes from.
 */
function effectiveClocks(): number[] {
  const clock = (cpu?: number) =>
    Number(
      cpu === undefined
        ? execFileSync(binary, ['clock'], { encoding: 'utf8' })
        : execFileSync('taskset', ['-c', String(cpu), binary, 'clock'], { encoding: 'utf8' }),
    );
  try {
    return cpus().map((_, cpu) => clock(cpu));
  } catch {
    return [clock()];
  }
}

const rows: Array<Record<string, string | number>> = [];
const results: Record<string, unknown> = {};
const loadBefore = loadavg();
const clocksBefore = effectiveClocks();
console.log(`effective clock per CPU before: ${clocksBefore.map((g) => `${fmt(g, 2)} GHz`).join(', ')}`);
for (const [i, w] of workloads.entries()) {
  const file = join(RESULTS, `vs-dynamo-ingest-${i}.bin`);
  writeIngestWorkload(file, w);
  const out = JSON.parse(execFileSync(binary, ['ingest', file, '3'], { encoding: 'utf8', maxBuffer: 1 << 24 }).trim()) as Record<
    string,
    number
  >;
  results[w.source] = out;
  rows.push({
    workload: w.source,
    batches: out.batches,
    'kvroute block-events/s': fmt(out.kvrouteBlockEventsPerSec, 0),
    'dynamo block-events/s': fmt(out.dynamoBlockEventsPerSec, 0),
    'kvroute / dynamo': fmt(out.ratio, 2),
    'queries with different overlaps': `${out.queriesWithDifferentOverlaps} of ${out.queries}`,
  });
}
printTable('engine payloads → visible in the index: kvroute-core vs dynamo-kv-router 1.6.1 (median of 3 alternating rounds)', rows);

// The index itself: the bench:index workload's events, already parsed, on both indexes.
const indexRows: Array<Record<string, string | number>> = [];
const scaling: Record<string, unknown> = {};
const scalingRows: Array<Record<string, string | number>> = [];
let indexSource = '';
for (const { name, file, source } of indexWorkloadFiles()) {
  if (source !== 'synthetic') indexSource = source;
  const out = JSON.parse(execFileSync(binary, ['index', file, '3'], { encoding: 'utf8', maxBuffer: 1 << 24 }).trim());
  results[`index ${name}`] = out;
  const sc = JSON.parse(execFileSync(binary, ['scaling', file, '3'], { encoding: 'utf8', maxBuffer: 1 << 24 }).trim());
  scaling[name] = sc;
  const byWriters = sc.ingestByWriters as Record<
    string,
    { kvrouteBlockEventsPerSec: number; dynamoBlockEventsPerSec: number; ratio: number }
  >;
  scalingRows.push({
    workload: name,
    ...Object.fromEntries(
      Object.entries(byWriters).map(([w, r]) => [
        `${w} writer${w === '1' ? '' : 's'}: kvroute / dynamo M/s (ratio)`,
        `${fmt(r.kvrouteBlockEventsPerSec / 1e6, 2)} / ${fmt(r.dynamoBlockEventsPerSec / 1e6, 2)} (${fmt(r.ratio, 2)})`,
      ]),
    ),
    'concurrent: writers M/s kvroute / dynamo': `${fmt(sc.concurrent.kvroute.writerBlockEventsPerSec / 1e6, 2)} / ${fmt(sc.concurrent.dynamo.writerBlockEventsPerSec / 1e6, 2)}`,
    'concurrent: reader p99 µs kvroute / dynamo': `${fmt(sc.concurrent.kvroute.readerUs.p99, 1)} / ${fmt(sc.concurrent.dynamo.readerUs.p99, 1)}`,
    // Three busy threads on two cores: how the scheduler shared them, and what each index's
    // writers did with the time they got (see bench/vs-dynamo/src/scaling.rs).
    'concurrent: cores writers + reader, kvroute / dynamo': `${fmt(sc.concurrent.kvroute.writerCores, 2)} + ${fmt(sc.concurrent.kvroute.readerCores, 2)} / ${fmt(sc.concurrent.dynamo.writerCores, 2)} + ${fmt(sc.concurrent.dynamo.readerCores, 2)}`,
    'concurrent: writers per CPU-second ratio (kvroute/dynamo)': fmt(
      sc.concurrent.kvroute.writerBlockEventsPerCpuSec / sc.concurrent.dynamo.writerBlockEventsPerCpuSec,
      2,
    ),
    'memoryBytes / allocator': fmt(sc.memory.reportedOverLive, 3),
    'empty index bytes': sc.memory.emptyIndexLiveBytes,
  });
  indexRows.push({
    workload: name,
    'ingest ratio (kvroute/dynamo)': fmt(out.ingestRatio, 2),
    'ingest CPU-time ratio (dynamo/kvroute)': fmt(out.ingestCpuRatio, 2),
    'ingest ratio, events cloned in the timed loop': fmt(out.ingestRatioCloningInLoop, 2),
    'page faults per round kvroute / dynamo': `${out.ingestMinorFaults.kvroute.join(' ')} / ${out.ingestMinorFaults.dynamo.join(' ')}`,
    'kvroute ingest M/s': fmt(out.ingestBlockEventsPerSec.kvroute / 1e6, 2),
    'dynamo ingest M/s': fmt(out.ingestBlockEventsPerSec.dynamo / 1e6, 2),
    'lockstep time ratio': fmt(out.lockstepTimeRatio, 2),
    'idle find p50/p99 µs kvroute': `${fmt(out.idleFindUs.kvroute.p50, 2)} / ${fmt(out.idleFindUs.kvroute.p99, 2)}`,
    'idle find p50/p99 µs dynamo': `${fmt(out.idleFindUs.dynamo.p50, 2)} / ${fmt(out.idleFindUs.dynamo.p99, 2)}`,
    'bytes/held block kvroute / dynamo': `${fmt(out.liveBytesPerHeldBlock.kvroute, 0)} / ${fmt(out.liveBytesPerHeldBlock.dynamo, 0)}`,
    'different overlaps': `${out.queriesWithDifferentOverlaps} of ${out.queries}`,
  });
}
printTable(
  `index workloads (${indexSource}; churn: synthetic): kvroute-core KvIndex vs ThreadPoolIndexer<ConcurrentRadixTreeCompressed>, 2 writers`,
  indexRows,
);
printTable(
  'writer scaling (ingest) and writes concurrent with a reader (each the median of 3 alternating rounds), memory accounting',
  scalingRows,
);
const clocksAfter = effectiveClocks();
console.log(`effective clock per CPU after: ${clocksAfter.map((g) => `${fmt(g, 2)} GHz`).join(', ')}`);
writeResult('vs-dynamo', {
  parameters: { rounds: 3, writerThreads: 2 },
  loadavgBefore: loadBefore,
  loadavgAfter: loadavg(),
  effectiveClockGHz: { before: clocksBefore, after: clocksAfter },
  results,
  scaling,
  table: rows,
  indexTable: indexRows,
  scalingTable: scalingRows,
});
