import { describe, expect, test } from 'vitest';
import {
  type DecodedExtraKey,
  decodeEngineBatch,
  type ExtraKeyText,
  encodeEngineBatch,
  KvIndex,
  type MockWorker,
  type MockWorkerOptions,
  mockDetokenize,
  mockTokenize,
  renderMockChat,
  startMockWorker,
  type WireBlockStored,
} from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { postJson, sse } from './helpers/http.js';
import { batchesByRank, captureNames, readCapture } from './helpers/kvcap.js';
import { mockWorkerSuite, PROMPT, textBlocks } from './helpers/mock-worker.js';
import { scrape } from './helpers/prometheus.js';
import { sleep, waitFor } from './helpers/wait.js';

const { worker, closeAfter, subscribed } = mockWorkerSuite();

describe('mock worker HTTP API', () => {
  test('completions: whole and streamed, usage with cached tokens growing on a repeated prefix', async () => {
    const w = await worker();
    const first = await postJson(`${w.url}/v1/completions`, { model: 'mock-model', prompt: PROMPT, max_tokens: 8 });
    expect(first.status).toBe(200);
    expect(first.json).toMatchObject({
      object: 'text_completion',
      model: 'mock-model',
      choices: [{ index: 0, finish_reason: 'length' }],
      usage: {
        prompt_tokens: PROMPT.length,
        completion_tokens: 8,
        total_tokens: PROMPT.length + 8,
        prompt_tokens_details: { cached_tokens: 0 },
      },
    });
    expect(first.json.choices[0].text).toHaveLength(8);
    const second = await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 8 });
    // Every full 4-token block of the prompt is cached now.
    expect(second.json.usage.prompt_tokens_details.cached_tokens).toBe(Math.floor(PROMPT.length / 4) * 4);
    expect(second.json.choices[0].text).toBe(first.json.choices[0].text);
    const streamed = await sse(`${w.url}/v1/completions`, {
      prompt: PROMPT,
      max_tokens: 5,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(streamed.headers.get('content-type')).toBe('text/event-stream');
    const chunks = streamed.events.slice(0, -1);
    expect(streamed.events.at(-1)).toBe('[DONE]');
    expect(
      chunks
        .filter((c) => c.choices.length === 1)
        .map((c) => c.choices[0].text)
        .join(''),
    ).toBe(first.json.choices[0].text.slice(0, 5));
    // A chunk per token; the last one's says how the sequence ended, as vLLM sends it.
    expect(chunks.filter((c) => c.choices.length === 1).map((c) => c.choices[0].finish_reason)).toEqual([null, null, null, null, 'length']);
    expect(chunks.at(-1)).toMatchObject({
      choices: [],
      usage: { completion_tokens: 5, prompt_tokens_details: { cached_tokens: Math.floor(PROMPT.length / 4) * 4 } },
    });
  });

  test('chat completions render the chat template; streamed deltas start with the role', async () => {
    const w = await worker();
    const messages = [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: [{ type: 'text', text: 'hello' }] },
    ];
    const whole = await postJson(`${w.url}/v1/chat/completions`, { messages, max_tokens: 6 });
    expect(whole.json).toMatchObject({ object: 'chat.completion', choices: [{ message: { role: 'assistant' }, finish_reason: 'length' }] });
    const rendered = renderMockChat([
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'hello' },
    ]);
    expect(rendered).toBe('<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n');
    // As vLLM reads messages: text parts joined by newlines, null content, tool calls with parsed arguments.
    const agent = renderMockChat(
      [
        { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'image_url' }, { type: 'text', text: 'b' }] },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{"x":[1,2]}' } }],
        },
        { role: 'tool', tool_call_id: 'c', content: 'ok' },
      ] as never,
      false,
    );
    expect(agent).toBe(
      '<|im_start|>user\na\nb<|im_end|>\n<|im_start|>assistant\n\n<tool_call>f {"x": [1, 2]}</tool_call><|im_end|>\n<|im_start|>tool\nok<|im_end|>\n',
    );
    expect(whole.json.usage.prompt_tokens).toBe(mockTokenize(rendered).length);
    const tok = await postJson(`${w.url}/tokenize`, { messages });
    expect(tok.json).toEqual({ count: rendered.length, max_model_len: 131072, tokens: mockTokenize(rendered) });
    const stream = await sse(`${w.url}/v1/chat/completions`, { messages, max_tokens: 6, stream: true });
    expect(stream.events[0]).toMatchObject({ object: 'chat.completion.chunk', choices: [{ delta: { role: 'assistant' } }] });
    const text = stream.events
      .slice(0, -1)
      .map((c) => c.choices[0]?.delta?.content ?? '')
      .join('');
    expect(text).toBe(whole.json.choices[0].message.content);
  });

  test('models, tokenize, detokenize, health, metrics, and errors in vLLM shapes', async () => {
    const w = await worker({ model: 'm1' });
    const models = await (await fetch(`${w.url}/v1/models`)).json();
    expect(models).toMatchObject({
      object: 'list',
      data: [
        {
          id: 'm1',
          object: 'model',
          owned_by: 'vllm',
          root: 'm1',
          parent: null,
          permission: [{ object: 'model_permission', allow_sampling: true }],
        },
      ],
    });
    const tok = await postJson(`${w.url}/tokenize`, { prompt: 'héllo' });
    expect(tok.json.tokens).toEqual([...new TextEncoder().encode('héllo')]);
    expect((await postJson(`${w.url}/detokenize`, { tokens: tok.json.tokens })).json).toEqual({ prompt: 'héllo' });
    expect(mockDetokenize(mockTokenize('héllo'))).toBe('héllo');
    expect((await fetch(`${w.url}/health`)).status).toBe(200);
    await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 3 });
    const metrics = await (await fetch(`${w.url}/metrics`)).text();
    expect(metrics).toMatch(/^vllm:num_requests_running\{model_name="m1",engine="0"\} 0$/m);
    expect(metrics).toMatch(/^vllm:request_success_total\{model_name="m1",engine="0"\} 1$/m);
    expect(metrics).toMatch(new RegExp(`^vllm:prefix_cache_queries_total\\{model_name="m1",engine="0"\\} ${PROMPT.length}$`, 'm'));
    // A second time the prompt comes from the GPU prefix cache; without offload there is no connector.
    await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 3 });
    const m = await scrape(`${w.url}/metrics`);
    const cached = Math.floor(PROMPT.length / 4) * 4;
    expect(m.sum('vllm:prefix_cache_hits_total')).toBe(cached);
    expect(m.sum('vllm:prompt_tokens_cached_total')).toBe(cached);
    const bySource = (source: string) => m.sum('vllm:prompt_tokens_by_source_total', { source, model_name: 'm1' });
    expect([bySource('local_compute'), bySource('local_cache_hit'), bySource('external_kv_transfer')]).toEqual([
      2 * PROMPT.length - cached,
      cached,
      0,
    ]);
    expect(m.has('vllm:external_prefix_cache_hits_total')).toBe(false);
    for (const [body, re] of [
      [{ prompt: 5 }, /prompt must be/],
      [{ prompt: [1, 2, 3.5] }, /prompt\[2\] must be a token id/],
      [{ prompt: ['a', [1, -1]] }, /^prompt\[1\]: prompt\[1\] must be a token id/],
      [{ prompt: Array.from({ length: 20 }, () => 'p'), n: 64 }, /at most 1024 sequences \(prompts × n\), got 1280/],
      [{ prompt: 'x', n: 0 }, /^n must be at least 1, got 0\.$/],
      [{ prompt: 'x', n: 65 }, /^n must be at most 64, got 65\.$/],
      [{ prompt: 'x', n: 1.5 }, /^n must be an integer, got 1\.5$/],
      [{ prompt: 'x', best_of: 3 }, /best_of is not supported: use n/],
      [{ prompt: 'x', max_tokens: 0 }, /max_tokens/],
      [{ prompt: 'x', max_tokens: 200_000 }, /maximum context length/],
    ] as const) {
      const r = await postJson(`${w.url}/v1/completions`, body);
      expect(r.status).toBe(400);
      expect(r.json).toMatchObject({ error: { type: 'BadRequestError', code: 400 } });
      expect(r.json.error.message).toMatch(re);
    }
    // A model the worker does not serve is vLLM's 404, checked before the prompt is read.
    for (const body of [
      { prompt: 'x', model: 'other' },
      { prompt: 5, model: 'other' },
      { messages: [{ role: 'user', content: 'hi' }], model: 'other' },
    ]) {
      const r = await postJson(`${w.url}/v1/${'messages' in body ? 'chat/completions' : 'completions'}`, body);
      expect([r.status, r.json]).toEqual([
        404,
        { error: { message: 'The model `other` does not exist.', type: 'NotFoundError', param: null, code: 404 } },
      ]);
    }
    expect((await postJson(`${w.url}/tokenize`, { prompt: 'x', model: 'other' })).status).toBe(404);
    // No model (null or empty) is the served one, as vLLM reads it; a model that is not a string is a bad request.
    for (const model of [null, '']) {
      const r = await postJson(`${w.url}/v1/completions`, { prompt: 'x', max_tokens: 1, model });
      expect([r.status, r.json.model], JSON.stringify(model)).toEqual([200, 'm1']);
    }
    expect((await postJson(`${w.url}/v1/completions`, { prompt: 'x', model: 5 })).status).toBe(400);
    // A batch of one is that prompt, as vLLM takes it.
    const single = await postJson(`${w.url}/v1/completions`, { prompt: [PROMPT], max_tokens: 1 });
    expect(single.status).toBe(200);
    expect(single.json.usage.prompt_tokens).toBe(mockTokenize(PROMPT).length);
  });

  test('n samples n sequences: one choice each (the first is the n = 1 answer), the prompt counted once; batches too', async () => {
    const w = await worker({ seed: 7 });
    const one = await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 6 });
    const three = await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 6, n: 3 });
    expect(three.status).toBe(200);
    const texts = three.json.choices.map((c: { index: number; text: string }) => [c.index, c.text]);
    expect(texts.map(([i]: [number]) => i)).toEqual([0, 1, 2]);
    expect(texts[0][1]).toBe(one.json.choices[0].text);
    expect(new Set(texts.map(([, t]: [number, string]) => t)).size).toBe(3);
    expect(three.json.usage).toMatchObject({ prompt_tokens: PROMPT.length, completion_tokens: 18, total_tokens: PROMPT.length + 18 });
    const chat = await postJson(`${w.url}/v1/chat/completions`, { messages: [{ role: 'user', content: PROMPT }], max_tokens: 4, n: 2 });
    expect(chat.json.choices.map((c: { index: number; message: { role: string } }) => [c.index, c.message.role])).toEqual([
      [0, 'assistant'],
      [1, 'assistant'],
    ]);
    const streamed = await sse(`${w.url}/v1/completions`, {
      prompt: PROMPT,
      max_tokens: 6,
      n: 3,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(streamed.events.filter((e) => e === '[DONE]').length).toBe(1);
    const chunks = streamed.events.filter((e) => e !== '[DONE]') as {
      choices: { index: number; text: string; finish_reason: string | null }[];
    }[];
    const byIndex = ['', '', ''];
    for (const c of chunks) for (const choice of c.choices) byIndex[choice.index] += choice.text;
    expect(byIndex).toEqual(texts.map(([, t]: [number, string]) => t));
    expect(chunks.flatMap((c) => c.choices).filter((c) => c.finish_reason === 'length').length).toBe(3);
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { completion_tokens: 18 } });
    expect(w.stats().running.reduce((a, b) => a + b, 0)).toBe(0);
    // A batch of prompts: prompt i's choices numbered from i × n, as vLLM numbers them.
    const other = 'Another prompt, which shares nothing with the first.';
    const batch = await postJson(`${w.url}/v1/completions`, { prompt: [PROMPT, other], max_tokens: 6, n: 2 });
    const alone = await postJson(`${w.url}/v1/completions`, { prompt: other, max_tokens: 6, n: 2 });
    expect(batch.json.choices.map((c: { index: number; text: string }) => [c.index, c.text])).toEqual([
      [0, texts[0][1]],
      [1, texts[1][1]],
      [2, alone.json.choices[0].text],
      [3, alone.json.choices[1].text],
    ]);
    expect(batch.json.usage).toMatchObject({ prompt_tokens: PROMPT.length + other.length, completion_tokens: 24 });
    const tokenizeBatch = await postJson(`${w.url}/tokenize`, { prompt: ['a', 'b'] });
    expect([tokenizeBatch.status, tokenizeBatch.json.error.message]).toEqual([400, 'prompt must be a string, or give messages']);
  });

  test('generated text is deterministic for a seed and differs across seeds', async () => {
    const texts = [];
    for (const seed of [7, 7, 8]) {
      const w = await worker({ seed });
      texts.push((await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 24 })).json.choices[0].text);
    }
    expect(texts[0]).toBe(texts[1]);
    expect(texts[2]).not.toBe(texts[0]);
  });

  test('a client that disconnects cancels its request in the engine', async () => {
    const w = await worker({ speedup: 1 });
    const ac = new AbortController();
    const r = await fetch(`${w.url}/v1/completions`, {
      method: 'POST',
      body: JSON.stringify({ prompt: PROMPT, max_tokens: 5000, stream: true }),
      headers: { 'content-type': 'application/json' },
      signal: ac.signal,
    });
    const reader = (r.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    ac.abort();
    await waitFor(() => w.stats().aborted === 1 && w.stats().running[0] === 0, 'the cancellation');
    expect(w.stats().finished).toEqual([0]);
  });

  test('options are validated', async () => {
    await expect(startMockWorker({ wire: 'tgi' as never })).rejects.toMatchObject({ code: 'ERR_INVALID_ARG' });
    await expect(startMockWorker({ port: 70000 })).rejects.toMatchObject({ code: 'ERR_INVALID_ARG' });
    await expect(startMockWorker({ replay: 'tcp://127.0.0.1:0' })).rejects.toMatchObject({ message: /needs opts.kvEvents/ });
    await expect(startMockWorker({ kvEvents: 'udp://x:1' })).rejects.toMatchObject({ code: 'ERR_INVALID_ARG' });
    await expect(startMockWorker({ loraModules: 'a1' as never })).rejects.toMatchObject({ message: /opts\.loraModules must be a list/ });
    await expect(startMockWorker({ loraModules: ['a1', ''] })).rejects.toMatchObject({
      message: /opts\.loraModules\[1\] must be a non-empty string/,
    });
    await expect(startMockWorker({ loraModules: ['mock-model'] })).rejects.toMatchObject({
      message: /is the model's name or listed twice/,
    });
    await expect(startMockWorker({ faults: [{ fault: { kind: 'explode' } as never, afterMs: 0 }] })).rejects.toMatchObject({
      code: 'ERR_INVALID_ARG',
    });
    for (const [key, value] of [
      ['speedup', 0],
      ['decodeSpeedup', -1],
      ['decodeSpeedup', Number.POSITIVE_INFINITY],
      ['decodeSpeedup', '2'],
    ] as const)
      await expect(startMockWorker({ [key]: value } as never)).rejects.toMatchObject({
        code: 'ERR_INVALID_ARG',
        message: new RegExp(`opts\\.${key} must be a finite number > 0`),
      });
  });
});

describe.each(BACKENDS)('mock worker KV events into kvroute (%s)', (backend) => {
  const fleetOf = (opts: MockWorkerOptions = {}) => subscribed(backend, opts);

  test('what the engine caches is what kvroute predicts: overlap equals the reported cached tokens', async () => {
    const { w, index, src } = await fleetOf();
    await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 8 });
    await waitFor(() => src.stats().ranks[0].batches > 0 && src.stats().ranks[0].state === 'active', 'events');
    await index.flush();
    const predicted = index.findMatchesForRequest(mockTokenize(`${PROMPT} and more`)).scores[0];
    const second = await postJson(`${w.url}/v1/completions`, { prompt: `${PROMPT} and more`, max_tokens: 8 });
    expect(predicted.blocks * 4).toBe(second.json.usage.prompt_tokens_details.cached_tokens);
    expect(predicted.blocks).toBe(textBlocks(PROMPT));
    expect(src.stats().ranks[0]).toMatchObject({ decodeErrors: 0, gaps: 0, filtered: { block_size_mismatch: 0 } });
  });

  test('dropped events are repaired from the replay socket', async () => {
    const { w, index, src } = await fleetOf();
    await postJson(`${w.url}/v1/completions`, { prompt: 'warm up the stream', max_tokens: 2 });
    await waitFor(() => src.stats().ranks[0].state === 'active', 'active');
    w.fault({ kind: 'drop-events', count: 2 });
    await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 8 });
    await postJson(`${w.url}/v1/completions`, { prompt: `${PROMPT} twice`, max_tokens: 8 });
    await waitFor(
      () => src.stats().ranks[0].gaps === 1 && src.stats().ranks[0].state === 'active' && src.stats().ranks[0].replayed >= 2,
      'the repair',
    );
    await index.flush();
    expect(w.stats().batchesDropped).toBe(2);
    expect(index.findMatchesForRequest(mockTokenize(PROMPT)).scores[0].blocks).toBe(textBlocks(PROMPT));
  });

  test('a restart changes every hash and resets the seq; kvroute keeps only the new incarnation', async () => {
    const { w, index, src } = await fleetOf();
    await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 4 });
    await waitFor(() => src.stats().ranks[0].batches > 0, 'events');
    await index.flush();
    const before = index.dump().flatMap((e) => e.event.data.stored.blocks.map((b) => String(b.block_hash)));
    w.fault({ kind: 'restart' });
    await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 4 });
    await waitFor(() => src.stats().ranks[0].restarts === 1, 'the restart');
    await index.flush();
    const after = index.dump().flatMap((e) => e.event.data.stored.blocks.map((b) => String(b.block_hash)));
    expect(after.length).toBeGreaterThan(0);
    expect(after.filter((h) => before.includes(h))).toEqual([]);
    expect(index.findMatchesForRequest(mockTokenize(PROMPT)).scores[0].blocks).toBe(textBlocks(PROMPT));
  });
});

describe('mock worker sockets and faults', () => {
  test('dp ranks publish on port + rank; X-data-parallel-rank picks the rank', async () => {
    let w: MockWorker | undefined;
    for (let attempt = 0; !w && attempt < 20; attempt++) {
      const port = 20000 + Math.floor(Math.random() * 30000);
      w = await worker({ dpSize: 2, kvEvents: `tcp://127.0.0.1:${port}`, replay: `tcp://127.0.0.1:${port + 2}` }).catch(() => undefined);
    }
    if (!w) throw new Error('no free ports');
    const base = Number(w.kvEventsEndpoints[0].split(':').at(-1));
    expect(w.kvEventsEndpoints).toEqual([`tcp://127.0.0.1:${base}`, `tcp://127.0.0.1:${base + 1}`]);
    const index = new KvIndex({ blockSize: 4 });
    closeAfter(() => index.close());
    const src = index.subscribe({
      workerId: 5,
      endpoint: w.kvEventsEndpoints[0],
      replayEndpoint: w.replayEndpoints[0],
      dataParallelSize: 2,
    });
    await sleep(300);
    const r = await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 3 }, { 'X-data-parallel-rank': '1' });
    expect(r.headers.get('x-data-parallel-rank')).toBe('1');
    await waitFor(() => src.stats().ranks[1].batches > 0, 'rank 1 events');
    await index.flush();
    expect(index.findMatchesForRequest(mockTokenize(PROMPT)).scores.map((s) => s.dpRank)).toEqual([1]);
    expect(w.stats().finished).toEqual([0, 1]);
  });

  test.each(['vllm-0.33', 'vllm-0.11', 'sglang'] as const)('the replay socket serves a requested range (%s framing)', async (wire) => {
    const w = await worker({ wire, kvEvents: 'tcp://127.0.0.1:0', replay: 'tcp://127.0.0.1:0', topic: 'kv' });
    for (const p of ['one prompt here', 'another prompt', 'and a third one'])
      await postJson(`${w.url}/v1/completions`, { prompt: p, max_tokens: 2 });
    await waitFor(() => w.stats().batchesPublished >= 3, 'batches');
    const { Dealer } = await import('zeromq');
    const dealer = new Dealer({ linger: 0 });
    closeAfter(() => dealer.close());
    dealer.connect(w.replayEndpoints[0]);
    const start = new Uint8Array(8);
    start[7] = 1;
    await dealer.send(['', start]);
    const seqs: bigint[] = [];
    for (;;) {
      const frames = await dealer.receive();
      expect(frames[0].length).toBe(0);
      expect(frames.length).toBe(wire === 'vllm-0.33' ? 4 : 3);
      const seq = frames.at(-2) as Buffer;
      if (seq.readBigUInt64BE() === 0xffffffffffffffffn) break;
      if (wire === 'vllm-0.33') expect(frames[1].toString()).toBe('kv');
      seqs.push(seq.readBigUInt64BE());
      expect(decodeEngineBatch(frames.at(-1) as Buffer).layout).toBe(wire === 'vllm-0.33' ? 'map' : 'array');
    }
    expect(seqs[0]).toBe(1n);
    expect(seqs).toEqual(seqs.map((_, i) => BigInt(i + 1)));
    expect(w.stats().replayRequests).toBe(1);
  });

  test('hang holds requests and health until recover (then 503); slow slows passes; crash closes the port', async () => {
    const w = await worker({ speedup: 5 });
    const fast = Date.now();
    await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 20 });
    const baseline = Date.now() - fast;
    await postJson(`${w.url}/admin/fault`, { kind: 'slow', factor: 30 });
    const slow = Date.now();
    await postJson(`${w.url}/v1/completions`, { prompt: `${PROMPT}!`, max_tokens: 20 });
    expect(Date.now() - slow).toBeGreaterThan(5 * Math.max(baseline, 10));
    expect((await postJson(`${w.url}/admin/fault`, { kind: 'hang' })).json).toEqual({ ok: true, fault: { kind: 'hang' } });
    await sleep(20);
    let answered = false;
    const held = fetch(`${w.url}/health`).then((r) => {
      answered = true;
      return r.status;
    });
    await sleep(300);
    expect(answered).toBe(false);
    await postJson(`${w.url}/admin/fault`, { kind: 'recover' });
    expect(await held).toBe(503);
    expect((await fetch(`${w.url}/health`)).status).toBe(200);
    expect((await postJson(`${w.url}/admin/fault`, { kind: 'nope' })).status).toBe(400);
    await postJson(`${w.url}/admin/fault`, { kind: 'crash' });
    await waitFor(() => w.stats().closed, 'the crash');
    await expect(fetch(`${w.url}/health`)).rejects.toThrow();
    expect(w.stats().faults).toEqual(['slow', 'hang', 'recover', 'crash']);
  });

  test('a restart fails the requests in flight with 503', async () => {
    const w = await worker({ speedup: 1 });
    const pending = postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 2000 });
    await waitFor(() => w.stats().running[0] === 1, 'running');
    w.fault({ kind: 'restart' });
    const r = await pending;
    expect(r.status).toBe(503);
    expect(r.json.error.message).toMatch(/engine stopped: restart/);
  });
});

const CAPTURES = captureNames();

describe.skipIf(CAPTURES.length === 0)("the mock wire encoder against the engines' own publishers", () => {
  const formats: Record<string, 'vllm-0.33' | 'vllm-0.11' | 'sglang'> = {
    'vllm-0.33.0-map-int-dp2': 'vllm-0.33',
    'vllm-0.11.0-array-int-dp2': 'vllm-0.11',
    'sglang-0.5.19-array-int-dp2': 'sglang',
  };
  test.each(Object.keys(formats).filter((n) => CAPTURES.includes(n)))('%s: same layout, field order and values', async (name) => {
    const { Unpackr } = await import('msgpackr');
    const raw = new Unpackr({ mapsAsObjects: false, int64AsType: 'bigint', useRecords: false });
    const capture = readCapture(name);
    let compared = 0;
    for (const [rank, batches] of batchesByRank(capture)) {
      for (const b of batches) {
        const theirs = decodeEngineBatch(b.payload);
        // Only what the mock publishes: GPU group-0 stores (with a LoRA adapter, text extra keys
        // and SGLang's salt), removes, clears.
        const textKeys = (keys: (DecodedExtraKey[] | null)[] | null) =>
          (keys ?? []).every((k) => k === null || k.every((x) => x.kind === 'text'));
        const plain = theirs.events.every(
          (e) =>
            e.type === 'AllBlocksCleared' ||
            (e.medium === 'GPU' &&
              (e.groupIdx ?? 0) === 0 &&
              (e.type === 'BlockRemoved' ||
                (e.sessionId === null && (e.cacheSalt === null || name.startsWith('sglang')) && textKeys(e.extraKeys) && e.blockSize > 0))),
        );
        if (!plain) continue;
        const events = theirs.events.map((e) =>
          e.type === 'BlockStored'
            ? {
                type: e.type,
                blockHashes: e.blockHashes,
                parent: e.parentBlockHash,
                tokens: e.tokenIds,
                blockSize: e.blockSize,
                ...(e.loraName === null ? {} : { loraName: e.loraName }),
                ...(e.loraId === null ? {} : { loraId: Number(e.loraId) }),
                ...(e.cacheSalt === null ? {} : { cacheSalt: e.cacheSalt }),
                ...((e.extraKeys ?? []).some((k) => k !== null)
                  ? { extraKeys: (e.extraKeys ?? []).map((k) => (k === null ? null : k.map((x) => (x as ExtraKeyText).value))) }
                  : {}),
              }
            : e.type === 'BlockRemoved'
              ? { type: e.type, blockHashes: e.blockHashes }
              : { type: e.type },
        );
        const ours = encodeEngineBatch(theirs.ts, events as never, rank, formats[name]);
        expect(decodeEngineBatch(ours)).toEqual(theirs);
        const [a, c] = [raw.unpack(ours), raw.unpack(b.payload)];
        const shape = (v: unknown[]) => (v[1] as unknown[]).map((e) => (e instanceof Map ? [...e.keys()] : (e as unknown[]).length));
        expect(shape(a)).toEqual(shape(c));
        compared++;
      }
    }
    expect(compared).toBeGreaterThan(10);
  });
});

describe('encodeEngineBatch', () => {
  test("a store's adapter, extra keys and salt are checked, then decode back as the engines' own", () => {
    const store: WireBlockStored = { type: 'BlockStored', blockHashes: [1n, 2n], parent: null, tokens: [1, 2, 3, 4], blockSize: 2 };
    const bad: [object, RegExp][] = [
      [{ loraName: 5 }, /events\[0\]\.loraName must be a string/],
      [{ loraId: 0 }, /events\[0\]\.loraId must be a positive integer/],
      [{ extraKeys: [['a']] }, /events\[0\]\.extraKeys must hold, per block, a list of strings or null/],
      [{ extraKeys: [[1], null] }, /extraKeys must hold/],
      [{ cacheSalt: null }, /events\[0\]\.cacheSalt must be a string/],
    ];
    for (const [extra, message] of bad)
      expect(() => encodeEngineBatch(1, [{ ...store, ...extra } as never], 0, 'vllm-0.33')).toThrow(message);
    const full: WireBlockStored = { ...store, loraName: 'a1', loraId: 1, extraKeys: [['a1', 'salt'], ['a1']], cacheSalt: 'salt' };
    const [v] = decodeEngineBatch(encodeEngineBatch(1, [full], 0, 'vllm-0.33')).events;
    expect(v).toMatchObject({
      loraName: 'a1',
      loraId: 1n,
      extraKeys: [
        [
          { kind: 'text', value: 'a1' },
          { kind: 'text', value: 'salt' },
        ],
        [{ kind: 'text', value: 'a1' }],
      ],
    });
    const [sg] = decodeEngineBatch(encodeEngineBatch(1, [full], 0, 'sglang')).events;
    expect(sg).toMatchObject({ loraId: 1n, cacheSalt: 'salt', loraName: null });
    const [old] = decodeEngineBatch(encodeEngineBatch(1, [full], 0, 'vllm-0.11')).events;
    expect(old).toMatchObject({ loraId: 1n, cacheSalt: null, loraName: null });
  });
});

describe('kvroute mock-worker as a command', () => {
  test('serves until SIGTERM (exit 0); a scheduled crash fault exits 1', async () => {
    const { spawn } = await import('node:child_process');
    const { join } = await import('node:path');
    const { ROOT, requireDist } = await import('./helpers/dist.js');
    requireDist();
    const run = (args: string[]) => {
      const child = spawn(process.execPath, [join(ROOT, 'dist', 'cli.js'), 'mock-worker', '--port', '0', ...args], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      const url = new Promise<string>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (d) => {
          out += d;
          const m = /(http:\/\/127\.0\.0\.1:\d+)/.exec(out);
          if (m) resolve(m[1]);
        });
        child.on('exit', () => reject(new Error(`exited before listening: ${out}`)));
      });
      return { child, exited, url };
    };
    const a = run(['--speedup', '50', '--kv-events', 'tcp://127.0.0.1:0', '--wire', 'sglang', '--model', 'cli-model', '--responses-store']);
    const url = await a.url;
    expect((await fetch(`${url}/health`)).status).toBe(200);
    const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] };
    expect(models.data[0].id).toBe('cli-model');
    // --responses-store keeps a response for retrieval.
    const created = await postJson(`${url}/v1/responses`, { input: 'hello', max_output_tokens: 2 });
    expect((await fetch(`${url}/v1/responses/${created.json.id}`)).status).toBe(200);
    a.child.kill('SIGTERM');
    expect(await a.exited).toBe(0);
    const b = run(['--faults', 'crash@200']);
    await b.url;
    expect(await b.exited).toBe(1);
    const c = spawn(process.execPath, [join(ROOT, 'dist', 'cli.js'), 'mock-worker', '--wire', 'tgi'], { stdio: 'ignore' });
    expect(await new Promise((resolve) => c.on('exit', resolve))).toBe(2);
  });
});
