import { describe, expect, test } from 'vitest';
import { createGateway } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { closeFleetsAfterEach, startFleet, startWorker, wiredEntry, wireTo, workerEntry } from './helpers/gateway.js';
import { type Json, postJson, sse } from './helpers/http.js';
import { sleep, waitFor } from './helpers/wait.js';

closeFleetsAfterEach();

interface WorkerView {
  id: number;
  health: string;
  routable: boolean;
}

async function workers(adminUrl: string): Promise<WorkerView[]> {
  return (await (await fetch(`${adminUrl}/admin/workers`)).json()) as WorkerView[];
}

/**
 * A prompt cached on one worker (the one a first request went to), and a streamed completion of
 * `maxTokens` routed there by it, under way: its first chunk read.
 */
async function streamOnCachingWorker(url: string, maxTokens: number) {
  const prompt = `${'a prompt its worker caches '.repeat(40)}`;
  const warm = await postJson(`${url}/v1/completions`, { prompt, max_tokens: 1 });
  const worker = Number(warm.headers.get('x-kvroute-worker'));
  await sleep(100);
  const stream = await fetch(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt, max_tokens: maxTokens, stream: true }),
  });
  expect(stream.headers.get('x-kvroute-worker')).toBe(String(worker));
  const reader = (stream.body as ReadableStream<Uint8Array>).getReader();
  const first = new TextDecoder().decode((await reader.read()).value);
  return { prompt, worker, other: worker === 1 ? 2 : 1, reader, first };
}

/** The rest of a stream, as text. */
async function rest(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<string> {
  let text = '';
  for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += new TextDecoder().decode(chunk.value);
  return text;
}

describe.each(BACKENDS)('gateway health and failover (%s)', (backend) => {
  test('a worker crash mid-run: requests in flight on it fail clearly, every other request is served elsewhere', async () => {
    const f = await startFleet(backend, 3, {}, { speedup: 5 });
    const victim = f.workers[1];
    // Streams that are running on the victim when it crashes.
    const pinned = Array.from({ length: 3 }, (_, i) =>
      sse(`${f.url}/v1/completions`, { prompt: `long story ${i}`, max_tokens: 400, stream: true }),
    );
    await sleep(150);
    const running = victim.stats().running[0];
    victim.fault({ kind: 'crash' });
    const results: number[] = [];
    for (let i = 0; i < 12; i++) {
      const r = await postJson(`${f.url}/v1/completions`, { prompt: `after the crash ${i}`, max_tokens: 2 });
      results.push(r.status);
    }
    expect(results.every((s) => s === 200)).toBe(true);
    const streams = await Promise.all(pinned);
    const cut = streams.filter((s) => s.events.some((e) => e !== '[DONE]' && e.error));
    expect(cut.length).toBe(running);
    for (const s of cut) expect(s.events.at(-1).error.message).toMatch(/failed mid-stream/);
    const view = (await workers(f.adminUrl)).find((w) => w.id === 2);
    expect(view).toMatchObject({ health: 'down', routable: false });
    // Out of routing: its index entries and load are gone.
    expect(f.gateway.router.stats().load.filter((l) => l.workerId === 2n)).toEqual([]);
    const metrics = await (await fetch(`${f.url}/metrics`)).text();
    expect(metrics).toMatch(/kvroute_gateway_worker_health\{worker="2",state="down"\} 1/);
    expect(metrics).toMatch(/kvroute_gateway_worker_health_changes_total\{worker="2",state="down"\} 1/);
  });

  test('a hung worker is taken out by its probes and used again once it recovers', async () => {
    const f = await startFleet(backend, 2, { health: { intervalMs: 100, timeoutMs: 100, failureThreshold: 2 } });
    f.workers[0].fault({ kind: 'hang' });
    await waitFor(() => f.gateway.workers().some((w) => w.id === 1n && w.health === 'down'), 'worker 1 to be down', 5000);
    for (let i = 0; i < 4; i++) {
      const r = await postJson(`${f.url}/v1/completions`, { prompt: `while hung ${i}`, max_tokens: 2 });
      expect(r.headers.get('x-kvroute-worker')).toBe('2');
    }
    f.workers[0].fault({ kind: 'recover' });
    await waitFor(() => f.gateway.workers().some((w) => w.id === 1n && w.health === 'healthy'), 'worker 1 to recover', 5000);
    const seen = new Set<string | null>();
    for (let i = 0; i < 8; i++) {
      const r = await postJson(`${f.url}/v1/completions`, { prompt: `after recovery ${i}`, max_tokens: 2 });
      expect(r.status).toBe(200);
      seen.add(r.headers.get('x-kvroute-worker'));
    }
    expect(seen.has('1')).toBe(true);
  });

  test('a worker its probes find down has its requests in flight cut: one it had not answered goes to another worker at once, a stream it fed ends with an error event', async () => {
    // The upstream timeouts are a minute: only the cut ends the hung worker's requests within the test's time.
    const f = await startFleet(backend, 2, { health: { intervalMs: 100, timeoutMs: 150, failureThreshold: 2 } }, { speedup: 5 });
    // A long stream on the worker holding the prompt, under way when the worker hangs.
    const { prompt, worker: hung, other, reader, first } = await streamOnCachingWorker(f.url, 2000);
    f.workers[hung - 1].fault({ kind: 'hang' });
    // Routed by its cached prompt to the hung worker before the probes take it out, which holds it.
    const held = postJson(`${f.url}/v1/completions`, { prompt, max_tokens: 2 });
    const r = await held;
    expect(r.status).toBe(200);
    expect(r.headers.get('x-kvroute-worker')).toBe(String(other));
    const streamed = first + (await rest(reader));
    expect(streamed).toMatch(new RegExp(`worker ${hung} failed mid-stream: KVROUTE_WORKER_DOWN worker ${hung} went down`));
    const m = await (await fetch(`${f.url}/metrics`)).text();
    expect(m).toMatch(/kvroute_gateway_retries_total\{reason="probe"\} 1/);
    f.workers[hung - 1].fault({ kind: 'recover' });
  }, 20_000);

  test('a worker its requests’ timeouts take down (its /health unasked) has the requests it had not answered cut and sent on at once; a stream it answered keeps going', async () => {
    // No probes: only requests judge the worker. Headers are due in 1.5 s; a body may be silent a minute.
    const f = await startFleet(
      backend,
      2,
      {
        health: { intervalMs: 0, failureThreshold: 2 },
        upstream: { headersTimeoutMs: 1500, bodyTimeoutMs: 60_000 },
        router: { overlapScoreWeight: 100 },
      },
      { speedup: 5 },
    );
    const { prompt, worker: stuck, other, reader, first } = await streamOnCachingWorker(f.url, 300);
    f.workers[stuck - 1].fault({ kind: 'hang' });
    // Two requests whose timeouts take the worker down, and one sent halfway to theirs, which the down verdict cuts.
    const timingOut = [0, 1].map(() => postJson(`${f.url}/v1/completions`, { prompt, max_tokens: 2 }));
    await sleep(750);
    const cut = await postJson(`${f.url}/v1/completions`, { prompt, max_tokens: 2 });
    expect([cut.status, cut.headers.get('x-kvroute-worker')]).toEqual([200, String(other)]);
    for (const r of await Promise.all(timingOut)) expect([r.status, r.headers.get('x-kvroute-worker')]).toEqual([200, String(other)]);
    const m = await (await fetch(`${f.url}/metrics`)).text();
    expect(m).toMatch(/kvroute_gateway_retries_total\{reason="timeout"\} 2/);
    expect(m).toMatch(/kvroute_gateway_retries_total\{reason="cut"\} 1/);
    expect(f.gateway.workers().find((w) => w.id === BigInt(stuck))?.health).toBe('down');
    // The stream it answered was left alone: once the engine moves again, it ends whole.
    f.workers[stuck - 1].fault({ kind: 'recover' });
    const streamed = first + (await rest(reader));
    expect(streamed).not.toMatch(/error/);
    expect(streamed.trimEnd().endsWith('data: [DONE]')).toBe(true);
  }, 20_000);

  test("behind a partition that drops packets, a worker's requests go to the next worker once its probes find it down: routed, tokenizing and passed on; its part of a control route and its stored response fail", async () => {
    // The workers behind wires; the upstream timeouts are a minute: only the cut ends the partitioned worker's requests in time.
    const workers = await Promise.all([startWorker(), startWorker()]);
    const wires = await Promise.all(workers.map(wireTo));
    const gateway = createGateway({
      blockSize: 16,
      backend,
      logLevel: false,
      health: { intervalMs: 100, timeoutMs: 150, failureThreshold: 2 },
      workers: workers.map((w, i) => wiredEntry(w, i + 1, wires[i])),
    });
    const { url } = await gateway.listen();
    try {
      await sleep(300);
      // A stored response on the worker about to be partitioned (the gateway remembers its owner).
      let stored: string | undefined;
      for (let i = 0; stored === undefined && i < 16; i++) {
        const r = await postJson(`${url}/v1/responses`, { model: 'mock-model', input: `stored ${i}`, max_output_tokens: 2 });
        if (r.headers.get('x-kvroute-worker') === '1') stored = r.json.id;
      }
      wires[0].stall();
      // Taken in turn, the engine tokenizer's calls and the passed-on requests each meet the partitioned worker first or second.
      const [completions, tokenized, asleep, lost] = await Promise.all([
        Promise.all([0, 1, 2].map((i) => postJson(`${url}/v1/completions`, { prompt: `held ${i}`, max_tokens: 2 }))),
        Promise.all([0, 1, 2].map((i) => postJson(`${url}/tokenize`, { model: 'mock-model', prompt: `passed on ${i}` }))),
        // A control route goes to every worker: the partitioned one's part ends as a failure once it is down.
        fetch(`${url}/is_sleeping`).then(async (r) => ({ status: r.status, json: (await r.json()) as Json })),
        // Its stored response is out of reach: the answer says so once the worker is down.
        fetch(`${url}/v1/responses/${stored}`).then(async (r) => (await r.json()) as Json),
      ]);
      expect(lost.error.message).toMatch(/worker 1, which holds response .*, failed: KVROUTE_WORKER_DOWN worker 1 went down/);
      for (const r of [...completions, ...tokenized]) expect([r.status, r.headers.get('x-kvroute-worker')]).toEqual([200, '2']);
      expect(asleep.status).toBe(502);
      expect(asleep.json.error.message).toMatch(
        /done on workers 2, not on the others \(worker 1 answered nothing: KVROUTE_WORKER_DOWN worker 1 went down/,
      );
      const m = await (await fetch(`${url}/metrics`)).text();
      expect(m).toMatch(/kvroute_gateway_retries_total\{reason="probe"\} [1-9]/);
    } finally {
      await gateway.close({ now: true });
      for (const wire of wires) await wire.cut();
    }
  }, 20_000);

  test('a worker that fails before its first byte is retried on the next one; with none left the answer is 502', async () => {
    const dead = await startWorker();
    const deadUrl = dead.url;
    await dead.close();
    const alive = await startWorker();
    const f = await startFleet(backend, 0, {
      health: { intervalMs: 0 },
      workers: [{ id: 1, url: deadUrl }, { ...workerEntry(alive, 2) }],
      router: { overlapScoreWeight: 0, routerTemperature: 0 },
    });
    const answers = await Promise.all(
      // Token-id prompts: no tokenizer call reaches (and condemns) the dead worker first.
      Array.from({ length: 4 }, (_, i) =>
        postJson(`${f.url}/v1/completions`, { prompt: [i + 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17], max_tokens: 2 }),
      ),
    );
    for (const a of answers) {
      expect(a.status).toBe(200);
      expect(a.headers.get('x-kvroute-worker')).toBe('2');
    }
    // The cost spreads the concurrent requests, so some went to the dead worker first.
    expect(answers.some((a) => a.headers.get('x-kvroute-attempts') === '2')).toBe(true);
    expect(f.gateway.workers().find((w) => w.id === 1n)).toMatchObject({ health: 'down', routable: false });
    await alive.close();
    const none = await postJson(`${f.url}/v1/completions`, { prompt: [1, 2, 3], max_tokens: 2 });
    expect([502, 503]).toContain(none.status);
    expect(none.headers.get('retry-after')).toBe('1');
    expect(none.json.error.message).toMatch(/no worker could serve the request/);
  });

  test('an engine restart is seen on the event stream and routing recovers', async () => {
    const f = await startFleet(backend, 1);
    const prompt = 'a prompt that is long enough to fill a few blocks of sixteen tokens each';
    await postJson(`${f.url}/v1/completions`, { prompt, max_tokens: 2 });
    await waitFor(() => f.gateway.router.stats().index.blocks > 0, 'the blocks');
    f.workers[0].fault({ kind: 'restart' });
    await postJson(`${f.url}/v1/completions`, { prompt, max_tokens: 2 });
    await waitFor(() => f.gateway.router.index.engineSources()[0].stats().ranks[0].restarts === 1, 'the restart to be seen');
    const again = await postJson(`${f.url}/v1/completions`, { prompt: `${prompt}!`, max_tokens: 2 });
    expect(again.status).toBe(200);
    expect(Number(again.headers.get('x-kvroute-cached-tokens'))).toBe(again.json.usage.prompt_tokens_details.cached_tokens);
    const metrics = await (await fetch(`${f.url}/metrics`)).text();
    expect(metrics).toMatch(/kvroute_event_source_restarts_total\{worker="1",dp_rank="0"\} 1/);
  });
});
