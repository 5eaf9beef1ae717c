import { describe, expect, test } from 'vitest';
import { BACKENDS } from './helpers/backends.js';
import { closeFleetsAfterEach, startFleet, startWorker, workerEntry } from './helpers/gateway.js';
import { postJson } from './helpers/http.js';
import { waitFor } from './helpers/wait.js';

closeFleetsAfterEach();

/** POST with a JSON body; the answer's status, text and headers (vLLM answers these routes in plain text). */
async function post(url: string, body: unknown) {
  const r = await fetch(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  return { status: r.status, text: await r.text(), headers: r.headers };
}

async function modelIds(url: string): Promise<string[]> {
  return ((await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] }).data.map((d) => d.id);
}

describe.each(BACKENDS)('gateway: runtime LoRA adapters (%s)', (backend) => {
  test('loading goes to every worker, and requests naming the adapter are routed to it at once; partial results say which workers did what', async () => {
    const f = await startFleet(backend, 3, {}, { runtimeLoraUpdating: true });
    const load = await post(`${f.url}/v1/load_lora_adapter`, { lora_name: 'ad-x', lora_path: '/adapters/x' });
    expect([load.status, load.text, load.headers.get('x-kvroute-workers')]).toEqual([
      200,
      "Success: LoRA adapter 'ad-x' added successfully.",
      '1,2,3',
    ]);
    // The gateway read the workers' model lists again before answering.
    expect(await modelIds(f.url)).toContain('ad-x');
    for (const w of f.workers) expect(await modelIds(w.url)).toContain('ad-x');
    const completion = await postJson(`${f.url}/v1/completions`, { model: 'ad-x', prompt: 'hello adapter', max_tokens: 2 });
    expect([completion.status, completion.json.model]).toEqual([200, 'ad-x']);
    // Loaded already everywhere: the engines' refusal, with each worker's word.
    const again = await postJson(`${f.url}/v1/load_lora_adapter`, { lora_name: 'ad-x', lora_path: '/adapters/x' });
    expect(again.status).toBe(400);
    expect(again.json.error.message).toBe(
      `done on no worker (${[1, 2, 3].map((w) => `worker ${w} answered 400: The lora adapter 'ad-x' has already been loaded.`).join('; ')})`,
    );
    // Unloaded on worker 2 behind the gateway's back: the fleet-wide unload is partial, and says so.
    expect((await post(`${f.workers[1].url}/v1/unload_lora_adapter`, { lora_name: 'ad-x' })).status).toBe(200);
    const unload = await postJson(`${f.url}/v1/unload_lora_adapter`, { lora_name: 'ad-x' });
    expect([unload.status, unload.json.error.message]).toEqual([
      404,
      "done on workers 1, 3, not on the others (worker 2 answered 404: The lora adapter 'ad-x' cannot be found.)",
    ]);
    expect(await modelIds(f.url)).not.toContain('ad-x');
    const gone = await postJson(`${f.url}/v1/completions`, { model: 'ad-x', prompt: 'hello adapter', max_tokens: 2 });
    // As vLLM answers a model it does not serve: 404, in the engine's words.
    expect([gone.status, gone.json.error]).toEqual([
      404,
      { message: 'The model `ad-x` does not exist.', type: 'NotFoundError', param: null, code: 404 },
    ]);
    const page = await (await fetch(`${f.url}/metrics`)).text();
    expect(page).toMatch(/kvroute_gateway_passed_on_requests_total\{path="\/v1\/load_lora_adapter",worker="2",status="200"\} 1/);
    expect(page).toMatch(/kvroute_gateway_passed_on_requests_total\{path="\/v1\/unload_lora_adapter",worker="2",status="404"\} 1/);
  });

  test('in a fleet of several base models, ?model= sends the load to the workers serving that one only', async () => {
    const workers = [
      await startWorker({ model: 'm-a', runtimeLoraUpdating: true }),
      await startWorker({ model: 'm-b', runtimeLoraUpdating: true }),
    ];
    const f = await startFleet(backend, 0, { workers: workers.map((w, i) => workerEntry(w, i + 1)) });
    await waitFor(async () => (await modelIds(f.url)).length === 2, 'both models to be learned');
    const load = await post(`${f.url}/v1/load_lora_adapter?model=m-b`, { lora_name: 'ad-b', lora_path: '/adapters/b' });
    expect([load.status, load.headers.get('x-kvroute-workers')]).toEqual([200, '2']);
    expect([await modelIds(workers[0].url), await modelIds(workers[1].url)]).toEqual([['m-a'], ['m-b', 'ad-b']]);
    // Routed to the worker holding it.
    const r = await postJson(`${f.url}/v1/completions`, { model: 'ad-b', prompt: 'hello', max_tokens: 2 });
    expect([r.status, r.headers.get('x-kvroute-worker')]).toEqual([200, '2']);
  });

  test('a worker that comes back without the adapters loaded through the gateway (restarted), or joins later, gets them loaded again', async () => {
    const f = await startFleet(backend, 2, {}, { runtimeLoraUpdating: true });
    expect((await post(`${f.url}/v1/load_lora_adapter`, { lora_name: 'ad-x', lora_path: '/adapters/x' })).status).toBe(200);
    // Worker 2 restarts: a new process on the same port, which has forgotten its runtime adapters.
    const port = Number(new URL(f.workers[1].url).port);
    await f.workers[1].close();
    const routable = async () => ((await (await fetch(`${f.url}/ready`)).json()) as { routableWorkers: number }).routableWorkers;
    await waitFor(async () => (await routable()) === 1, 'worker 2 to be down');
    const restarted = await startWorker({ port, runtimeLoraUpdating: true, kvEvents: undefined, replay: undefined });
    expect(await modelIds(restarted.url)).toEqual(['mock-model']);
    await waitFor(async () => (await modelIds(restarted.url)).includes('ad-x'), 'the adapter to be loaded again on worker 2');
    // A worker added later gets it when it joins.
    const late = await startWorker({ runtimeLoraUpdating: true });
    f.gateway.addWorker(workerEntry(late, 3));
    await waitFor(async () => (await modelIds(late.url)).includes('ad-x'), 'the adapter to be loaded on worker 3');
    const page = await (await fetch(`${f.url}/metrics`)).text();
    expect(page).toMatch(/kvroute_gateway_lora_restores_total\{worker="2",result="loaded"\} 1/);
    expect(page).toMatch(/kvroute_gateway_lora_restores_total\{worker="3",result="loaded"\} 1/);
    // Unloaded through the gateway, it is forgotten: every worker unloads it, none reloads it.
    const unload = await post(`${f.url}/v1/unload_lora_adapter`, { lora_name: 'ad-x' });
    expect([unload.status, unload.headers.get('x-kvroute-workers')]).toEqual([200, '1,2,3']);
  });

  test('an engine restart seen in its KV events (seq starting over) has the gateway read its model list and reload what it lost', async () => {
    const f = await startFleet(backend, 2, {}, { runtimeLoraUpdating: true });
    expect((await post(`${f.url}/v1/load_lora_adapter`, { lora_name: 'ad-x', lora_path: '/adapters/x' })).status).toBe(200);
    const direct = (prompt: string) => postJson(`${f.workers[1].url}/v1/completions`, { prompt, max_tokens: 2 });
    const batches = async () =>
      /kvroute_event_source_batches_total\{worker="2",dp_rank="0"\} [1-9]/.test(await (await fetch(`${f.url}/metrics`)).text());
    // The engine publishes (seq 0), so that a new engine's seq 0 is news.
    expect((await direct('a batch from the first engine')).status).toBe(200);
    await waitFor(batches, 'the first batch');
    // The worker stays up (no health change): only its events tell of the new engine.
    f.workers[1].fault({ kind: 'restart' });
    expect(await modelIds(f.workers[1].url)).toEqual(['mock-model']);
    expect((await direct('the first batch of a new engine')).status).toBe(200);
    await waitFor(async () => (await modelIds(f.workers[1].url)).includes('ad-x'), 'the adapter to be loaded again after the restart');
    expect(await (await fetch(`${f.url}/metrics`)).text()).toMatch(/kvroute_event_source_restarts_total\{worker="2",dp_rank="0"\} 1/);
  });

  test("workers without runtime updating answer 404, which is the client's; a bad body is the gateway's 400", async () => {
    const f = await startFleet(backend, 2);
    const load = await postJson(`${f.url}/v1/load_lora_adapter`, { lora_name: 'ad-x', lora_path: '/adapters/x' });
    expect([load.status, load.json.error.message]).toEqual([
      404,
      'done on no worker (worker 1 answered 404: Route POST:/v1/load_lora_adapter not found; worker 2 answered 404: Route POST:/v1/load_lora_adapter not found)',
    ]);
    expect((await postJson(`${f.url}/v1/load_lora_adapter`, [1, 2])).status).toBe(400);
    expect(f.workers.map((w) => w.stats().finished[0])).toEqual([0, 0]);
  });
});
