/**
 * Routing with the queue on (`routerQueueThreshold: 0`), 16 workers, 4,096-token requests at block
 * size 64, native vs pure-JS. What a backlog costs the calls that run while it waits:
 * 1. one model: every worker busy, 1,000 requests waiting; each cycle routes a new request (it
 *    waits) and cancels the oldest waiting one (`free`, which runs a release pass);
 * 2. two models: workers 0-7 serve model A, all busy, with 1,000 of A's requests waiting; each
 *    cycle routes, completes and frees a request of model B (workers 8-15, free), which must not
 *    wait behind A's backlog;
 * 3. the same cycle of model B with no backlog at all, the baseline.
 * Before the per-candidate queue, the B requests of (2) waited behind A's backlog.
 */

import { KvRouter } from '../ts/index.js';
import { fmt, percentile, printTable, QUICK, sortedCopy, writeResult } from './common.js';

const WORKERS = 16;
const BS = 64;
const BACKLOG = 1000;
const CYCLES = QUICK ? 2000 : 20_000;
const A = Array.from({ length: 8 }, (_, w) => w);
const B = Array.from({ length: 8 }, (_, w) => w + 8);

const tokens = (k: number) => Uint32Array.from({ length: 4096 }, (_, i) => (k * 104_729 + i * 31) % 150_000);
const PROMPTS = Array.from({ length: 64 }, (_, k) => tokens(k));

function newRouter(backend: 'native' | 'js'): KvRouter {
  const r = new KvRouter({ blockSize: BS, backend, seed: 1, routerQueueThreshold: 0 });
  for (let w = 0; w < WORKERS; w++) r.addWorker(w, { maxNumBatchedTokens: 8192 });
  return r;
}

/** Microseconds per timed cycle: mean, p50 and p99. */
async function timed(cycles: number, body: (k: number) => Promise<void> | void) {
  const ns: number[] = [];
  for (let k = 0; k < cycles; k++) {
    const start = process.hrtime.bigint();
    await body(k);
    ns.push(Number(process.hrtime.bigint() - start));
  }
  const sorted = sortedCopy(ns);
  return {
    meanUs: ns.reduce((a, b) => a + b, 0) / ns.length / 1000,
    p50Us: percentile(sorted, 50) / 1000,
    p99Us: percentile(sorted, 99) / 1000,
  };
}

/** Keeps `workers` busy: one request each, its prefill never completed. */
async function hold(r: KvRouter, workers: number[]): Promise<void> {
  for (const w of workers) await r.route({ requestId: `hold-${w}`, tokens: PROMPTS[w], pinnedWorker: { workerId: w } });
}

/** `BACKLOG` requests waiting for `workers`; returns their ids, oldest first. */
function backlog(r: KvRouter, workers: number[] | undefined): string[] {
  const ids = Array.from({ length: BACKLOG }, (_, k) => `wait-${k}`);
  for (const [k, id] of ids.entries())
    r.route({ requestId: id, tokens: PROMPTS[k % PROMPTS.length], ...(workers ? { allowedWorkers: workers } : {}) }).catch(() => undefined);
  return ids;
}

async function oneModel(backend: 'native' | 'js') {
  const r = newRouter(backend);
  await hold(r, [...A, ...B]);
  const waiting = backlog(r, undefined);
  const result = await timed(CYCLES, (k) => {
    const id = `new-${k}`;
    r.route({ requestId: id, tokens: PROMPTS[k % PROMPTS.length] }).catch(() => undefined);
    waiting.push(id);
    r.free(waiting.shift() as string);
  });
  const queued = r.stats().queued;
  r.close();
  return { ...result, queued };
}

async function otherModel(backend: 'native' | 'js', withBacklog: boolean) {
  const r = newRouter(backend);
  await hold(r, A);
  if (withBacklog) backlog(r, A);
  const result = await timed(CYCLES, async (k) => {
    const id = `b-${k}`;
    await r.route({ requestId: id, tokens: PROMPTS[k % PROMPTS.length], allowedWorkers: B });
    r.markPrefillCompleted(id);
    r.free(id);
  });
  const queued = r.stats().queued;
  r.close();
  return { ...result, queued };
}

const results: Record<string, Record<string, Awaited<ReturnType<typeof oneModel>>>> = { oneModel: {}, otherModel: {}, baseline: {} };
for (const backend of ['native', 'js'] as const) {
  results.oneModel[backend] = await oneModel(backend);
  results.otherModel[backend] = await otherModel(backend, true);
  results.baseline[backend] = await otherModel(backend, false);
}
const label: Record<string, string> = {
  oneModel: `one model, ${BACKLOG} waiting: route (waits) + cancel the oldest`,
  otherModel: `model B while ${BACKLOG} of model A wait: route + first token + free`,
  baseline: 'model B, nothing waiting: route + first token + free',
};
const rows = Object.keys(results).map((k) => ({
  cycle: label[k],
  'native mean / p99 µs': `${fmt(results[k].native.meanUs, 1)} / ${fmt(results[k].native.p99Us, 1)}`,
  'JS mean / p99 µs': `${fmt(results[k].js.meanUs, 1)} / ${fmt(results[k].js.p99Us, 1)}`,
  'still waiting after': String(results[k].native.queued),
}));
printTable(`queueing on, ${WORKERS} workers, 4,096-token requests, block size ${BS}, ${CYCLES} cycles`, rows);
writeResult('route-queue', { parameters: { workers: WORKERS, blockSize: BS, backlog: BACKLOG, cycles: CYCLES }, results, table: rows });
