/**
 * Disaggregated serving through the gateway: prefill and decode workers (real mock workers, whose
 * HTTP APIs sit behind TCP proxies that keep what the gateway sent them), each request's prefill
 * leg routed by KV overlap among the prefill workers and its decode leg among the decode workers,
 * with the prefill worker's KV-transfer parameters, as vLLM's disaggregation proxy sends them.
 */

import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { afterEach, describe, expect, test } from 'vitest';
import { createGateway, type MockWorker, type WorkerRole, writeMockTokenizer } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { disaggregatedFleet, streamedChat, text, twoPromptBatch } from './helpers/disaggregated-fleet.js';
import { DnsServer as Dns, type DnsServer, type SrvRecord } from './helpers/dns-server.js';
import { closeFleetsAfterEach, startFleet, startWorker, workerEntry } from './helpers/gateway.js';
import { type Json, postJson } from './helpers/http.js';
import { scrape } from './helpers/prometheus.js';
import { scratchDir } from './helpers/scratch-dir.js';
import { sleep, waitFor } from './helpers/wait.js';

closeFleetsAfterEach();

const dnsServers: DnsServer[] = [];
afterEach(async () => {
  for (const dns of dnsServers.splice(0)) await dns.stop();
});

describe.each(BACKENDS)('disaggregated serving (%s)', (backend) => {
  test('a completion is prefilled on a prefill worker and decoded on a decode worker, with the KV-transfer parameters the prefill answered', async () => {
    const f = await disaggregatedFleet(backend);
    const body = { model: 'mock-model', prompt: text(60, 'alpha'), max_tokens: 5, min_tokens: 2, temperature: 0 };
    const r = await postJson(`${f.url}/v1/completions`, body, { 'x-request-id': 'pd-1' });
    expect(r.status).toBe(200);
    expect(r.json.choices[0].text.length).toBeGreaterThan(0);
    expect(r.json.usage.completion_tokens).toBe(5);
    const prefillWorker = Number(r.headers.get('x-kvroute-prefill-worker'));
    const decodeWorker = Number(r.headers.get('x-kvroute-worker'));
    expect([1, 2]).toContain(prefillWorker);
    expect([3, 4]).toContain(decodeWorker);
    expect(r.headers.get('x-kvroute-prefill-dp-rank')).toBe('0');

    // The prefill leg: one token, unstreamed, asking the connector to keep the KV for a remote decode.
    const [prefill, ...morePrefills] = f.received(prefillWorker);
    expect(morePrefills).toEqual([]);
    expect(prefill.path).toBe('/v1/completions');
    expect(prefill.head['x-request-id']).toBe('pd-1');
    expect(prefill.body).toEqual({
      model: 'mock-model',
      prompt: body.prompt,
      temperature: 0,
      stream: false,
      max_tokens: 1,
      kv_transfer_params: {
        do_remote_decode: true,
        do_remote_prefill: false,
        remote_engine_id: null,
        remote_block_ids: null,
        remote_host: null,
        remote_port: null,
      },
    });
    // The decode leg: the request itself, with what the prefill worker answered.
    const [decode, ...moreDecodes] = f.received(decodeWorker);
    expect(moreDecodes).toEqual([]);
    expect(decode.head['x-request-id']).toBe('pd-1');
    const { kv_transfer_params: params, ...rest } = decode.body;
    expect(rest).toEqual(body);
    const promptTokens = r.json.usage.prompt_tokens;
    expect(params).toMatchObject({
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_request_id: 'cmpl-pd-1',
      remote_host: '127.0.0.1',
      remote_port: Number(new URL(f.workers[prefillWorker - 1].url).port),
    });
    expect(params.remote_block_ids).toHaveLength(Math.floor(promptTokens / 16));
    expect(typeof params.remote_engine_id).toBe('string');
    // Nobody else was asked.
    for (const id of [1, 2, 3, 4]) if (id !== prefillWorker && id !== decodeWorker) expect(f.received(id)).toEqual([]);

    expect(f.workers[prefillWorker - 1].stats().kvTransfers).toEqual({ offered: 1, pulled: 0 });
    expect(f.workers[decodeWorker - 1].stats().kvTransfers).toEqual({ offered: 0, pulled: 1 });
    // The decode worker pulled the prompt rather than compute it.
    const engine = await scrape(`${f.workers[decodeWorker - 1].url}/metrics`);
    expect(engine.sum('vllm:prompt_tokens_by_source_total', { source: 'external_kv_transfer' })).toBe(promptTokens);
    expect(engine.sum('vllm:prompt_tokens_by_source_total', { source: 'local_compute' })).toBe(0);
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_prefill_legs_total', { worker: String(prefillWorker), result: 'transferred' })).toBe(1);
    expect(m.sum('kvroute_gateway_prefill_leg_seconds')).toBe(1);
    expect(m.sum('kvroute_gateway_requests_total', { worker: String(decodeWorker), status: '200' })).toBe(1);
  });

  test('prefill legs go by KV overlap: a request sharing a long prefix is prefilled where that prefix is cached', async () => {
    const f = await disaggregatedFleet(backend);
    for (const seed of ['p', 'q', 'r', 's']) {
      const prefix = text(80, seed);
      const first = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: `${prefix} one`, max_tokens: 2 });
      expect(first.status).toBe(200);
      const holder = first.headers.get('x-kvroute-prefill-worker');
      // The prefill worker's KV events reach the index.
      await sleep(150);
      const second = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: `${prefix} two`, max_tokens: 2 });
      expect(second.status).toBe(200);
      expect(second.headers.get('x-kvroute-prefill-worker')).toBe(holder);
      // The prediction is for the prefill worker's cache, and its report matches it.
      expect(Number(second.headers.get('x-kvroute-cached-tokens'))).toBeGreaterThanOrEqual(16 * 10);
    }
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_cache_predictions_total', { outcome: 'exact' })).toBe(8);
  });

  test('a session keeps to its prefill worker (session affinity binds the prefill legs; the decode legs leave the binding be)', async () => {
    const f = await disaggregatedFleet(backend, undefined, { router: { sessionAffinityTtlSecs: 60 } });
    const session = { 'x-kvroute-session-id': 'agent-7' };
    const first = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: text(40, 'turn-one'), max_tokens: 2 }, session);
    const bound = first.headers.get('x-kvroute-prefill-worker');
    // The other prefill worker caches the next turn's prompt: by cost alone it would take it.
    const other = bound === '1' ? 2 : 1;
    const next = text(80, 'turn-two');
    expect(
      (await postJson(`${f.workers[other - 1].url}/v1/completions`, { model: 'mock-model', prompt: next, max_tokens: 1 })).status,
    ).toBe(200);
    await sleep(200);
    const alone = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: `${next} alone`, max_tokens: 2 });
    expect(alone.headers.get('x-kvroute-prefill-worker')).toBe(String(other));
    for (let i = 0; i < 2; i++) {
      const r = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: `${next} ${i}`, max_tokens: 2 }, session);
      expect(r.status).toBe(200);
      expect(r.headers.get('x-kvroute-prefill-worker')).toBe(bound);
      expect(['3', '4']).toContain(r.headers.get('x-kvroute-worker'));
    }
  });

  test("the request's trace holds both legs: a CLIENT span each, the engine's context the leg's own", async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
    const f = await disaggregatedFleet(backend, undefined, { tracing: { tracerProvider: provider } });
    const r = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: text(30, 'traced'), max_tokens: 2 });
    expect(r.status).toBe(200);
    const isRequest = (s: ReadableSpan) => s.kind === SpanKind.SERVER;
    await waitFor(() => exporter.getFinishedSpans().some(isRequest), 'the request span');
    const spans = exporter.getFinishedSpans();
    const request = spans.find(isRequest) as ReadableSpan;
    const tries = spans.filter((s) => s.kind === SpanKind.CLIENT && s.name === 'POST /v1/completions');
    expect(tries.map((s) => [s.attributes['kvroute.leg'], s.attributes['kvroute.worker']]).sort()).toEqual(
      [
        ['decode', r.headers.get('x-kvroute-worker')],
        ['prefill', r.headers.get('x-kvroute-prefill-worker')],
      ].sort(),
    );
    for (const t of tries) expect(t.spanContext().traceId).toBe(request.spanContext().traceId);
    // Each worker received its own leg's span as its parent.
    for (const t of tries) {
      const worker = Number(t.attributes['kvroute.worker']);
      const [sent] = f.received(worker);
      expect(sent.head.traceparent).toBe(`00-${t.spanContext().traceId}-${t.spanContext().spanId}-01`);
    }
  });

  test('a stream is the decode leg’s; the prefill leg is unstreamed and keeps no stream options', async () => {
    const f = await disaggregatedFleet(backend);
    const r = await streamedChat(f.url, { max_completion_tokens: 4 });
    const prefill = f.received(Number(r.headers.get('x-kvroute-prefill-worker')))[0];
    expect(prefill.path).toBe('/v1/chat/completions');
    expect(prefill.body.stream).toBe(false);
    expect(prefill.body.stream_options).toBeUndefined();
    expect(prefill.body.max_tokens).toBe(1);
    expect(prefill.body.max_completion_tokens).toBe(1);
    const decode = f.received(Number(r.headers.get('x-kvroute-worker')))[0];
    expect(decode.body.stream).toBe(true);
    expect(decode.body.max_completion_tokens).toBe(4);
    expect(decode.body.kv_transfer_params.do_remote_prefill).toBe(true);
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_time_to_first_token_seconds')).toBe(1);
  });

  test('with every prefill worker unreachable the request goes whole to a decode worker, counted', async () => {
    // A local tokenizer: the engine's /tokenize would meet the unreachable workers first.
    const f = await disaggregatedFleet(backend, undefined, { tokenizer: writeMockTokenizer(scratchDir('kvroute-pd-tok-')) });
    await f.wires[0].cut();
    await f.wires[1].cut();
    const r = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: text(30, 'down'), max_tokens: 3 });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-kvroute-prefill-worker')).toBeNull();
    const decodeWorker = Number(r.headers.get('x-kvroute-worker'));
    expect([3, 4]).toContain(decodeWorker);
    expect(r.headers.get('x-kvroute-attempts')).toBe('3');
    expect(f.received(decodeWorker)[0].body.kv_transfer_params).toBeUndefined();
    expect(f.workers[decodeWorker - 1].stats().kvTransfers.pulled).toBe(0);
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_prefill_legs_total', { result: 'failed' })).toBe(1);
    expect(m.sum('kvroute_gateway_retries_total')).toBe(2);
  });

  test('a decode leg whose worker is unreachable is retried on another decode worker, with the same KV-transfer parameters', async () => {
    const f = await disaggregatedFleet(backend, ['prefill', 'decode', 'decode'], {
      tokenizer: writeMockTokenizer(scratchDir('kvroute-pd-tok-')),
    });
    const prompt = text(80, 'retry');
    // Decode worker 2 caches the prompt, so the router prefers it for the decode leg; then it becomes unreachable.
    expect((await postJson(`${f.workers[1].url}/v1/completions`, { model: 'mock-model', prompt, max_tokens: 1 })).status).toBe(200);
    await sleep(200);
    const preferred = await postJson(`${f.url}/admin/explain`, { model: 'mock-model', prompt });
    expect(preferred.json.decodeCandidates.find((c: Json) => c.workerId === 2).overlapBlocks).toBeGreaterThan(10);
    await f.wires[1].cut();
    const r = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt, max_tokens: 2 }, { 'x-request-id': 'again' });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-kvroute-worker')).toBe('3');
    expect(r.headers.get('x-kvroute-attempts')).toBe('3');
    const [decode] = f.received(3);
    expect(decode.head['x-request-id']).toBe('again');
    expect(decode.body.kv_transfer_params.remote_request_id).toBe('cmpl-again');
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_retries_total')).toBe(1);
  });

  test('a prefill worker’s 400 is the client’s answer, and no decode leg runs', async () => {
    const f = await disaggregatedFleet(backend);
    const r = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: 'hello there', max_tokens: 3, top_p: 7 });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toMatch(/top_p/);
    expect([1, 2]).toContain(Number(r.headers.get('x-kvroute-worker')));
    expect(f.received(3)).toEqual([]);
    expect(f.received(4)).toEqual([]);
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_prefill_legs_total', { result: 'refused' })).toBe(1);
  });

  test('a request carrying its own kv_transfer_params is refused in a disaggregated fleet, and passed on in an aggregated one', async () => {
    const f = await disaggregatedFleet(backend);
    const own = { model: 'mock-model', prompt: 'hello', max_tokens: 2, kv_transfer_params: { do_remote_decode: true } };
    const r = await postJson(`${f.url}/v1/completions`, own);
    expect(r.status).toBe(400);
    expect(r.json.error.message).toMatch(/kv_transfer_params is set by the gateway/);
    for (const id of [1, 2, 3, 4]) expect(f.received(id)).toEqual([]);
    const whole = await disaggregatedFleet(backend, ['aggregated', 'aggregated']);
    const passed = await postJson(`${whole.url}/v1/completions`, own);
    expect(passed.status).toBe(200);
    expect(passed.json.kv_transfer_params.do_remote_prefill).toBe(true);
  });

  test("a batch's prompts are split one by one, as requests of their own; the Responses API goes whole to a decode worker", async () => {
    const f = await disaggregatedFleet(backend);
    const batch = await twoPromptBatch(f.url);
    const prefills = (batch.headers.get('x-kvroute-prefill-worker') as string).split(',');
    expect(prefills).toHaveLength(2);
    for (const id of prefills) expect(['1', '2']).toContain(id);
    const prefilled = [...f.received(1), ...f.received(2)];
    expect(prefilled.map((r) => [r.head['x-request-id'], r.body.max_tokens, r.body.kv_transfer_params.do_remote_decode]).sort()).toEqual([
      ['b-0', 1, true],
      ['b-1', 1, true],
    ]);
    const decoded = [...f.received(3), ...f.received(4)];
    expect(decoded.map((r) => [r.head['x-request-id'], r.body.prompt, r.body.kv_transfer_params.do_remote_prefill]).sort()).toEqual([
      ['b-0', text(30, 'one'), true],
      ['b-1', text(30, 'two'), true],
    ]);
    const responses = await postJson(`${f.url}/v1/responses`, { model: 'mock-model', input: 'hello', max_output_tokens: 2 });
    expect(responses.status).toBe(200);
    expect(prefilled.length).toBe(f.received(1).length + f.received(2).length);
    const after = [...f.received(3), ...f.received(4)].filter((r) => r.path === '/v1/responses');
    expect(after).toHaveLength(1);
    expect(after[0].body.kv_transfer_params).toBeUndefined();
  });

  test("a batch prompt's prefill 400 fails the batch, as vLLM's would", async () => {
    const f = await disaggregatedFleet(backend);
    const r = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: ['good one', 'good two'], max_tokens: 2, top_p: 7 });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toMatch(/top_p/);
    expect([...f.received(3), ...f.received(4)]).toEqual([]);
  });

  test('roles change in place: a fleet given roles by setWorkers splits its next requests', async () => {
    const f = await disaggregatedFleet(backend, ['aggregated', 'aggregated', 'aggregated', 'aggregated']);
    const before = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: 'first', max_tokens: 2 });
    expect(before.headers.get('x-kvroute-prefill-worker')).toBeNull();
    const roles: WorkerRole[] = ['prefill', 'prefill', 'decode', 'decode'];
    const changes = f.gateway.setWorkers(
      f.workers.map((w, i) => ({ ...workerEntry(w, i + 1), url: `http://127.0.0.1:${f.wires[i].port}`, role: roles[i] })),
    );
    expect(changes.updated).toEqual([1n, 2n, 3n, 4n]);
    const after = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: 'second', max_tokens: 2 });
    expect(after.status).toBe(200);
    expect(['1', '2']).toContain(after.headers.get('x-kvroute-prefill-worker'));
    expect(['3', '4']).toContain(after.headers.get('x-kvroute-worker'));
  });

  test('a decode leg is booked on its decode worker with its blocks and no prefill work (it pulls the prompt rather than compute it)', async () => {
    const f = await disaggregatedFleet(backend, ['prefill', 'decode'], { tokenizer: writeMockTokenizer(scratchDir('kvroute-pd-tok-')) });
    f.workers[1].fault({ kind: 'hang' });
    const client = new AbortController();
    const pending = fetch(`${f.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'mock-model', prompt: text(60, 'held'), max_tokens: 4 }),
      signal: client.signal,
    }).catch(() => undefined);
    const gauge = async (name: string) => (await scrape(`${f.url}/metrics`)).sum(name, { worker: '2' });
    await waitFor(async () => (await gauge('kvroute_router_in_flight_requests')) === 1, 'the decode leg booked');
    expect(await gauge('kvroute_router_active_prefill_tokens')).toBe(0);
    expect(await gauge('kvroute_router_active_blocks')).toBeGreaterThan(0);
    // The prefill leg was freed when its answer came.
    expect((await scrape(`${f.url}/metrics`)).sum('kvroute_router_in_flight_requests', { worker: '1' })).toBe(0);
    client.abort();
    await pending;
    f.workers[1].fault({ kind: 'recover' });
  });

  test('disaggregation.bypassBelowTokens: a prompt a decode worker holds all but a few tokens of skips the prefill leg', async () => {
    const f = await disaggregatedFleet(backend, ['prefill', 'decode'], { disaggregation: { bypassBelowTokens: 32 } });
    const prompt = text(100, 'bypass');
    const first = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt, max_tokens: 2 });
    expect(first.headers.get('x-kvroute-prefill-worker')).toBe('1');
    const promptTokens: number = first.json.usage.prompt_tokens;
    expect(promptTokens).toBeGreaterThan(200);
    // The decode worker now holds the prompt's blocks (it pulled them, and published them as stored).
    await sleep(200);
    const again = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: `${prompt} x`, max_tokens: 2 });
    expect(again.status).toBe(200);
    expect(again.headers.get('x-kvroute-prefill-worker')).toBeNull();
    expect(again.headers.get('x-kvroute-worker')).toBe('2');
    expect(f.received(1)).toHaveLength(1);
    expect(f.received(2).at(-1)?.body.kv_transfer_params).toBeUndefined();
    // The admin API's explain says the same, nothing booked.
    const ids = (list: Json[]) => list.map((c) => c.workerId);
    const held = await postJson(`${f.url}/admin/explain`, { model: 'mock-model', prompt: `${prompt} x` });
    expect([held.json.split, ids(held.json.candidates), held.json.decodeCandidates]).toEqual([false, [2], undefined]);
    const other = await postJson(`${f.url}/admin/explain`, { model: 'mock-model', prompt: text(100, 'fresh') });
    expect([other.json.split, ids(other.json.candidates), ids(other.json.decodeCandidates)]).toEqual([true, [1], [2]]);
    // A prompt the decode worker does not hold is split again.
    const fresh = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: text(100, 'fresh'), max_tokens: 2 });
    expect(fresh.headers.get('x-kvroute-prefill-worker')).toBe('1');
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_prefill_legs_total', { result: 'bypassed' })).toBe(1);
    expect(m.sum('kvroute_gateway_prefill_legs_total', { result: 'transferred' })).toBe(2);
    let error: unknown;
    try {
      createGateway({ blockSize: 16, backend, logLevel: false, disaggregation: { bypassBelowTokens: -1 } });
    } catch (err) {
      error = err;
    }
    expect((error as Error).message).toMatch(/disaggregation\.bypassBelowTokens must be an integer in \[0, 2147483648\], got -1/);
  });

  test('one Service per pool: DNS discovery gives each pool its role, and requests are split between them', async () => {
    const [p, d] = await Promise.all([startWorker(), startWorker()]);
    const port = (endpoint: string) => Number(new URL(endpoint).port);
    const records = (svc: string, w: MockWorker): SrvRecord[] => [
      [`_http._tcp.${svc}.test`, `pod-1.${svc}.test`, port(w.url)],
      [`_kv-events._tcp.${svc}.test`, `pod-1.${svc}.test`, port(w.kvEventsEndpoints[0])],
    ];
    const dns = new Dns();
    dnsServers.push(dns);
    await dns.serve([...records('prefill', p), ...records('decode', d)], ['pod-1.prefill.test', 'pod-1.decode.test']);
    const entry = (svc: string, role: WorkerRole) => ({
      srv: `_http._tcp.${svc}.test`,
      kvEventsSrv: `_kv-events._tcp.${svc}.test`,
      servers: [dns.server],
      intervalMs: 150,
      timeoutMs: 200,
      role,
    });
    const f = await startFleet(backend, 0, { workers: [], discovery: [entry('prefill', 'prefill'), entry('decode', 'decode')] });
    await waitFor(() => f.gateway.workers().length === 2, 'both pools');
    expect(
      f.gateway
        .workers()
        .map((w) => [w.url, w.role])
        .sort(),
    ).toEqual(
      [
        [p.url, 'prefill'],
        [d.url, 'decode'],
      ].sort(),
    );
    const r = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: text(40, 'dns'), max_tokens: 2 });
    expect(r.status).toBe(200);
    expect(p.stats().kvTransfers).toEqual({ offered: 1, pulled: 0 });
    expect(d.stats().kvTransfers).toEqual({ offered: 0, pulled: 1 });
    const byUrl = new Map(f.gateway.workers().map((w) => [String(w.id), w.url]));
    expect(byUrl.get(r.headers.get('x-kvroute-prefill-worker') as string)).toBe(p.url);
    expect(byUrl.get(r.headers.get('x-kvroute-worker') as string)).toBe(d.url);
  });

  test('a bad role is refused by name', () => {
    let error: unknown;
    try {
      createGateway({ blockSize: 16, backend, logLevel: false, workers: [{ id: 1, url: 'http://127.0.0.1:1', role: 'both' as never }] });
    } catch (err) {
      error = err;
    }
    expect(error).toMatchObject({ code: 'ERR_INVALID_ARG' });
    expect((error as Error).message).toMatch(/workers\[0\]\.role must be one of 'aggregated', 'prefill', 'decode', got "both"/);
    expect(() => createGateway({ blockSize: 16, backend, logLevel: false, discovery: { srv: 'a.test', role: 'prefil' as never } })).toThrow(
      /discovery\.role must be one of 'aggregated', 'prefill', 'decode', got "prefil"/,
    );
  });
});

describe('the mock worker’s KV-transfer parameters', () => {
  test('a prefill leg offers its blocks under a stable engine id; a bad pull is refused', async () => {
    const w = await startWorker();
    const ask = (body: Json) => postJson(`${w.url}/v1/completions`, { model: 'mock-model', max_tokens: 1, ...body });
    const a = await ask({ prompt: text(50, 'm'), kv_transfer_params: { do_remote_decode: true } });
    const b = await ask({ prompt: text(20, 'n'), kv_transfer_params: { do_remote_decode: true } });
    expect(a.status).toBe(200);
    expect(a.json.kv_transfer_params.remote_block_ids).toHaveLength(Math.floor(a.json.usage.prompt_tokens / 16));
    expect(b.json.kv_transfer_params.remote_engine_id).toBe(a.json.kv_transfer_params.remote_engine_id);
    const plain = await ask({ prompt: 'no transfer' });
    expect(plain.json.kv_transfer_params).toBeUndefined();
    for (const bad of [
      [1, 2],
      { do_remote_decode: true, do_remote_prefill: true },
      { do_remote_prefill: true, remote_engine_id: 'e' },
      { do_remote_prefill: true, remote_block_ids: [1] },
    ]) {
      const r = await ask({ prompt: 'x', kv_transfer_params: bad });
      expect(r.status).toBe(400);
      expect(r.json.error.param).toBe('kv_transfer_params');
    }
    expect(w.stats().kvTransfers).toEqual({ offered: 2, pulled: 0 });
    await waitFor(() => w.stats().finished[0] === 3, 'the three requests');
  });
});
