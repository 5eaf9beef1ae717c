import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { blockHashes, createGateway, isKvRouteError, KvRouter, type MockWorker, metrics, mockTokenize } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { makeCert } from './helpers/certs.js';
import { ROOT } from './helpers/dist.js';
import { stored } from './helpers/events.js';
import { closeFleetsAfterEach, startFleet, startWorker, startWorkerOnConsecutivePorts, workerEntry } from './helpers/gateway.js';
import { postJson, sse } from './helpers/http.js';
import { scrape } from './helpers/prometheus.js';
import { scratchDir } from './helpers/scratch-dir.js';
import { sleep, waitFor } from './helpers/wait.js';

closeFleetsAfterEach();

/** The worker's per-rank endpoints without `dpSize`, which then defaults to their count. */
function workerEntryWithoutDpSize(w: MockWorker) {
  const { dpSize: _, ...entry } = workerEntry(w, 1);
  return entry;
}

const PROMPT = 'The indexer API answers in the shape of Dynamo standalone indexer, block by block. ';

describe.each(BACKENDS)('gateway APIs (%s)', (backend) => {
  test("a worker given by rank 0's endpoints and dpSize is heard on every rank, rank r at port + r", async () => {
    const w = await startWorkerOnConsecutivePorts({ dpSize: 2 });
    const f = await startFleet(backend, 0, {
      workers: [{ id: 1, url: w.url, kvEvents: w.kvEventsEndpoints[0], replay: w.replayEndpoints[0], dpSize: 2 }],
    });
    expect(f.gateway.workers()[0]).toMatchObject({ dpSize: 2, kvEvents: w.kvEventsEndpoints, replay: w.replayEndpoints });
    // Each rank caches its own prompt (asked of the worker directly, so the gateway only hears it).
    for (const rank of [0, 1]) {
      const r = await fetch(`${w.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-data-parallel-rank': String(rank) },
        body: JSON.stringify({ prompt: `${PROMPT} Rank ${rank} alone.`, max_tokens: 2 }),
      });
      expect(r.status).toBe(200);
    }
    const source = f.gateway.router.index.engineSources()[0];
    await waitFor(() => source.stats().ranks.every((r) => r.batches > 0), "both ranks' events");
    for (const rank of [1, 0]) {
      const r = await postJson(`${f.url}/v1/completions`, { prompt: `${PROMPT} Rank ${rank} alone. Again.`, max_tokens: 2 });
      expect(r.headers.get('x-kvroute-dp-rank')).toBe(String(rank));
      expect(Number(r.headers.get('x-kvroute-cached-tokens'))).toBeGreaterThanOrEqual(Math.floor(PROMPT.length / 16) * 16);
    }
    // A list of endpoints sets dpSize by itself; a list of the wrong length is refused.
    const listed = createGateway({ blockSize: 16, backend, logLevel: false, workers: [workerEntryWithoutDpSize(w)] });
    expect(listed.workers()[0]).toMatchObject({ dpSize: 2 });
    await listed.close();
    expect(() =>
      createGateway({ blockSize: 16, backend, workers: [{ id: 1, url: w.url, kvEvents: w.kvEventsEndpoints, dpSize: 3 }] }),
    ).toThrow(/workers\[0\]\.kvEvents must be an endpoint or a list of 3 endpoints/);
  });

  test("Dynamo's indexer API: query, query_by_hash, workers, dump, register and unregister", async () => {
    const f = await startFleet(backend, 2, { model: 'mock-model' });
    const first = await postJson(`${f.url}/v1/completions`, { prompt: PROMPT, max_tokens: 2 });
    const holder = first.headers.get('x-kvroute-worker') as string;
    const blocks = Math.floor(PROMPT.length / 16);
    await waitFor(() => f.gateway.router.stats().index.blocks >= blocks, 'the blocks');
    const q = await postJson(`${f.adminUrl}/query`, { token_ids: mockTokenize(PROMPT), model_name: 'mock-model' });
    expect(q.status).toBe(200);
    expect(q.json.scores).toEqual({ [holder]: { 0: blocks * 16 } });
    expect(q.json.instances[holder]).toEqual({
      longest_matched: blocks * 16,
      gpu: blocks * 16,
      dp: { 0: blocks * 16 },
      cpu: blocks * 16,
      disk: blocks * 16,
    });
    expect(q.json.frequencies).toEqual(new Array(blocks).fill(1));
    // Lower tiers: the holder's engine offloaded the prompt and two blocks more to host memory, a
    // third to disk. `cpu` and `disk` are cumulative reaches, as Dynamo reports them.
    const longer = mockTokenize(PROMPT + PROMPT);
    const h = [...blockHashes(longer, 16, { backend })];
    f.gateway.router.applyEvents([
      stored(BigInt(holder), h.slice(0, blocks + 2), { tier: 'host_pinned' }),
      stored(BigInt(holder), h.slice(blocks + 2, blocks + 3), { tier: 'disk', prefix: h.slice(0, blocks + 2) }),
    ]);
    await f.gateway.router.flush();
    const tiered = await postJson(`${f.adminUrl}/query`, { token_ids: longer, model_name: 'mock-model' });
    expect(tiered.json.scores).toEqual({ [holder]: { 0: blocks * 16 } });
    expect(tiered.json.instances).toEqual({
      [holder]: {
        longest_matched: (blocks + 3) * 16,
        gpu: blocks * 16,
        dp: { 0: blocks * 16 },
        cpu: (blocks + 2) * 16,
        disk: (blocks + 3) * 16,
      },
    });
    expect((await postJson(`${f.adminUrl}/query`, { token_ids: [1, 2], model_name: 'other' })).status).toBe(404);
    expect((await postJson(`${f.adminUrl}/query`, { token_ids: 'x', model_name: 'mock-model' })).status).toBe(400);
    // A scope of the wrong type is refused, not read as no scope (which would answer for the base model).
    for (const scope of [{ lora_name: 5 }, { cache_salt: ['s'] }]) {
      const r = await postJson(`${f.adminUrl}/query`, { token_ids: mockTokenize(PROMPT), model_name: 'mock-model', ...scope });
      expect(r.status).toBe(400);
      expect(r.json.error).toMatch(/(lora_name|cache_salt) must be a string or null/);
    }
    const unscoped = await postJson(`${f.adminUrl}/query`, { token_ids: mockTokenize(PROMPT), model_name: 'mock-model', lora_name: null });
    expect(unscoped.json.scores).toEqual({ [holder]: { 0: blocks * 16 } });

    // Dump text keeps u64 hashes exact; query_by_hash takes them back as JSON numbers.
    const dumpText = await (await fetch(`${f.adminUrl}/dump`)).text();
    const dump = JSON.parse(dumpText);
    expect(dump['mock-model:default'].block_size).toBe(16);
    // Device chains, then one root event per run of lower-tier blocks (its head's tokens_hash is
    // its position): the host chain in one, the disk block (below a host block) in another.
    const events = dump['mock-model:default'].events as { storage_tier: string; event: { data: { stored: { blocks: unknown[] } } } }[];
    expect(events.map((e) => [e.storage_tier, e.event.data.stored.blocks.length])).toEqual([
      ['device', blocks],
      ['host_pinned', blocks + 2],
      ['disk', 1],
    ]);
    const deviceText = dumpText.split('{"worker_id":').filter((e) => e.includes('"storage_tier":"device"'));
    const localHashes = deviceText.flatMap((e) => [...e.matchAll(/"tokens_hash":(\d+)/g)].map((m) => m[1]));
    expect(localHashes.length).toBe(blocks);
    const byHash = await fetch(`${f.adminUrl}/query_by_hash`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: `{"block_hashes":[${localHashes.join(',')}],"model_name":"mock-model"}`,
    });
    expect(((await byHash.json()) as { scores: unknown }).scores).toEqual({ [holder]: { 0: blocks * 16 } });
    expect((await postJson(`${f.adminUrl}/query_by_hash`, { block_hashes: [1], model_name: 'mock-model', cache_salt: 's' })).status).toBe(
      400,
    );

    const listed = (await (await fetch(`${f.adminUrl}/workers`)).json()) as { instance_id: number; status: string; block_size: number }[];
    expect(listed.map((w) => w.instance_id).sort()).toEqual([1, 2]);
    expect(listed.every((w) => w.block_size === 16)).toBe(true);
    expect(await (await fetch(`${f.adminUrl}/workers?model_name=nope`)).json()).toEqual([]);

    // An index-only instance with an id above 2^53, registered rank by rank.
    const extra = await startWorker({ dpSize: 2 });
    const big = '18446744073709551557';
    const reg = (rank: number) =>
      fetch(`${f.adminUrl}/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: `{"instance_id":${big},"endpoint":"${extra.kvEventsEndpoints[rank]}","replay_endpoint":"${extra.replayEndpoints[rank]}","model_name":"mock-model","block_size":16,"dp_rank":${rank}}`,
      });
    expect((await reg(1)).status).toBe(400);
    expect((await reg(0)).status).toBe(201);
    expect((await reg(0)).status).toBe(409);
    expect((await reg(1)).status).toBe(201);
    const text = await (await fetch(`${f.adminUrl}/workers`)).text();
    expect(text).toContain(`"instance_id":${big}`);
    await sleep(300);
    // The index-only worker's events are indexed, and it never takes proxied requests.
    await postJson(`${extra.url}/v1/completions`, { prompt: `${PROMPT} on the extra worker`, max_tokens: 2 });
    const extraSource = () => f.gateway.router.index.engineSources().find((s) => s.workerId === BigInt(big));
    await waitFor(() => (extraSource()?.stats().ranks ?? []).some((r) => r.batches > 0), "the extra worker's events");
    for (let i = 0; i < 4; i++) {
      const r = await postJson(`${f.url}/v1/completions`, { prompt: `${PROMPT} on the extra worker`, max_tokens: 2 });
      expect(['1', '2']).toContain(r.headers.get('x-kvroute-worker'));
    }
    const unregister = await fetch(`${f.adminUrl}/unregister`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: `{"instance_id":${big},"model_name":"mock-model"}`,
    });
    expect(unregister.status).toBe(200);
    expect(((await (await fetch(`${f.adminUrl}/workers`)).json()) as unknown[]).length).toBe(2);
    expect((await postJson(`${f.adminUrl}/unregister`, { instance_id: 99, model_name: 'mock-model' })).status).toBe(404);
  });

  test('admin API: workers added and removed at run time; explain shows candidates; stats serialise', async () => {
    const f = await startFleet(backend, 1);
    const second = await startWorker();
    const added = await postJson(`${f.adminUrl}/admin/workers`, { ...workerEntry(second, 7) });
    expect(added.status).toBe(201);
    expect(added.json).toMatchObject({ id: 7, health: 'healthy', origin: 'admin' });
    const health = async () => (await (await fetch(`${f.adminUrl}/metrics`)).text()).match(/kvroute_gateway_worker_health\{worker="7".*/g);
    expect(await health()).toContain('kvroute_gateway_worker_health{worker="7",state="healthy"} 1');
    expect((await postJson(`${f.adminUrl}/admin/workers`, { ...workerEntry(second, 7) })).status).toBe(400);
    const bad = await postJson(`${f.adminUrl}/admin/workers`, { id: 8, url: 'ftp://x' });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatch(/body\.url/);
    const explain = await postJson(`${f.adminUrl}/admin/explain`, { prompt: 'hello' });
    expect(explain.json.tokens).toEqual(mockTokenize('hello'));
    expect(explain.json.candidates.map((c: { workerId: number }) => c.workerId).sort()).toEqual([1, 7]);
    // A completion's batch is explained prompt by prompt, as the proxy routes it.
    const batch = await postJson(`${f.adminUrl}/admin/explain`, { prompt: ['hello', 'there'] });
    expect(batch.status).toBe(200);
    expect(batch.json.prompts.map((p: { tokens: number[] }) => p.tokens)).toEqual([mockTokenize('hello'), mockTokenize('there')]);
    expect(batch.json.prompts[1].candidates.map((c: { workerId: number }) => c.workerId).sort()).toEqual([1, 7]);
    const badBatch = await postJson(`${f.adminUrl}/admin/explain`, { prompt: ['hello', 3] });
    expect(badBatch.status).toBe(400);
    const stats = (await (await fetch(`${f.adminUrl}/admin/stats`)).json()) as { workers: number };
    expect(stats.workers).toBe(2);
    // Without session affinity there is no binding to show.
    const session = await fetch(`${f.adminUrl}/admin/sessions/s1`);
    expect([session.status, ((await session.json()) as { error: string }).error]).toEqual([
      404,
      'session affinity is off (set the router option sessionAffinityTtlSecs)',
    ]);
    const del = await fetch(`${f.adminUrl}/admin/workers/7`, { method: 'DELETE' });
    expect(del.status).toBe(200);
    expect((await fetch(`${f.adminUrl}/admin/workers/7`, { method: 'DELETE' })).status).toBe(404);
    expect(await health()).toBeNull();
    expect(f.gateway.router.stats().workers).toBe(1);
    // With no worker left to tokenize, explain is a 503 to retry (as the proxy answers), not the caller's mistake.
    await fetch(`${f.adminUrl}/admin/workers/1`, { method: 'DELETE' });
    const unservable = await postJson(`${f.adminUrl}/admin/explain`, { prompt: 'hello' });
    expect(unservable.status).toBe(503);
    expect(unservable.json.error).toMatch(/no worker/);
    expect((await postJson(`${f.url}/v1/completions`, { prompt: 'hello' })).status).toBe(503);
  });

  test('listen: a port in use is a typed error and another can be tried; an admin port in use closes the gateway', async () => {
    const first = createGateway({ blockSize: 16, backend, logLevel: false });
    const taken = Number(new URL((await first.listen()).url).port);
    const second = createGateway({ blockSize: 16, backend, logLevel: false });
    const third = createGateway({ blockSize: 16, backend, logLevel: false, admin: { port: taken } });
    try {
      await expect(second.listen({ port: taken })).rejects.toMatchObject({
        code: 'ERR_INVALID_ARG',
        message: expect.stringMatching(new RegExp(`the proxy cannot listen on 127\\.0\\.0\\.1:${taken}: .*EADDRINUSE`)),
      });
      const { url } = await second.listen();
      expect((await fetch(`${url}/health`)).status).toBe(200);
      await expect(second.listen()).rejects.toMatchObject({ code: 'ERR_INVALID_ARG', message: expect.stringMatching(/already listening/) });
      await expect(first.listen({ port: 70000 })).rejects.toMatchObject({
        code: 'ERR_INVALID_ARG',
        message: expect.stringMatching(/port must be an integer in \[0, 65535\], got 70000/),
      });
      await expect(third.listen()).rejects.toMatchObject({
        code: 'ERR_INVALID_ARG',
        message: expect.stringMatching(/the admin listener cannot listen on .*; the gateway is closed/),
      });
      await expect(third.listen()).rejects.toMatchObject({ code: 'ERR_CLOSED' });
    } finally {
      await Promise.all([first.close(), second.close(), third.close()]);
    }
  });

  test('metrics scrape parses as Prometheus text and moves with traffic', async () => {
    const f = await startFleet(backend, 2);
    const before = (await scrape(`${f.url}/metrics`)).families;
    expect(before.get('kvroute_router_workers')?.metrics[0].value).toBe('2');
    // What runs, for a fleet's dashboards: the package's version, this backend, Node's version.
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    expect(before.get('kvroute_gateway_build_info')?.metrics).toEqual([
      { value: '1', labels: { version, backend, node: process.version } },
    ]);
    for (let i = 0; i < 3; i++) await postJson(`${f.url}/v1/completions`, { prompt: `${PROMPT}${i}`, max_tokens: 2 });
    await waitFor(() => f.gateway.router.stats().index.blocks > 0, 'blocks');
    const { families: after, sum } = await scrape(`${f.url}/metrics`);
    expect(sum('kvroute_gateway_requests_total')).toBe(3);
    expect(sum('kvroute_router_routed_total')).toBe(3);
    expect(sum('kvroute_index_blocks')).toBeGreaterThan(0);
    expect(sum('kvroute_index_events_applied_total')).toBeGreaterThan(0);
    expect(after.get('kvroute_gateway_request_duration_seconds')?.type).toBe('HISTOGRAM');
    expect(after.get('kvroute_event_source_state')?.metrics.filter((m) => m.value === '1').length).toBe(2);
    for (const name of after.keys()) expect(name).toMatch(/^(kvroute_[a-z_]+|process_.*|nodejs_.*)$/);
  });

  test('auth: API keys on the proxy, an admin token on the admin port; body limits; no header injection', async () => {
    const evil = createServer((req, res) => {
      if (req.url === '/health') return res.end();
      res.writeHead(200, { 'content-type': 'application/json', 'set-cookie': 'session=stolen', 'x-evil': 'yes' });
      res.end(JSON.stringify({ id: 'x', choices: [], usage: { prompt_tokens: 1, prompt_tokens_details: { cached_tokens: 0 } } }));
    });
    await new Promise<void>((r) => evil.listen(0, '127.0.0.1', r));
    const port = (evil.address() as AddressInfo).port;
    try {
      const f = await startFleet(backend, 0, {
        workers: [{ id: 1, url: `http://127.0.0.1:${port}` }],
        auth: { apiKeys: ['key-a', 'key-b'], adminToken: 'admin-secret' },
        admin: { port: 0 },
        bodyLimitBytes: 4096,
      });
      expect(f.adminUrl).not.toBe(f.url);
      const body = { prompt: [1, 2, 3], max_tokens: 1 };
      expect((await postJson(`${f.url}/v1/completions`, body)).status).toBe(401);
      expect((await postJson(`${f.url}/v1/completions`, body, { authorization: 'Bearer wrong' })).status).toBe(401);
      const ok = await postJson(`${f.url}/v1/completions`, body, { authorization: 'Bearer key-b' });
      expect(ok.status).toBe(200);
      expect(ok.headers.get('set-cookie')).toBeNull();
      expect(ok.headers.get('x-evil')).toBeNull();
      expect(ok.headers.get('x-kvroute-worker')).toBe('1');
      // The admin and indexer API and /metrics are not on the proxy's port.
      expect((await fetch(`${f.url}/metrics`)).status).toBe(404);
      expect((await fetch(`${f.adminUrl}/metrics`)).status).toBe(401);
      expect((await fetch(`${f.adminUrl}/workers`, { headers: { authorization: 'Bearer key-a' } })).status).toBe(401);
      expect((await fetch(`${f.adminUrl}/metrics`, { headers: { authorization: 'Bearer admin-secret' } })).status).toBe(200);
      const big = await postJson(`${f.url}/v1/completions`, { prompt: 'x'.repeat(5000) }, { authorization: 'Bearer key-a' });
      expect(big.status).toBe(413);
      const metrics = await (await fetch(`${f.adminUrl}/metrics`, { headers: { authorization: 'Bearer admin-secret' } })).text();
      expect(metrics).toMatch(/kvroute_gateway_rejected_total\{reason="body_too_large"\} 1/);
    } finally {
      evil.close();
    }
  });

  test('back-pressure: a full queue answers 429 with Retry-After; a queue timeout 503', async () => {
    const f = await startFleet(backend, 0, {
      router: { routerQueueThreshold: 0.01 },
      queue: { maxQueued: 1, timeoutMs: 100, retryAfterSecs: 2 },
    });
    const w = await startWorker({ speedup: 0.05 });
    f.gateway.addWorker({ ...workerEntry(w, 1), maxNumBatchedTokens: 256 });
    const long = { prompt: 'x'.repeat(600), max_tokens: 2 };
    const busy = postJson(`${f.url}/v1/completions`, long);
    await waitFor(() => f.gateway.router.stats().inFlight === 1, 'the first request to be in flight');
    const queued = postJson(`${f.url}/v1/completions`, long);
    await waitFor(() => f.gateway.router.stats().queued === 1, 'the second to queue');
    const refused = await postJson(`${f.url}/v1/completions`, long);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('2');
    const timedOut = await queued;
    expect(timedOut.status).toBe(503);
    expect(timedOut.json.error.message).toMatch(/within 100 ms/);
    expect((await busy).status).toBe(200);
  });

  test('several models queue apart: one whose worker is busy neither holds up nor fills the queue for another', async () => {
    const slow = await startWorker({ speedup: 0.05, model: 'm-a' });
    const fast = await startWorker({ model: 'm-b' });
    const f = await startFleet(backend, 0, {
      router: { routerQueueThreshold: 0.01 },
      queue: { maxQueued: 1, timeoutMs: 30_000 },
      workers: [
        { ...workerEntry(slow, 1), maxNumBatchedTokens: 256 },
        { ...workerEntry(fast, 2), maxNumBatchedTokens: 256 },
      ],
    });
    const models = async () => ((await (await fetch(`${f.url}/v1/models`)).json()) as { data: unknown[] }).data.length;
    await waitFor(async () => (await models()) === 2, 'both models to be learned');
    const long = (model: string) => ({ prompt: 'x'.repeat(600), max_tokens: 2, model });
    const busy = postJson(`${f.url}/v1/completions`, long('m-a'));
    await waitFor(() => f.gateway.router.stats().inFlight === 1, 'the first request to be in flight');
    const queued = postJson(`${f.url}/v1/completions`, long('m-a'));
    await waitFor(() => f.gateway.router.stats().queued === 1, 'the second to queue');
    const refused = await postJson(`${f.url}/v1/completions`, long('m-a'));
    expect([refused.status, refused.json.error.message]).toEqual([429, '1 requests for model "m-a" are waiting for a worker; retry later']);
    // m-b's worker is free: its request neither waits behind m-a's nor counts against m-a's full queue.
    const other = await postJson(`${f.url}/v1/completions`, long('m-b'));
    expect([other.status, other.headers.get('x-kvroute-worker')]).toEqual([200, '2']);
    expect(f.gateway.router.stats().queued).toBe(1);
    expect((await busy).status).toBe(200);
    expect((await queued).status).toBe(200);
  });

  test("queued requests are served in vLLM's priority order (lower first), then in arrival order", async () => {
    const f = await startFleet(backend, 0, { router: { routerQueueThreshold: 0.01 }, queue: { timeoutMs: 30_000 } });
    const w = await startWorker({ speedup: 0.2 });
    f.gateway.addWorker({ ...workerEntry(w, 1), maxNumBatchedTokens: 256 });
    const long = (priority?: number) => ({ prompt: 'x'.repeat(600), max_tokens: 1, ...(priority === undefined ? {} : { priority }) });
    const order: string[] = [];
    const send = (name: string, priority?: number) =>
      postJson(`${f.url}/v1/completions`, long(priority)).then((r) => order.push(`${name}:${r.status}`));
    const busy = send('busy');
    await waitFor(() => f.gateway.router.stats().inFlight === 1, 'the first request to be in flight');
    const later = [send('lazy', 5)];
    await waitFor(() => f.gateway.router.stats().queued === 1, 'the lazy one to queue');
    later.push(send('plain'));
    await waitFor(() => f.gateway.router.stats().queued === 2, 'the plain one to queue');
    later.push(send('urgent', -5));
    await waitFor(() => f.gateway.router.stats().queued === 3, 'the urgent one to queue');
    await Promise.all([busy, ...later]);
    expect(order).toEqual(['busy:200', 'urgent:200', 'plain:200', 'lazy:200']);
  });

  test('close() drains in-flight requests before it stops', async () => {
    const f = await startFleet(backend, 1, {}, { speedup: 2 });
    const running = sse(`${f.url}/v1/completions`, { prompt: 'drain me', max_tokens: 15, stream: true });
    await waitFor(() => f.gateway.router.stats().inFlight === 1, 'the request to be in flight');
    const closing = f.gateway.close();
    const done = await running;
    await closing;
    expect(done.status).toBe(200);
    expect(done.events.at(-1)).toBe('[DONE]');
    await expect(fetch(`${f.url}/health`)).rejects.toThrow();
  });
});

describe('gateway options and JSON', () => {
  test('bad options name the key; nothing starts', () => {
    const cases: [unknown, RegExp][] = [
      [{}, /blockSize/],
      [{ blockSize: 16, workers: [{ id: 1 }] }, /workers\[0\]\.url/],
      [{ blockSize: 16, workers: [{ id: 1, url: 'http://a:1/path' }] }, /workers\[0\]\.url must be a base URL/],
      [{ blockSize: 16, workers: [{ id: -1, url: 'http://a:1' }] }, /workers\[0\]\.id/],
      [{ blockSize: 16, workers: [{ id: 1, url: 'http://a:1', kvEvents: 'udp://x' }] }, /workers\[0\]\.kvEvents/],
      [{ blockSize: 16, workers: [{ id: 1, url: 'http://a:1', colour: 'red' }] }, /workers\[0\]: unknown key "colour"/],
      [
        { blockSize: 16, workers: [{ id: 1, url: 'http://a:1', max_num_batched_tokens: 8192 }] },
        /workers\[0\]: unknown key "max_num_batched_tokens": did you mean "maxNumBatchedTokens"\?/,
      ],
      [
        { blockSize: 16, router: { overlap_score_credit: 0.5 } },
        /^router has an unknown option "overlap_score_credit": did you mean "overlapScoreCredit"\?/,
      ],
      [{ blockSize: 16, health: { failureThreshold: 0 } }, /health\.failureThreshold/],
      [{ blockSize: 16, router: { blockSize: 16 } }, /router: set blockSize/],
      [{ blockSize: 16, router: { routerQueueThresh: 2 } }, /^router has an unknown option "routerQueueThresh"/],
      [{ blockSize: 16, router: { routerQueueThreshold: -2 } }, /^router\.routerQueueThreshold must be/],
      [{ blockSize: 16, router: { overlapScoreCredit: -1 } }, /^router\.overlapScoreCredit must be a finite number >= 0/],
      [
        { blockSize: 16, router: { overlapScoreWeight: 1, prefillLoadScale: 2 } },
        /^router\.overlapScoreWeight is the older name of prefillLoadScale/,
      ],
      [{ blockSize: 16, workers: [{ id: 1, url: 'http://a:1', kvEvents: 'tcp://a:65535', dpSize: 2 }] }, /dp rank 1 would use port 65536/],
      [{ blockSize: 16, tokenizer: '/nonexistent/tokenizer.json' }, /cannot load the tokenizer/],
      [{ blockSize: 16, tokenizeCache: { maxPrompts: -1 } }, /tokenizeCache\.maxPrompts/],
      [{ blockSize: 16, tokenizeCache: { size: 1 } }, /tokenizeCache.*unknown key "size"/],
      [{ blockSize: 16, responses: { maxRemembered: 1.5 } }, /responses\.maxRemembered must be an integer/],
      [{ blockSize: 16, responses: { store: true } }, /responses.*unknown key "store"/],
      [
        {
          blockSize: 16,
          workers: [
            { id: 1, url: 'http://a:1' },
            { id: '1', url: 'http://b:1' },
          ],
        },
        /listed twice/,
      ],
    ];
    for (const [opts, message] of cases) {
      let caught: unknown;
      try {
        createGateway(opts as never);
      } catch (err) {
        caught = err;
      }
      expect(isKvRouteError(caught) && caught.code === 'ERR_INVALID_ARG').toBe(true);
      expect((caught as Error).message).toMatch(message);
    }
  });

  test.each(BACKENDS)('decisions and stats serialise with ids as decimal strings (%s)', async (backend) => {
    const router = new KvRouter({ blockSize: 4, backend });
    router.addWorker(2n ** 64n - 1n);
    const decision = await router.route({ requestId: 'a', tokens: [1, 2, 3, 4, 5] });
    const json = JSON.parse(JSON.stringify(decision));
    expect(json.workerId).toBe('18446744073709551615');
    expect(json.candidates[0].workerId).toBe('18446744073709551615');
    expect(JSON.parse(JSON.stringify(router.stats())).load[0].workerId).toBe('18446744073709551615');
    expect(JSON.parse(JSON.stringify(router.index.findMatches([1n]))).scores).toEqual([]);
    expect(Object.keys(decision)).not.toContain('toJSON');
    router.close();
  });
});

describe('gateway pieces on their own', () => {
  test.each(BACKENDS)("metrics(router, registry) registers a router's metrics on the caller's registry (%s)", async (backend) => {
    const { Registry } = await import('prom-client');
    const registry = new Registry();
    const router = new KvRouter({ blockSize: 4, backend });
    router.addWorker(3, { dataParallelSize: 2 });
    await router.route({ requestId: 'm', tokens: [1, 2, 3, 4, 5, 6, 7, 8] });
    expect(metrics(router, registry)).toBe(registry);
    const text = await registry.metrics();
    expect(text).toMatch(/kvroute_router_ranks 2/);
    expect(text).toMatch(/kvroute_router_in_flight_requests\{worker="3",dp_rank="\d"\} 1/);
    expect(text).toMatch(/kvroute_router_routed_total 1/);
    router.free('m');
    expect(await registry.metrics()).not.toMatch(/kvroute_router_in_flight_requests\{/);
    router.close();
    expect(() => metrics({} as never)).toThrow(/needs a KvRouter/);
  });

  test.each(BACKENDS)('TLS: the proxy serves HTTPS with the given certificate (%s)', async (backend) => {
    const { cert, key } = makeCert(scratchDir('kvroute-tls-'), '127.0.0.1');
    const w = await startWorker();
    const f = await startFleet(backend, 0, {
      workers: [workerEntry(w, 1)],
      tls: { cert, key },
    });
    expect(f.url.startsWith('https://')).toBe(true);
    const { Agent, request } = await import('undici');
    const dispatcher = new Agent({ connect: { ca: cert } });
    const res = await request(`${f.url}/v1/completions`, {
      method: 'POST',
      dispatcher,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'over tls', max_tokens: 2 }),
    });
    expect(res.statusCode).toBe(200);
    expect(((await res.body.json()) as { usage: { prompt_tokens: number } }).usage.prompt_tokens).toBe(8);
    await dispatcher.close();
  });
});
