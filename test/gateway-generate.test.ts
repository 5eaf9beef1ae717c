/**
 * SGLang's native `POST /generate` through the gateway: routed by its prompt's prefix as a
 * completion is (`input_ids` as they are, `text` tokenized), the engine's `meta_info` read for
 * the first token and the cached tokens, the body passed on as it came, and the answer (a stream
 * too) passed back unchanged. The mock workers serve `/generate` as an SGLang server does.
 */

import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { describe, expect, test } from 'vitest';
import { MAX_PROMPTS_PER_BATCH } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { closeFleetsAfterEach, gatewayBehindWire, startFleet, startWorker, workerEntry } from './helpers/gateway.js';
import { postJson, sse } from './helpers/http.js';
import { scrape } from './helpers/prometheus.js';
import { headsOn } from './helpers/tcp-proxy.js';
import { waitFor } from './helpers/wait.js';

closeFleetsAfterEach();

/** A prompt of `n` token ids from `from`. */
const ids = (n: number, from = 1) => Array.from({ length: n }, (_, i) => from + i);

describe.each(BACKENDS)("gateway: SGLang's /generate (%s)", (backend) => {
  test('input_ids are routed by their prefix: a follow-up goes to the worker holding it, whose meta_info reports what was predicted', async () => {
    const f = await startFleet(backend, 3);
    const prompt = ids(80);
    const first = await postJson(`${f.url}/generate`, { input_ids: prompt, sampling_params: { max_new_tokens: 4 } });
    expect(first.status).toBe(200);
    expect(first.json.meta_info).toMatchObject({ prompt_tokens: 80, completion_tokens: 4, cached_tokens: 0 });
    expect(first.json.output_ids).toHaveLength(4);
    const holder = first.headers.get('x-kvroute-worker');
    await waitFor(() => f.gateway.router.stats().index.blocks >= 5, 'the stored blocks to be indexed');

    const again = await postJson(`${f.url}/generate`, {
      input_ids: [...prompt, 500, 501],
      sampling_params: { max_new_tokens: 2 },
      rid: 'turn-2',
    });
    expect(again.status).toBe(200);
    expect(again.headers.get('x-kvroute-worker')).toBe(holder);
    expect(again.headers.get('x-kvroute-cached-tokens')).toBe('80');
    expect(again.json.meta_info).toMatchObject({ id: 'turn-2', cached_tokens: 80, completion_tokens: 2 });
    // /admin/explain takes a /generate body as the proxy reads it.
    const explain = await postJson(`${f.adminUrl}/admin/explain`, { input_ids: prompt });
    expect(explain.json.tokens).toEqual(prompt);
    const best = explain.json.candidates.find((c: { workerId: number }) => String(c.workerId) === holder);
    expect(best.overlapBlocks).toBe(5);
    // A batch is weighed whole, as it is routed: the holder would prefill the second prompt's 20 tokens.
    const batch = await postJson(`${f.adminUrl}/admin/explain`, { input_ids: [prompt, ids(20, 9000)] });
    expect(batch.json).toMatchObject({ tokens: prompt, batchTokens: [ids(20, 9000)] });
    const weighed = batch.json.candidates.find((c: { workerId: number }) => String(c.workerId) === holder);
    expect(weighed).toMatchObject({ overlapBlocks: 5, prefillTokens: 20, decodeBlocks: 5 + 1 });
    const m = await scrape(`${f.adminUrl}/metrics`);
    expect(m.sum('kvroute_gateway_cache_predictions_total', { worker: String(holder), outcome: 'exact' })).toBe(2);
    expect(m.sum('kvroute_gateway_requests_total', { status: '200' })).toBe(2);
    expect(m.sum('kvroute_router_in_flight_requests')).toBe(0);
  });

  test("a streamed /generate is passed on event by event to [DONE]; its first event is the first token, its last the engine's cached tokens", async () => {
    const f = await startFleet(backend, 2, {}, { streamInterval: 1 });
    const prompt = ids(48, 1000);
    await postJson(`${f.url}/generate`, { input_ids: prompt, sampling_params: { max_new_tokens: 1 } });
    await waitFor(() => f.gateway.router.stats().index.blocks >= 3, 'the stored blocks to be indexed');
    const r = await sse(`${f.url}/generate`, { input_ids: prompt, sampling_params: { max_new_tokens: 5 }, stream: true });
    expect(r.status).toBe(200);
    expect(r.events.at(-1)).toBe('[DONE]');
    const chunks = r.events.slice(0, -1) as { text: string; output_ids: number[]; meta_info: Record<string, unknown> }[];
    expect(chunks.map((c) => c.meta_info.completion_tokens)).toEqual([1, 2, 3, 4, 5]);
    // SGLang's events hold the text so far; the last is the whole answer.
    expect(chunks.at(-1)?.output_ids).toHaveLength(5);
    expect(chunks.at(-1)?.meta_info).toMatchObject({ finish_reason: { type: 'length', length: 5 }, cached_tokens: 32 });
    expect(r.headers.get('x-kvroute-cached-tokens')).toBe('32');
    const m = await scrape(`${f.adminUrl}/metrics`);
    expect(m.sum('kvroute_gateway_time_to_first_token_seconds')).toBe(2);
    // Four gaps between the five token events.
    expect(m.sum('kvroute_gateway_inter_token_latency_seconds')).toBe(4);
    expect(m.sum('kvroute_gateway_cache_predictions_total', { outcome: 'exact' })).toBe(2);
    expect(m.sum('kvroute_router_in_flight_requests')).toBe(0);
  });

  test('text is tokenized as a completion prompt is (the engine tokenizer), and the body reaches the worker as it came', async () => {
    const g = await gatewayBehindWire(backend);
    try {
      const body = {
        text: 'the quick brown fox jumps over the lazy dog',
        sampling_params: { max_new_tokens: 3, temperature: 0 },
        rid: 'r-1',
      };
      const r = await postJson(`${g.url}/generate`, body);
      expect(r.status).toBe(200);
      expect(r.json.meta_info.id).toBe('r-1');
      const sent = headsOn(g.wire.sent).filter((h) => h.line.startsWith('POST '));
      expect(sent.map((h) => h.line)).toEqual(['POST /tokenize', 'POST /generate']);
      expect(JSON.parse(sent[1].body)).toEqual(body);
      // The gateway's count of the prompt is the engine's.
      expect(Number(r.headers.get('x-kvroute-cached-tokens'))).toBe(0);
      const tokenized = JSON.parse(sent[0].body);
      expect(tokenized).toMatchObject({ prompt: body.text });
      // A batch's prompts are each tokenized (once per distinct prompt: the token cache keeps them), the body sent whole.
      const batch = { text: ['one prompt here', 'another prompt', body.text], sampling_params: { max_new_tokens: 1 } };
      const b = await postJson(`${g.url}/generate`, batch);
      expect(b.status).toBe(200);
      expect(b.json).toHaveLength(3);
      const later = headsOn(g.wire.sent)
        .filter((h) => h.line.startsWith('POST '))
        .slice(2);
      expect(later.map((h) => h.line)).toEqual(['POST /tokenize', 'POST /tokenize', 'POST /generate']);
      expect(
        later
          .slice(0, 2)
          .map((h) => JSON.parse(h.body).prompt)
          .sort(),
      ).toEqual(['another prompt', 'one prompt here']);
      expect(JSON.parse(later[2].body)).toEqual(batch);
    } finally {
      await g.close();
    }
  });

  test('lora_path routes to the workers serving that adapter, under its name', async () => {
    const base = await startWorker();
    const withAdapter = await startWorker({ loraModules: ['sql-lora'] });
    const f = await startFleet(backend, 0, { workers: [workerEntry(base, 1), workerEntry(withAdapter, 2)] });
    await waitFor(async () => {
      const models = (await (await fetch(`${f.url}/v1/models`)).json()) as { data: { id: string }[] };
      return models.data.some((m) => m.id === 'sql-lora');
    }, 'the adapter listed');
    for (let i = 0; i < 6; i++) {
      const r = await postJson(`${f.url}/generate`, {
        input_ids: ids(40, 100 * i),
        lora_path: 'sql-lora',
        sampling_params: { max_new_tokens: 1 },
      });
      expect(r.status).toBe(200);
      expect(r.headers.get('x-kvroute-worker')).toBe('2');
    }
    const finished = (w: typeof base) => w.stats().finished.reduce((a, b) => a + b, 0);
    expect([finished(base), finished(withAdapter)]).toEqual([0, 6]);
  });

  test('a batch naming an adapter per prompt goes to a worker serving them all, each prompt matched under its own adapter', async () => {
    const both = await startWorker({ loraModules: ['lora-a', 'lora-b'] });
    const onlyA = await startWorker({ loraModules: ['lora-a'] });
    const base = await startWorker();
    const f = await startFleet(backend, 0, { workers: [workerEntry(both, 1), workerEntry(onlyA, 2), workerEntry(base, 3)] });
    await waitFor(async () => {
      const models = (await (await fetch(`${f.url}/v1/models`)).json()) as { data: { id: string }[] };
      return ['lora-a', 'lora-b'].every((m) => models.data.some((d) => d.id === m));
    }, 'the adapters listed');
    const [p, q] = [ids(32, 100), ids(64, 4000)];
    // q's blocks under lora-b, on the one worker serving it.
    const warm = await postJson(`${f.url}/generate`, { input_ids: q, lora_path: 'lora-b', sampling_params: { max_new_tokens: 1 } });
    expect(warm.headers.get('x-kvroute-worker')).toBe('1');
    await waitFor(() => f.gateway.router.stats().index.blocks >= 4, "q's blocks to be indexed");
    const explain = async (lora: unknown) =>
      (await postJson(`${f.adminUrl}/admin/explain`, { input_ids: [p, q], lora_path: lora })).json as {
        candidates: { workerId: number; prefillTokens: number }[];
      };
    // Under lora-a and lora-b only worker 1 may take it, and q is found there under lora-b: p's 32 tokens to compute.
    expect((await explain(['lora-a', 'lora-b'])).candidates.map((c) => [Number(c.workerId), c.prefillTokens])).toEqual([[1, 32]]);
    // Both under lora-a: workers 1 and 2, q found nowhere.
    expect((await explain(['lora-a', 'lora-a'])).candidates.map((c) => [Number(c.workerId), c.prefillTokens])).toEqual([
      [1, 32 + 64],
      [2, 32 + 64],
    ]);
    const r = await postJson(`${f.url}/generate`, {
      input_ids: [p, q],
      lora_path: ['lora-a', 'lora-b'],
      sampling_params: { max_new_tokens: 1 },
    });
    expect([r.status, r.headers.get('x-kvroute-worker')]).toEqual([200, '1']);
    expect(r.json.map((a: { meta_info: { cached_tokens: number } }) => a.meta_info.cached_tokens)).toEqual([0, 48]);
    const short = await postJson(`${f.url}/generate`, { input_ids: [p, q, p], lora_path: ['lora-a', 'lora-b'] });
    expect(short.status).toBe(400);
    expect(short.json.error.message).toMatch(/lora_path names 2 adapters for 3 prompts: give one \(or null\) per prompt/);
  });

  test("a batch goes whole to one worker, chosen by all its prompts (SGLang's router looks at the first alone)", async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
    const f = await startFleet(backend, 3, { tracing: { tracerProvider: provider } });
    const [p, q] = [ids(48, 100), ids(192, 3000)];
    const warm = async (prompt: number[]) =>
      (await postJson(`${f.url}/generate`, { input_ids: prompt, sampling_params: { max_new_tokens: 1 } })).headers.get('x-kvroute-worker');
    const holdsP = await warm(p);
    await waitFor(() => f.gateway.router.stats().index.blocks >= 3, "p's blocks to be indexed");
    // Equal costs elsewhere; the smaller cache wins the tie.
    const holdsQ = await warm(q);
    expect(holdsQ).not.toBe(holdsP);
    await waitFor(() => f.gateway.router.stats().index.blocks >= 15, "q's blocks to be indexed");
    // Alone, p's continuation goes to p's holder; in a batch with q's and r's, to theirs.
    const alone = await postJson(`${f.adminUrl}/admin/explain`, { input_ids: [...p, 1] });
    const best = (c: { workerId: number; cost: number }[]) => String(c.reduce((a, b) => (b.cost < a.cost ? b : a)).workerId);
    expect(best(alone.json.candidates)).toBe(holdsP);
    // p's holder: prefill 1 + 193 tokens, decode 3 + 12 blocks; q's: 49 + 1 tokens, the same blocks.
    const body = {
      input_ids: [
        [...p, 1],
        [...q, 2],
      ],
      sampling_params: { max_new_tokens: 2 },
    };
    const sent = await postJson(`${f.url}/generate`, body);
    expect(sent.status).toBe(200);
    expect(sent.headers.get('x-kvroute-worker')).toBe(holdsQ);
    expect(sent.json.map((a: { meta_info: { cached_tokens: number } }) => a.meta_info.cached_tokens)).toEqual([0, 192]);
    // The request's span counts every prompt's tokens.
    const isBatch = (x: ReadableSpan) => x.kind === SpanKind.SERVER && x.attributes['kvroute.prompts'] === 2;
    await waitFor(() => exporter.getFinishedSpans().some(isBatch), "the batch's span");
    expect(exporter.getFinishedSpans().find(isBatch)?.attributes['gen_ai.usage.input_tokens']).toBe(49 + 193);
    const m = await scrape(`${f.adminUrl}/metrics`);
    expect(m.sum('kvroute_router_in_flight_requests')).toBe(0);
    expect(f.gateway.router.stats().load.every((l) => l.requests === 0 && l.activePrefillTokens === 0)).toBe(true);
  });

  test("a batch's answer is the worker's list, a stream its indexed events", async () => {
    const f = await startFleet(backend, 3);
    const shared = ids(64, 2000);
    const warm = await postJson(`${f.url}/generate`, { input_ids: shared, sampling_params: { max_new_tokens: 1 } });
    const holder = warm.headers.get('x-kvroute-worker');
    await waitFor(() => f.gateway.router.stats().index.blocks >= 3, 'the stored blocks to be indexed');
    const body = { input_ids: [[...shared, 7], ids(30, 5000), [...shared, 8]], sampling_params: { max_new_tokens: 2 } };
    const r = await postJson(`${f.url}/generate`, body);
    expect(r.status).toBe(200);
    expect(r.headers.get('x-kvroute-worker')).toBe(holder);
    expect(r.json.map((a: { meta_info: { prompt_tokens: number } }) => a.meta_info.prompt_tokens)).toEqual([65, 30, 65]);
    // The first prompt's cached tokens are the ones predicted.
    expect(r.json[0].meta_info.cached_tokens).toBe(64);
    expect(r.headers.get('x-kvroute-cached-tokens')).toBe('64');
    const streamed = await sse(`${f.url}/generate`, { ...body, stream: true });
    expect(streamed.headers.get('x-kvroute-worker')).toBe(holder);
    expect(streamed.events.at(-1)).toBe('[DONE]');
    const last = (streamed.events.slice(0, -1) as { index: number; meta_info: { finish_reason: unknown } }[]).filter(
      (e) => e.meta_info.finish_reason !== null,
    );
    expect(last.map((e) => e.index).sort()).toEqual([0, 1, 2]);
    const m = await scrape(`${f.adminUrl}/metrics`);
    expect(m.sum('kvroute_gateway_cache_predictions_total', { worker: String(holder), outcome: 'exact' })).toBe(3);
    expect(m.sum('kvroute_router_in_flight_requests')).toBe(0);
  });

  test("queued /generate requests are served in SGLang's priority order (higher first), then in arrival order", async () => {
    const f = await startFleet(backend, 0, { router: { routerQueueThreshold: 0.01 }, queue: { timeoutMs: 30_000 } });
    const w = await startWorker({ speedup: 0.2 });
    f.gateway.addWorker({ ...workerEntry(w, 1), maxNumBatchedTokens: 256 });
    const order: string[] = [];
    const send = (name: string, priority?: number) =>
      postJson(`${f.url}/generate`, {
        input_ids: ids(600),
        sampling_params: { max_new_tokens: 1 },
        ...(priority === undefined ? {} : { priority }),
      }).then((r) => order.push(`${name}:${r.status}`));
    const busy = send('busy');
    await waitFor(() => f.gateway.router.stats().inFlight === 1, 'the first request to be in flight');
    const later = [send('lazy', -5)];
    await waitFor(() => f.gateway.router.stats().queued === 1, 'the lazy one to queue');
    later.push(send('plain'));
    await waitFor(() => f.gateway.router.stats().queued === 2, 'the plain one to queue');
    later.push(send('urgent', 5));
    await waitFor(() => f.gateway.router.stats().queued === 3, 'the urgent one to queue');
    await Promise.all([busy, ...later]);
    expect(order).toEqual(['busy:200', 'urgent:200', 'plain:200', 'lazy:200']);
  });

  test('input_embeds and malformed prompts are refused with 400, naming the field, and reach no worker', async () => {
    const g = await gatewayBehindWire(backend);
    try {
      const bad: [unknown, RegExp][] = [
        [{ text: ['a', 3] }, /text\[1\] must be a string/],
        [{ text: [] }, /text must hold a prompt/],
        [{ input_ids: [[1, 2], []] }, /input_ids\[1\] must be a non-empty list of token ids/],
        [
          {
            input_ids: [
              [1, 2],
              [3, -1],
            ],
          },
          /input_ids\[1\]\[1\] must be a token id/,
        ],
        [{ input_ids: [1, 2], sampling_params: [3] }, /sampling_params must be an object, or a list of them for a batch/],
        [{ input_ids: [1, 2], lora_path: [4] }, /lora_path\[0\] must be a string or null/],
        [{ input_ids: [1, 2], lora_path: 4 }, /lora_path must be a string, or a list of them for a batch/],
        [{ text: 'a', input_ids: [1] }, /exactly one of text and input_ids/],
        [{ sampling_params: { max_new_tokens: 1 } }, /exactly one of text and input_ids/],
        [{ input_embeds: [[0.1, 0.2]] }, /input_embeds carry no tokens/],
        [
          { input_ids: Array(MAX_PROMPTS_PER_BATCH + 2).fill([1]) },
          /input_ids holds 4098 prompts; the gateway routes a batch of at most 4097/,
        ],
        [{ input_ids: [1, -2] }, /input_ids\[1\] must be a token id/],
        [{ input_ids: [] }, /input_ids must be a non-empty list/],
        [{ text: '' }, /text must be a non-empty string/],
        [{ text: 5 }, /text must be a string or a list of strings/],
        [{ input_ids: 'hello' }, /input_ids must be a list of token ids/],
        [{ input_ids: [1], stream: 'yes' }, /stream must be a boolean/],
        [{ input_ids: [1], sampling_params: 3 }, /sampling_params must be an object/],
        [[1, 2], /the body must be a JSON object/],
      ];
      for (const [body, message] of bad) {
        const r = await postJson(`${g.url}/generate`, body);
        expect(r.status, JSON.stringify(body)).toBe(400);
        expect(r.json.error.message, JSON.stringify(body)).toMatch(message);
      }
      expect(headsOn(g.wire.sent).filter((h) => h.line.startsWith('POST '))).toEqual([]);
    } finally {
      await g.close();
    }
  });
});
