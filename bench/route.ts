/**
 * Routing: `route()` + `markPrefillCompleted()` + `free()` per request, native vs pure-JS.
 * 1. synthetic: 4,096-token requests at block size 64 over 16 workers; each request shares one of
 *    100 system prompts (2,048 tokens) cached on some workers, then has a unique tail.
 * 2. trace: the Mooncake conversation trace (or a generated one) over 16 workers; after each
 *    decision the request's blocks enter the chosen worker's cache (a Stored event, untimed).
 * 3. trace, predict-on-route: the same with `routerPredictedTtlSecs: 120`, so each decision also
 *    records its blocks as predictions on the chosen worker (in the index, before `route` returns).
 * 4. synthetic, offloaded: workload 1 with lower tiers: each system prompt's worker holds its
 *    first half on the device and all of it in host memory, the next worker all of it on disk, so
 *    every decision walks the lower tiers of all 16 candidates.
 * 5. synthetic, batches of 8: workload 1's requests eight at a time, one as the request's
 *    `tokens` and seven as its `batchPrompts` (an SGLang `/generate` batch): a cycle routes,
 *    books and frees eight prompts.
 * Targets: ≥ 50,000 routes/s with the native backend; native ≥ 5× JS. The synthetic workload is
 * timed after an untimed warm-up of 1,000 cycles.
 */

import { blockHashes, KvRouter, type RouterEvent, sequenceHashes, synthesizeTokens } from '../ts/index.js';
import { fmt, percentile, printTable, QUICK, sortedCopy, writeResult } from './common.js';
import { benchTrace } from './index-workload.js';

const WORKERS = 16;
const BS = 64;

function storedEvent(worker: number, locals: BigUint64Array, tier?: RouterEvent['storage_tier']): RouterEvent {
  const names = sequenceHashes(locals);
  return {
    worker_id: worker,
    ...(tier ? { storage_tier: tier } : {}),
    event: {
      event_id: 0,
      data: { stored: { parent_hash: null, blocks: Array.from(locals, (h, i) => ({ block_hash: names[i], tokens_hash: h })) } },
    },
  };
}

function newRouter(backend: 'native' | 'js', predictedTtlSecs?: number): KvRouter {
  const r = new KvRouter({ blockSize: BS, backend, seed: 1, ...(predictedTtlSecs ? { routerPredictedTtlSecs: predictedTtlSecs } : {}) });
  for (let w = 0; w < WORKERS; w++) r.addWorker(w);
  return r;
}

/** Times `route` of each request; returns routes/s over the timed calls and latency percentiles. */
async function cycle(
  router: KvRouter,
  requests: Iterable<{ id: string; tokens: Uint32Array; batch?: Uint32Array[]; after?: (worker: bigint) => void }>,
) {
  const latencies: number[] = [];
  let total = 0;
  for (const req of requests) {
    const start = process.hrtime.bigint();
    const d = await router.route({ requestId: req.id, tokens: req.tokens, ...(req.batch ? { batchPrompts: req.batch } : {}) });
    router.markPrefillCompleted(req.id);
    router.free(req.id);
    const ns = Number(process.hrtime.bigint() - start);
    latencies.push(ns);
    total += ns;
    req.after?.(d.workerId);
  }
  const sorted = sortedCopy(latencies);
  return {
    routesPerSec: latencies.length / (total / 1e9),
    p50us: percentile(sorted, 50) / 1000,
    p99us: percentile(sorted, 99) / 1000,
    requests: latencies.length,
  };
}

/** Prompts per request in the batched workload. */
const BATCH = 8;

async function synthetic(backend: 'native' | 'js', offloaded = false, batched = false) {
  const router = newRouter(backend);
  const prompts = Array.from({ length: 100 }, (_, p) => Uint32Array.from({ length: 2048 }, (_, i) => (p * 7919 + i * 31) % 150_000));
  for (let p = 0; p < prompts.length; p++) {
    const locals = blockHashes(prompts[p], BS);
    if (!offloaded) {
      router.applyEvent(storedEvent(p % WORKERS, locals));
      continue;
    }
    router.applyEvents([
      storedEvent(p % WORKERS, locals.slice(0, locals.length / 2)),
      storedEvent(p % WORKERS, locals, 'host_pinned'),
      storedEvent((p + 1) % WORKERS, locals, 'disk'),
    ]);
  }
  await router.flush();
  const n = (QUICK ? 2000 : 20_000) / (batched ? BATCH : 1);
  const reqs = Array.from({ length: Math.min(n, 2000) }, (_, k) => {
    const t = new Uint32Array(4096);
    t.set(prompts[k % prompts.length]);
    for (let i = 2048; i < 4096; i++) t[i] = (k * 104729 + i) % 150_000;
    return t;
  });
  const request = (id: string, k: number) =>
    batched
      ? {
          id,
          tokens: reqs[(k * BATCH) % reqs.length],
          batch: Array.from({ length: BATCH - 1 }, (_, j) => reqs[(k * BATCH + j + 1) % reqs.length]),
        }
      : { id, tokens: reqs[k % reqs.length] };
  // Untimed warm-up, so the figures describe steady state rather than the JIT compiling.
  await cycle(
    router,
    (function* () {
      for (let k = 0; k < 1000 / (batched ? BATCH : 1); k++) yield request(`w${k}`, k);
    })(),
  );
  const result = await cycle(
    router,
    (function* () {
      for (let k = 0; k < n; k++) yield request(`s${k}`, k);
    })(),
  );
  router.close();
  return result;
}

async function trace(backend: 'native' | 'js', predictedTtlSecs?: number) {
  const { trace: t, source } = benchTrace(QUICK ? 1000 : undefined);
  const router = newRouter(backend, predictedTtlSecs);
  const result = await cycle(
    router,
    (function* () {
      for (let k = 0; k < t.requests.length; k++) {
        const tokens = synthesizeTokens(t.requests[k], t.traceBlockSize);
        yield {
          id: `t${k}`,
          tokens,
          after: (w: bigint) => router.applyEvent(storedEvent(Number(w), blockHashes(tokens, BS, { backend }))),
        };
      }
    })(),
  );
  await router.flush();
  router.close();
  return { ...result, source };
}

const PREDICTED_TTL_SECS = 120;
const WORKLOADS = ['synthetic', 'trace', 'trace, predict-on-route', 'synthetic, offloaded', `synthetic, batches of ${BATCH}`] as const;
const results: Record<string, Record<string, Awaited<ReturnType<typeof synthetic>>>> = Object.fromEntries(WORKLOADS.map((w) => [w, {}]));
for (const backend of ['native', 'js'] as const) {
  results.synthetic[backend] = await synthetic(backend);
  results.trace[backend] = await trace(backend);
  results['trace, predict-on-route'][backend] = await trace(backend, PREDICTED_TTL_SECS);
  results['synthetic, offloaded'][backend] = await synthetic(backend, true);
  results[`synthetic, batches of ${BATCH}`][backend] = await synthetic(backend, false, true);
}
const rows = WORKLOADS.flatMap((w) => [
  {
    workload: w,
    metric: 'route cycles/s',
    native: fmt(results[w].native.routesPerSec, 0),
    js: fmt(results[w].js.routesPerSec, 0),
    'native/js': fmt(results[w].native.routesPerSec / results[w].js.routesPerSec, 2),
  },
  {
    workload: w,
    metric: 'route p50 µs',
    native: fmt(results[w].native.p50us, 1),
    js: fmt(results[w].js.p50us, 1),
    'native/js': fmt(results[w].js.p50us / results[w].native.p50us, 2),
  },
  {
    workload: w,
    metric: 'route p99 µs',
    native: fmt(results[w].native.p99us, 1),
    js: fmt(results[w].js.p99us, 1),
    'native/js': fmt(results[w].js.p99us / results[w].native.p99us, 2),
  },
]);
printTable(`route() + markPrefillCompleted() + free(), ${WORKERS} workers, block size ${BS}`, rows);
writeResult('route', {
  parameters: { workers: WORKERS, blockSize: BS, syntheticTokens: 4096, predictedTtlSecs: PREDICTED_TTL_SECS, batchPrompts: BATCH },
  results,
  table: rows,
});
