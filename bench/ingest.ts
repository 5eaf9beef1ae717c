/**
 * The ingestion benchmark: engine batches (see ingest-workload.ts) → visible in the index.
 *
 * * **applyEngineBatch**: every payload through `KvIndex.applyEngineBatch` (decode, convert,
 *   hash, apply), then `flush()`; native and pure JS side by side.
 * * **sockets**: a publisher process sends every batch over ZeroMQ to one `subscribe()`d source
 *   per worker; timed from "go" until every source has applied its last seq and the index is
 *   flushed. The JavaScript thread's busy time in that window comes from
 *   `performance.eventLoopUtilization()`: with the native backend it should be about zero.
 *
 * `--quick` runs small workloads in seconds. Dynamo's own decoder and indexer on the same bytes:
 * `npm run bench:vs-dynamo`.
 */

import { fork } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { KvIndex } from '../ts/index.js';
import { fmt, printTable, QUICK, RESULTS, ROOT, writeResult } from './common.js';
import { benchTrace } from './index-workload.js';
import { captureBatches, type EngineBatch, type IngestWorkload, mooncakeBatches, writeIngestWorkload } from './ingest-workload.js';

type Backend = 'native' | 'js';

async function viaApply(w: IngestWorkload, backend: Backend) {
  const index = new KvIndex({ blockSize: w.blockSize, backend });
  const t0 = performance.now();
  for (const b of w.batches) index.applyEngineBatch(b.worker, b.dpRank, b.payload);
  await index.flush();
  const seconds = (performance.now() - t0) / 1000;
  const blocks = index.stats().blocks;
  index.close();
  return figures(w.batches, seconds, { heldBlocks: blocks });
}

function figures(batches: EngineBatch[], seconds: number, extra: Record<string, number> = {}) {
  const blockEvents = batches.reduce((n, b) => n + b.blockEvents, 0);
  const bytes = batches.reduce((n, b) => n + b.payload.length, 0);
  return {
    seconds,
    batchesPerSec: batches.length / seconds,
    blockEventsPerSec: blockEvents / seconds,
    mbPerSec: bytes / seconds / 1e6,
    ...extra,
  };
}

async function viaSockets(w: IngestWorkload, file: string, backend: Backend) {
  const child = fork(join(ROOT, 'bench', 'ingest-publisher.ts'), [file], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const messages: Record<string, { port?: number; workers?: number }> = {};
  child.on('message', (m) => {
    const msg = m as { kind: string };
    messages[msg.kind] = msg as never;
  });
  const until = async (kind: string) => {
    while (!messages[kind]) await new Promise((r) => setTimeout(r, 5));
  };
  await until('port');
  const { port, workers } = messages.port as { port: number; workers: number };
  const index = new KvIndex({ blockSize: w.blockSize, backend });
  const last = new Map<number, bigint>();
  for (const b of w.batches) last.set(b.worker, BigInt(b.seq));
  const sources = Array.from({ length: workers }, (_, i) => index.subscribe({ workerId: i, endpoint: `tcp://127.0.0.1:${port + i}` }));
  await until('ready');
  await new Promise((r) => setTimeout(r, 200));
  const elu0 = performance.eventLoopUtilization();
  const t0 = performance.now();
  child.send('go');
  const done = () => sources.every((s, i) => last.get(i) === undefined || s.stats().ranks[0].lastSeq === last.get(i));
  // Polled every 25 ms so that the check itself stays a negligible part of the JS-thread time.
  while (!done()) await new Promise((r) => setTimeout(r, 25));
  await index.flush();
  const seconds = (performance.now() - t0) / 1000;
  const elu = performance.eventLoopUtilization(elu0);
  const gaps = sources.reduce((n, s) => n + s.stats().ranks[0].gaps, 0);
  const blocks = index.stats().blocks;
  index.close();
  child.disconnect();
  // `active` counts the JS thread's busy time, including this loop's polling of stats().
  return figures(w.batches, seconds, {
    jsBusyMsPerBatch: elu.active / w.batches.length,
    eventLoopUtilization: elu.utilization,
    gaps,
    heldBlocks: blocks,
  });
}

mkdirSync(RESULTS, { recursive: true });
const { trace, source } = benchTrace(QUICK ? 300 : 4000);
const workloads: IngestWorkload[] = [{ ...mooncakeBatches(trace, 16), source: `mooncake W=16: ${source}` }];
const captures = captureBatches(QUICK ? 4 : 64);
if (captures) workloads.push({ ...captures, source: `captures ×${QUICK ? 4 : 64} workers` });
else console.log('note: ../shared/engine-events is absent; the capture workload is skipped');

const rows: Array<Record<string, string | number>> = [];
const results: Record<string, unknown> = {};
for (const [i, w] of workloads.entries()) {
  const file = join(RESULTS, `ingest-workload-${i}.bin`);
  writeIngestWorkload(file, w);
  const r = {
    applyNative: await viaApply(w, 'native'),
    applyJs: await viaApply(w, 'js'),
    socketsNative: await viaSockets(w, file, 'native'),
    socketsJs: await viaSockets(w, file, 'js'),
  };
  results[w.source] = { batches: w.batches.length, ...r };
  for (const [path, n, j] of [
    ['applyEngineBatch', r.applyNative, r.applyJs],
    ['sockets (subscribe)', r.socketsNative, r.socketsJs],
  ] as const) {
    rows.push({
      workload: w.source,
      path,
      'native batches/s': fmt(n.batchesPerSec, 0),
      'native block-events/s': fmt(n.blockEventsPerSec, 0),
      'js batches/s': fmt(j.batchesPerSec, 0),
      'native/js': fmt(n.batchesPerSec / j.batchesPerSec, 1),
      'JS-thread ms/batch (native)': 'jsBusyMsPerBatch' in n ? fmt(n.jsBusyMsPerBatch as number, 4) : '',
      'JS-thread ms/batch (js)': 'jsBusyMsPerBatch' in j ? fmt(j.jsBusyMsPerBatch as number, 4) : '',
    });
  }
}
printTable('engine batches → visible in the index', rows);
writeResult('ingest', {
  parameters: { workloads: workloads.map((w) => ({ source: w.source, batches: w.batches.length, blockSize: w.blockSize })) },
  results,
  table: rows,
});
