/**
 * The engines' control routes through the gateway: sent to every healthy worker, body and query
 * as they came. The cache resets (vLLM's `/reset_prefix_cache`, SGLang's `/flush_cache`) drop
 * each worker's cache, whose `AllBlocksCleared` event empties the index; a refusal (a cache its
 * running requests hold), or a route a worker does not serve, is reported with which workers did
 * what.
 */

import { describe, expect, test } from 'vitest';
import { BACKENDS } from './helpers/backends.js';
import { closeFleetsAfterEach, gatewayBehindWire, startFleet, startWorker, wiredEntry, wireTo, workerEntry } from './helpers/gateway.js';
import { postJson } from './helpers/http.js';
import { scrape } from './helpers/prometheus.js';
import { headsOn } from './helpers/tcp-proxy.js';
import { waitFor } from './helpers/wait.js';

closeFleetsAfterEach();

const ids = (n: number, from: number) => Array.from({ length: n }, (_, i) => from + i);

describe.each(BACKENDS)("gateway: the engines' control routes (%s)", (backend) => {
  test("SGLang's /flush_cache goes to every worker: their caches and the index's blocks are gone", async () => {
    const f = await startFleet(backend, 2);
    // Two prompts cached, on whichever workers the router chose.
    const a = ids(64, 1000);
    const b = ids(64, 5000);
    for (const p of [a, b])
      expect((await postJson(`${f.url}/generate`, { input_ids: p, sampling_params: { max_new_tokens: 1 } })).status).toBe(200);
    await waitFor(() => f.gateway.router.stats().index.blocks >= 8, 'both prompts indexed');
    const again = await postJson(`${f.url}/generate`, { input_ids: a, sampling_params: { max_new_tokens: 1 } });
    expect(again.json.meta_info.cached_tokens).toBe(48);

    const flushed = await fetch(`${f.url}/flush_cache`, { method: 'POST' });
    expect(flushed.status).toBe(200);
    expect(await flushed.text()).toMatch(/^Cache flushed\./);
    expect(flushed.headers.get('x-kvroute-workers')?.split(',').sort()).toEqual(['1', '2']);
    await waitFor(() => f.gateway.router.stats().index.blocks === 0, 'the index emptied by the engines’ AllBlocksCleared');
    const cold = await postJson(`${f.url}/generate`, { input_ids: a, sampling_params: { max_new_tokens: 1 } });
    expect([cold.json.meta_info.cached_tokens, cold.headers.get('x-kvroute-cached-tokens')]).toEqual([0, '0']);
    // GET, as SGLang takes it too.
    expect((await fetch(`${f.url}/flush_cache`)).status).toBe(200);
    const m = await scrape(`${f.adminUrl}/metrics`);
    expect(m.sum('kvroute_gateway_passed_on_requests_total', { path: '/flush_cache', status: '200' })).toBe(4);
  });

  test("vLLM's /reset_prefix_cache is passed on with its query (the gateway's own ?model= left out)", async () => {
    const g = await gatewayBehindWire(backend);
    try {
      const r = await fetch(`${g.url}/reset_prefix_cache?device=gpu&model=mock-model`, { method: 'POST' });
      expect(r.status).toBe(200);
      const sent = headsOn(g.wire.sent).filter((h) => h.line.startsWith('POST '));
      expect(sent.map((h) => h.line)).toEqual(['POST /reset_prefix_cache?device=gpu']);
    } finally {
      await g.close();
    }
  });

  test('a worker whose running requests hold its cache refuses: the answer says which workers did what, and its blocks stay indexed', async () => {
    const idle = await startWorker();
    const busy = await startWorker({ speedup: 0.05 });
    const f = await startFleet(backend, 0, { workers: [workerEntry(idle, 1), workerEntry(busy, 2)] });
    // A long generation on the busy worker, sent to it directly (its KV events reach the index all the same).
    const running = fetch(`${busy.url}/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input_ids: ids(64, 300), sampling_params: { max_new_tokens: 200 } }),
    });
    await waitFor(() => busy.stats().running.reduce((x, y) => x + y, 0) === 1, 'the busy worker running');
    await waitFor(() => f.gateway.router.stats().index.blocks >= 4, 'its prompt indexed');
    const r = await fetch(`${f.url}/reset_prefix_cache`, { method: 'POST' });
    expect(r.status).toBe(400);
    const body = (await r.json()) as { error: { message: string } };
    expect(body.error.message).toBe(
      'done on workers 1, not on the others (worker 2 answered 400: the prefix cache is in use by running requests)',
    );
    expect(f.gateway.router.stats().index.blocks).toBeGreaterThanOrEqual(4);
    await busy.close();
    await running.catch(() => undefined);
  });

  test("SGLang's /abort_request goes to every worker with its body, and ends the generation wherever it runs; a route the mock does not serve is told per worker", async () => {
    const workers = [await startWorker({ speedup: 0.05 }), await startWorker({ speedup: 0.05 })];
    const f = await startFleet(backend, 0, { workers: workers.map((w, i) => workerEntry(w, i + 1)) });
    const wires = await Promise.all(workers.map(wireTo));
    try {
      f.gateway.setWorkers(workers.map((w, i) => wiredEntry(w, i + 1, wires[i])));
      await waitFor(() => f.gateway.workers().every((w) => w.health === 'healthy'), 'the wired workers healthy');
      // A long generation, named by its rid, through the gateway.
      const long = postJson(`${f.url}/generate`, { input_ids: ids(32, 10), sampling_params: { max_new_tokens: 500 }, rid: 'rollout-7' });
      await waitFor(() => f.gateway.router.stats().inFlight === 1, 'the generation in flight');
      await waitFor(() => workers.some((w) => w.stats().running.some((n) => n > 0)), 'the generation running');
      const abort = await postJson(`${f.url}/abort_request`, { rid: 'rollout-7', abort_all: false });
      expect([abort.status, abort.headers.get('x-kvroute-workers')?.split(',').sort()]).toEqual([200, ['1', '2']]);
      const ended = await long;
      expect(ended.status).toBe(200);
      expect(ended.json.meta_info.finish_reason.type).toBe('abort');
      expect(ended.json.meta_info.completion_tokens).toBeLessThan(500);
      expect(f.gateway.router.stats().inFlight).toBe(0);
      const update = await fetch(`${f.url}/update_weights_from_disk?model=mock-model`, { method: 'POST' });
      expect(update.status).toBe(404);
      expect(((await update.json()) as { error: { message: string } }).error.message).toMatch(
        /^done on no worker \(worker [12] answered 404: .*; worker [12] answered 404: /,
      );
      for (const wire of wires) {
        const sent = headsOn(wire.sent).filter(
          (h) => h.line.startsWith('POST /abort_request') || h.line.startsWith('POST /update_weights'),
        );
        expect(sent.map((h) => h.line)).toEqual(['POST /abort_request', 'POST /update_weights_from_disk']);
        expect(JSON.parse(sent[0].body)).toEqual({ rid: 'rollout-7', abort_all: false });
      }
      // A body that is not a JSON object is refused before any worker sees it.
      expect((await postJson(`${f.url}/abort_request`, [1, 2])).status).toBe(400);
    } finally {
      for (const wire of wires) await wire.cut();
    }
  });

  test('without a healthy worker: 503', async () => {
    const f = await startFleet(backend, 0, { workers: [] });
    const r = await fetch(`${f.url}/flush_cache`, { method: 'POST' });
    expect(r.status).toBe(503);
    expect(((await r.json()) as { error: { message: string } }).error.message).toBe('no healthy worker to send /flush_cache to');
  });
});
