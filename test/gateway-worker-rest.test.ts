/**
 * Workers put to rest through the gateway's control routes (vLLM's `/sleep`, SGLang's
 * `/pause_generation`) leave routing until the call that undoes it: requests go to the others,
 * or get 503 saying why when none is left; a worker that refused keeps serving; vLLM's wake-up in
 * parts brings a worker back only once every part is awake.
 */

import { describe, expect, test } from 'vitest';
import type { WorkerView } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { closeFleetsAfterEach, startFleet, startWorker, workerEntry } from './helpers/gateway.js';
import { postJson } from './helpers/http.js';
import { scrape } from './helpers/prometheus.js';
import { waitFor } from './helpers/wait.js';

closeFleetsAfterEach();

const served = (w: { stats(): { finished: number[] } }) => w.stats().finished.reduce((a, b) => a + b, 0);
const ids = (n: number, from: number) => Array.from({ length: n }, (_, i) => from + i);

describe.each(BACKENDS)('gateway: workers resting through the control routes (%s)', (backend) => {
  test('a worker put to sleep is out of routing until woken, in parts; the others serve on', async () => {
    const a = await startWorker({ model: 'model-a' });
    const b = await startWorker({ model: 'model-b' });
    const f = await startFleet(backend, 0, { workers: [workerEntry(a, 1), workerEntry(b, 2)] });
    await waitFor(() => f.gateway.workers().every((w) => w.model !== null), 'both models read');
    const complete = (model: string) => postJson(`${f.url}/v1/completions`, { model, prompt: ids(32, 7), max_tokens: 2 });
    const view = async () => (await (await fetch(`${f.adminUrl}/admin/workers`)).json()) as WorkerView[];
    const resting = async () => (await scrape(`${f.adminUrl}/metrics`)).sum('kvroute_gateway_worker_resting', { worker: '1' });
    expect((await complete('model-a')).status).toBe(200);

    const slept = await fetch(`${f.url}/sleep?level=1&model=model-a`, { method: 'POST' });
    expect([slept.status, slept.headers.get('x-kvroute-workers')]).toEqual([200, '1']);
    expect((await view()).map((w) => [String(w.id), w.routable, w.resting])).toEqual([
      ['1', false, ['sleep']],
      ['2', true, []],
    ]);
    expect(await resting()).toBe(1);
    const before = served(a);
    const refused = await complete('model-a');
    expect(refused.status).toBe(503);
    expect(refused.json.error.message).toMatch(/no healthy worker: 1 resting .* until \/wake_up/);
    // The other model's worker serves on, and the sleeping one saw no request.
    expect((await complete('model-b')).status).toBe(200);
    expect(served(a)).toBe(before);

    // Awake in parts: the weights first, then the KV cache; only then back in routing.
    expect((await fetch(`${f.url}/wake_up?tags=weights&model=model-a`, { method: 'POST' })).status).toBe(200);
    expect((await view())[0].resting).toEqual(['sleep']);
    expect((await complete('model-a')).status).toBe(503);
    expect((await fetch(`${f.url}/wake_up?tags=kv_cache&model=model-a`, { method: 'POST' })).status).toBe(200);
    expect((await view())[0]).toMatchObject({ routable: true, resting: [] });
    expect(await resting()).toBe(0);
    expect((await complete('model-a')).status).toBe(200);
    expect(served(a)).toBe(before + 1);
  });

  test('workers put to sleep or woken outside the gateway are found so at their next probe (vLLM’s /is_sleeping)', async () => {
    const f = await startFleet(backend, 2);
    // vLLM's question through the gateway: every worker's answer, when they agree.
    const isSleeping = async () => {
      const res = await fetch(`${f.url}/is_sleeping`);
      return [res.status, res.headers.get('content-type'), await res.json()];
    };
    expect(await isSleeping()).toEqual([200, 'application/json; charset=utf-8', { is_sleeping: false }]);
    // Asleep by a call the gateway never saw (the engine directly, or another gateway replica).
    expect((await fetch(`${f.workers[0].url}/sleep`, { method: 'POST' })).status).toBe(200);
    await waitFor(() => !f.gateway.workers()[0].routable, 'worker 1 found asleep by a probe');
    expect(f.gateway.workers().map((w) => w.resting)).toEqual([['sleep'], []]);
    // Half a fleet asleep is not an answer: 409 says which.
    const [status, , body] = await isSleeping();
    expect([status, (body as { error: { message: string } }).error.message]).toEqual([409, 'the workers disagree: 1 sleeping, 2 awake']);
    expect((await fetch(`${f.url}/sleep`, { method: 'POST' })).status).toBe(200);
    expect(f.gateway.workers().map((w) => w.resting)).toEqual([['sleep'], ['sleep']]);
    expect(await isSleeping()).toEqual([200, 'application/json; charset=utf-8', { is_sleeping: true }]);
    // Probes go on while they sleep: still asleep, still resting.
    await new Promise((r) => setTimeout(r, 500));
    expect(f.gateway.workers().every((w) => !w.routable)).toBe(true);
    expect((await fetch(`${f.workers[1].url}/wake_up`, { method: 'POST' })).status).toBe(200);
    await waitFor(() => f.gateway.workers()[1].routable, 'worker 2 found awake by a probe');
    expect(f.gateway.workers().map((w) => w.resting)).toEqual([['sleep'], []]);
    expect((await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: ids(16, 3), max_tokens: 1 })).status).toBe(200);
    expect(served(f.workers[1])).toBe(1);
  });

  test('a worker that refuses to sleep keeps serving; a paused one rests until generation continues', async () => {
    const f = await startFleet(backend, 2, {}, { speedup: 0.2 });
    // A long generation holds one worker's cache: it refuses to sleep, the idle one sleeps.
    const long = postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: ids(32, 100), max_tokens: 150 });
    await waitFor(() => f.workers.some((w) => w.stats().running.some((n) => n > 0)), 'the generation running');
    const busy = f.workers.findIndex((w) => w.stats().running.some((n) => n > 0));
    const slept = await fetch(`${f.url}/sleep`, { method: 'POST' });
    expect(slept.status).toBe(400);
    expect(((await slept.json()) as { error: { message: string } }).error.message).toMatch(
      new RegExp(`^done on workers ${2 - busy}, not on the others \\(worker ${busy + 1} answered 400`),
    );
    const views = f.gateway.workers();
    expect(views.map((w) => w.resting)).toEqual(busy === 0 ? [[], ['sleep']] : [['sleep'], []]);
    // Every request now goes to the worker that stayed awake.
    const before = served(f.workers[busy]);
    for (let i = 0; i < 3; i++)
      expect(
        (await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: ids(16, 500 + 20 * i), max_tokens: 1 })).status,
      ).toBe(200);
    expect(served(f.workers[busy])).toBe(before + 3);
    expect((await long).status).toBe(200);
    expect((await fetch(`${f.url}/wake_up`, { method: 'POST' })).status).toBe(200);
    expect(f.gateway.workers().every((w) => w.routable)).toBe(true);

    // SGLang's pause: both rest until /continue_generation; meanwhile requests get 503.
    const paused = await fetch(`${f.url}/pause_generation`, { method: 'POST' });
    expect(paused.status).toBe(200);
    expect(f.gateway.workers().map((w) => w.resting)).toEqual([['pause'], ['pause']]);
    const waiting = await postJson(`${f.url}/generate`, { input_ids: ids(16, 900), sampling_params: { max_new_tokens: 1 } });
    expect(waiting.status).toBe(503);
    expect((await fetch(`${f.url}/continue_generation`, { method: 'POST' })).status).toBe(200);
    expect((await postJson(`${f.url}/generate`, { input_ids: ids(16, 900), sampling_params: { max_new_tokens: 1 } })).status).toBe(200);
  });
});
