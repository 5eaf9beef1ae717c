/**
 * Disaggregated serving over TensorRT-LLM's hand-over (`disaggregation.protocol: 'trtllm'`): a
 * context leg (`disaggregated_params.request_type: "context_only"`), then a generation leg with
 * the context answer's `disaggregated_params` as `"generation_only"`, as `trtllm-serve
 * disaggregated` sends them. The mock workers answer and take those parameters as TensorRT-LLM's
 * servers do; their HTTP APIs sit behind TCP proxies that keep what was sent.
 */

import { describe, expect, test } from 'vitest';
import { type BackendName, createGateway, type GatewayOptions, type WorkerRole } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { disaggregatedFleet, streamedChat, text } from './helpers/disaggregated-fleet.js';
import { closeFleetsAfterEach, startWorker } from './helpers/gateway.js';
import { type Json, postJson, sse } from './helpers/http.js';
import { scrape } from './helpers/prometheus.js';

closeFleetsAfterEach();

const trtllmFleet = (backend: BackendName, roles?: WorkerRole[], opts: Partial<GatewayOptions> = {}) =>
  disaggregatedFleet(backend, roles, { disaggregation: { protocol: 'trtllm' }, ...opts });

describe.each(BACKENDS)("disaggregated serving over TensorRT-LLM's hand-over (%s)", (backend) => {
  test('a completion: a context leg, then a generation leg with the context answer’s parameters and token ids', async () => {
    const f = await trtllmFleet(backend);
    const body = { model: 'mock-model', prompt: text(60, 'ctx'), max_tokens: 5, temperature: 0 };
    const r = await postJson(`${f.url}/v1/completions`, body, { 'x-request-id': 'trt-1' });
    expect(r.status).toBe(200);
    expect(r.json.usage.completion_tokens).toBe(5);
    expect(r.json.choices[0].disaggregated_params).toBeUndefined();
    const prefillWorker = Number(r.headers.get('x-kvroute-prefill-worker'));
    const decodeWorker = Number(r.headers.get('x-kvroute-worker'));
    expect([1, 2]).toContain(prefillWorker);
    expect([3, 4]).toContain(decodeWorker);

    const [context, ...moreContexts] = f.received(prefillWorker);
    expect(moreContexts).toEqual([]);
    expect(context.body).toEqual({ ...body, stream: false, disaggregated_params: { request_type: 'context_only' } });
    const [generation, ...moreGenerations] = f.received(decodeWorker);
    expect(moreGenerations).toEqual([]);
    expect(generation.head['x-request-id']).toBe('trt-1');
    const { prompt, disaggregated_params: params, ...rest } = generation.body;
    const { prompt: _text, ...clientRest } = body;
    expect(rest).toEqual(clientRest);
    // The prompt as the context server tokenized it.
    expect(prompt).toHaveLength(r.json.usage.prompt_tokens);
    expect(prompt.every(Number.isInteger)).toBe(true);
    expect(params).toMatchObject({ request_type: 'generation_only', draft_tokens: null });
    expect(Number.isSafeInteger(params.ctx_request_id)).toBe(true);
    expect(params.first_gen_tokens).toHaveLength(1);
    expect(typeof params.encoded_opaque_state).toBe('string');

    expect(f.workers[prefillWorker - 1].stats().kvTransfers).toEqual({ offered: 1, pulled: 0 });
    expect(f.workers[decodeWorker - 1].stats().kvTransfers).toEqual({ offered: 0, pulled: 1 });
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_prefill_legs_total', { worker: String(prefillWorker), result: 'transferred' })).toBe(1);
  });

  test('a streamed chat keeps its messages and stream options on the generation leg', async () => {
    const f = await trtllmFleet(backend, ['prefill', 'decode']);
    const { body } = await streamedChat(f.url, { max_tokens: 4 });
    const [context] = f.received(1);
    expect([context.body.stream, context.body.stream_options, context.body.disaggregated_params]).toEqual([
      false,
      undefined,
      { request_type: 'context_only' },
    ]);
    const [generation] = f.received(2);
    expect(generation.body.messages).toEqual(body.messages);
    expect(generation.body.prompt_token_ids).toBeUndefined();
    expect([generation.body.stream, generation.body.stream_options, generation.body.disaggregated_params.request_type]).toEqual([
      true,
      { include_usage: true },
      'generation_only',
    ]);
  });

  test('a context answer that already finished is the client’s answer, streamed or not, and no generation leg runs', async () => {
    const f = await trtllmFleet(backend, ['prefill', 'decode']);
    const prompt = text(20, 'stop');
    // The first token's text, from a whole request to the decode worker directly: a stop on it ends the request there.
    const first = await postJson(`${f.workers[1].url}/v1/completions`, { model: 'mock-model', prompt, max_tokens: 1 });
    const stop = first.json.choices[0].text;
    const r = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt, max_tokens: 6, stop: [stop] });
    expect(r.status).toBe(200);
    expect(r.json.choices[0]).toMatchObject({ finish_reason: 'stop', text: '' });
    expect(r.json.choices[0].disaggregated_params).toBeUndefined();
    expect(r.json.prompt_token_ids).toBeUndefined();
    expect(r.headers.get('x-kvroute-worker')).toBe('1');
    const streamed = await sse(`${f.url}/v1/completions`, { model: 'mock-model', prompt, max_tokens: 6, stop: [stop], stream: true });
    expect(streamed.status).toBe(200);
    expect(streamed.events.map((e: Json) => (e === '[DONE]' ? e : e.choices[0].finish_reason))).toEqual(['stop', '[DONE]']);
    // A chat's stream has its message as the delta, and the usage the client asked for.
    const messages = [{ role: 'user', content: prompt }];
    const chatFirst = await postJson(`${f.workers[1].url}/v1/chat/completions`, { model: 'mock-model', messages, max_tokens: 1 });
    const chat = await sse(`${f.url}/v1/chat/completions`, {
      model: 'mock-model',
      messages,
      max_tokens: 6,
      stop: [chatFirst.json.choices[0].message.content],
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(chat.status).toBe(200);
    expect(chat.events[0]).toMatchObject({
      object: 'chat.completion.chunk',
      choices: [{ delta: { role: 'assistant' }, finish_reason: 'stop' }],
    });
    expect(chat.events[1]).toMatchObject({ object: 'chat.completion.chunk', choices: [], usage: { completion_tokens: 1 } });
    expect(chat.events[2]).toBe('[DONE]');
    expect(f.received(2)).toEqual([]);
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_prefill_legs_total', { worker: '1', result: 'finished' })).toBe(3);
  });

  test('a client’s own disaggregated_params are refused; conditional prefill applies (its generation servers serve whole requests)', async () => {
    const f = await trtllmFleet(backend, ['prefill', 'decode'], { disaggregation: { protocol: 'trtllm', bypassBelowTokens: 32 } });
    const own = await postJson(`${f.url}/v1/completions`, {
      model: 'mock-model',
      prompt: 'hi',
      max_tokens: 1,
      disaggregated_params: { request_type: 'context_only' },
    });
    expect(own.status).toBe(400);
    expect(own.json.error.message).toMatch(/disaggregated_params is set by the gateway/);
    const prompt = text(100, 'bypass');
    expect((await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt, max_tokens: 2 })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 200));
    // The decode worker now holds the prompt: the next one goes whole to it.
    const again = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt, max_tokens: 2 });
    expect(again.headers.get('x-kvroute-prefill-worker')).toBeNull();
    expect(again.headers.get('x-kvroute-worker')).toBe('2');
    expect(f.received(2).at(-1)?.body.disaggregated_params).toBeUndefined();
    expect(() =>
      createGateway({ blockSize: 16, backend, logLevel: false, disaggregation: { protocol: 'trtllm', bypassBelowTokens: 8 } }),
    ).not.toThrow();
  });
});

describe('the mock worker’s TensorRT-LLM parameters', () => {
  test('a context-only request answers one token with its parameters and token ids; bad parameters are refused', async () => {
    const w = await startWorker();
    const ask = (body: Json) => postJson(`${w.url}/v1/completions`, { model: 'mock-model', prompt: 'hello there', max_tokens: 4, ...body });
    const context = await ask({ disaggregated_params: { request_type: 'context_only' } });
    expect(context.status).toBe(200);
    expect(context.json.usage.completion_tokens).toBe(1);
    expect(context.json.prompt_token_ids).toHaveLength(context.json.usage.prompt_tokens);
    const params = context.json.choices[0].disaggregated_params;
    expect(params).toMatchObject({ request_type: 'context_only', draft_tokens: null });
    const generation = await ask({
      prompt: context.json.prompt_token_ids,
      disaggregated_params: { ...params, request_type: 'generation_only' },
    });
    expect([generation.status, generation.json.usage.completion_tokens]).toEqual([200, 4]);
    expect(w.stats().kvTransfers).toEqual({ offered: 1, pulled: 1 });
    for (const bad of [
      { disaggregated_params: 'context_only' },
      { disaggregated_params: { request_type: 'prefill' } },
      { disaggregated_params: { request_type: 'generation_only', first_gen_tokens: [1] } },
      { disaggregated_params: { request_type: 'context_only' }, kv_transfer_params: { do_remote_decode: true } },
    ]) {
      const refused = await ask(bad);
      expect([refused.status, refused.json.error.param]).toEqual([400, 'disaggregated_params']);
    }
    const whole = await ask({ disaggregated_params: { request_type: 'context_and_generation' } });
    expect([whole.status, whole.json.usage.completion_tokens, whole.json.choices[0].disaggregated_params]).toEqual([200, 4, undefined]);
  });
});
