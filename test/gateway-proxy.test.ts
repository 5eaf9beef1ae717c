import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, test } from 'vitest';
import { blockHashes, mockTokenize } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { stored } from './helpers/events.js';
import { closeFleetsAfterEach, startFleet, startWorker, workerEntry } from './helpers/gateway.js';
import { postJson, sse } from './helpers/http.js';
import { scrape } from './helpers/prometheus.js';
import { sleep, waitFor } from './helpers/wait.js';

closeFleetsAfterEach();

const SYSTEM = 'You are a careful assistant. Answer in one short paragraph, citing the source. '.repeat(4);

describe.each(BACKENDS)('gateway proxy (%s)', (backend) => {
  test('a repeated prefix goes to the worker holding it, and the engine reports the cached tokens kvroute predicted', async () => {
    const f = await startFleet(backend, 3);
    const first = await postJson(`${f.url}/v1/completions`, { prompt: `${SYSTEM}Question one?`, max_tokens: 4 });
    expect(first.status).toBe(200);
    const worker = first.headers.get('x-kvroute-worker');
    expect(worker).toMatch(/^[123]$/);
    expect(first.headers.get('x-kvroute-cached-tokens')).toBe('0');
    expect(first.json.usage.prompt_tokens_details.cached_tokens).toBe(0);
    // The worker's KV events reach the index.
    await waitFor(() => f.gateway.router.stats().index.blocks >= Math.floor(SYSTEM.length / 16), 'the stored blocks to be indexed');
    let cachedSum = 0;
    for (const q of ['Question two?', 'Question three, a longer one?']) {
      const r = await postJson(`${f.url}/v1/completions`, { prompt: `${SYSTEM}${q}`, max_tokens: 4 });
      expect(r.status).toBe(200);
      expect(r.headers.get('x-kvroute-worker')).toBe(worker);
      const predicted = Number(r.headers.get('x-kvroute-cached-tokens'));
      expect(predicted).toBeGreaterThanOrEqual(Math.floor(SYSTEM.length / 16) * 16);
      expect(r.json.usage.prompt_tokens_details.cached_tokens).toBe(predicted);
      cachedSum += predicted;
    }
    const metrics = await (await fetch(`${f.url}/metrics`)).text();
    expect(metrics).toMatch(new RegExp(`kvroute_gateway_cache_predictions_total\\{worker="${worker}",outcome="exact"\\} 3`));
    expect(metrics).toMatch(/kvroute_gateway_requests_total\{worker="\d",status="200",model="none"\} 3/);
    // The same tally per worker in the admin API: how well the index knows each worker's cache.
    const listed = (await (await fetch(`${f.url}/admin/workers`)).json()) as { id: string; cachePredictions: Record<string, number> }[];
    const tally = listed.find((w) => String(w.id) === worker)?.cachePredictions;
    expect(tally).toMatchObject({ exact: 3, over: 0, under: 0, predictedTokens: cachedSum });
    expect(tally?.reportedTokens).toBe(cachedSum);
  });

  test("an index that drifted from a worker's cache shows in that worker's tally: the engine reports less than predicted", async () => {
    const f = await startFleet(backend, 2);
    const prompt = `${SYSTEM}Which source?`;
    const blocks = Math.floor(mockTokenize(prompt).length / 16);
    // The index is told worker 2 holds the prompt's blocks; its engine never stored them (as
    // after events lost unseen).
    f.gateway.router.applyEvent(stored(2, [...blockHashes(mockTokenize(prompt), 16, { backend })]));
    await f.gateway.router.flush();
    const r = await postJson(`${f.url}/v1/completions`, { prompt, max_tokens: 2 });
    expect(r.headers.get('x-kvroute-worker')).toBe('2');
    expect(Number(r.headers.get('x-kvroute-cached-tokens'))).toBe(blocks * 16);
    expect(r.json.usage.prompt_tokens_details.cached_tokens).toBe(0);
    const listed = (await (await fetch(`${f.url}/admin/workers`)).json()) as { id: string; cachePredictions: unknown }[];
    expect(listed.map((w) => [String(w.id), w.cachePredictions])).toEqual([
      ['1', { exact: 0, over: 0, under: 0, predictedTokens: 0, reportedTokens: 0 }],
      ['2', { exact: 0, over: 1, under: 0, predictedTokens: blocks * 16, reportedTokens: 0 }],
    ]);
    const page = await scrape(`${f.url}/metrics`);
    expect(page.sum('kvroute_gateway_cache_predictions_total', { worker: '2', outcome: 'over' })).toBe(1);
    expect(page.sum('kvroute_gateway_predicted_cached_tokens_total', { worker: '2' })).toBe(blocks * 16);
    expect(page.sum('kvroute_gateway_reported_cached_tokens_total', { worker: '2' })).toBe(0);
  });

  test('a prompt sent again whole, ending on a block boundary: the engine recomputes its last block, as predicted', async () => {
    const f = await startFleet(backend, 2);
    const prompt = SYSTEM.slice(0, 10 * 16);
    expect(mockTokenize(prompt).length).toBe(160);
    const first = await postJson(`${f.url}/v1/completions`, { prompt, max_tokens: 2 });
    await waitFor(() => f.gateway.router.stats().index.blocks >= 10, 'the stored blocks to be indexed');
    const again = await postJson(`${f.url}/v1/completions`, { prompt, max_tokens: 2 });
    expect(again.headers.get('x-kvroute-worker')).toBe(first.headers.get('x-kvroute-worker'));
    // Every block is cached, but the engine must compute the last token to sample the first one.
    expect(again.json.usage.prompt_tokens_details.cached_tokens).toBe(144);
    expect(again.headers.get('x-kvroute-cached-tokens')).toBe('144');
    const metrics = await (await fetch(`${f.url}/metrics`)).text();
    expect(metrics).toMatch(/kvroute_gateway_cache_predictions_total\{worker="\d",outcome="exact"\} 2/);
  });

  test("an agent's tool-calling turns (null content, tool results, tools offered) are routed by their prefix, predicted exactly", async () => {
    const f = await startFleet(backend, 3);
    const tools = [{ type: 'function', function: { name: 'lookup', description: SYSTEM, parameters: { type: 'object' } } }];
    const turns: Record<string, unknown>[] = [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: 'Find the source.' },
    ];
    const first = await postJson(`${f.url}/v1/chat/completions`, { messages: turns, tools, max_tokens: 2 });
    expect(first.status).toBe(200);
    const worker = first.headers.get('x-kvroute-worker');
    let previousPrompt = first.json.usage.prompt_tokens as number;
    for (let call = 1; call <= 2; call++) {
      // The next turn extends the previous prompt: wait until the index holds all of that prompt's blocks.
      const held = async () => {
        const explained = await postJson(`${f.adminUrl}/admin/explain`, { messages: turns, tools });
        return Math.max(...explained.json.candidates.map((c: { overlapBlocks: number }) => c.overlapBlocks));
      };
      await waitFor(async () => (await held()) >= Math.floor(previousPrompt / 16), "the previous turn's blocks to be indexed");
      turns.push(
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: `c${call}`, type: 'function', function: { name: 'lookup', arguments: `{"page": ${call}}` } }],
        },
        { role: 'tool', tool_call_id: `c${call}`, content: `page ${call} says nothing useful` },
      );
      const r = await postJson(`${f.url}/v1/chat/completions`, { messages: turns, tools, max_tokens: 2 });
      expect(r.status, JSON.stringify(r.json)).toBe(200);
      expect(r.headers.get('x-kvroute-worker')).toBe(worker);
      const predicted = Number(r.headers.get('x-kvroute-cached-tokens'));
      expect(predicted).toBeGreaterThanOrEqual(Math.floor((2 * SYSTEM.length) / 16) * 16);
      expect(r.json.usage.prompt_tokens_details.cached_tokens).toBe(predicted);
      previousPrompt = r.json.usage.prompt_tokens;
    }
  });

  test('LoRA adapters and cache salts: requests are routed in the scope the engine caches them in, adapters only to workers serving them', async () => {
    const plain = await startWorker();
    const served = [
      await startWorker({ loraModules: ['sql-lora'], maxModelLen: 8192 }),
      await startWorker({ loraModules: ['sql-lora'], maxModelLen: 4096 }),
    ];
    const f = await startFleet(backend, 0, { workers: [plain, ...served].map((w, i) => workerEntry(w, i + 1)) });
    const models = async () => {
      const body = (await (await fetch(`${f.url}/v1/models`)).json()) as { data: { id: string; parent: unknown }[] };
      return body.data.map((m) => [m.id, m.parent]);
    };
    await waitFor(async () => (await models()).length === 2, 'the adapter to be learned from the workers');
    expect(await models()).toEqual([
      ['mock-model', null],
      ['sql-lora', 'mock-model'],
    ]);
    // vLLM's card fields: the weights' root, and the longest context every worker serving it takes.
    const cards = ((await (await fetch(`${f.url}/v1/models`)).json()) as { data: Record<string, unknown>[] }).data;
    expect(cards.map((c) => [c.id, c.root, c.max_model_len])).toEqual([
      ['mock-model', 'mock-model', 4096],
      ['sql-lora', 'sql-lora', 4096],
    ]);
    const blocks = Math.floor(SYSTEM.length / 16) * 16;
    // Per scope: a first request caches the prefix, the next ones are routed to it and predicted exactly.
    const scopes: Record<string, unknown>[] = [
      {},
      { model: 'sql-lora' },
      { cache_salt: 'tenant-a' },
      { model: 'sql-lora', cache_salt: 'tenant-a' },
    ];
    for (const scope of scopes) {
      const ask = (q: string) => postJson(`${f.url}/v1/completions`, { prompt: `${SYSTEM}${q}`, max_tokens: 2, ...scope });
      const before = f.gateway.router.stats().index.blocks;
      const first = await ask('First?');
      expect(first.status, JSON.stringify(first.json)).toBe(200);
      // Another scope's blocks are no use: nothing predicted, nothing cached.
      expect(
        [first.headers.get('x-kvroute-cached-tokens'), first.json.usage.prompt_tokens_details.cached_tokens],
        JSON.stringify(scope),
      ).toEqual(['0', 0]);
      if (scope.model) expect(['2', '3']).toContain(first.headers.get('x-kvroute-worker'));
      await waitFor(() => f.gateway.router.stats().index.blocks >= before + blocks / 16, 'the stored blocks to be indexed');
      const next = await ask('Second, longer?');
      expect(next.status, JSON.stringify([scope, next.json])).toBe(200);
      expect(next.headers.get('x-kvroute-worker')).toBe(first.headers.get('x-kvroute-worker'));
      expect(Number(next.headers.get('x-kvroute-cached-tokens'))).toBeGreaterThanOrEqual(blocks);
      expect(next.json.usage.prompt_tokens_details.cached_tokens).toBe(Number(next.headers.get('x-kvroute-cached-tokens')));
    }
    // The indexer API finds the salted prefix by the salt, bare or as a dynamo-cache-salt: key.
    for (const salt of ['tenant-a', 'dynamo-cache-salt:tenant-a']) {
      const q = await postJson(`${f.adminUrl}/query`, { token_ids: mockTokenize(SYSTEM), cache_salt: salt });
      expect(Object.values(q.json.scores).length, salt).toBe(1);
    }
    // What routing would weigh for an adapter's prompt: only the workers serving it.
    const explained = await postJson(`${f.adminUrl}/admin/explain`, { prompt: `${SYSTEM}Third?`, model: 'sql-lora' });
    expect(explained.json.candidates.map((c: { workerId: number }) => String(c.workerId)).sort()).toEqual(['2', '3']);
    // A model no worker serves is the workers' to refuse (vLLM's 404); a bad salt is refused at the gateway.
    expect((await postJson(`${f.url}/v1/completions`, { prompt: 'x', model: 'nope' })).status).toBe(404);
    const badSalt = await postJson(`${f.url}/v1/completions`, { prompt: 'x', cache_salt: '' });
    expect([badSalt.status, badSalt.json.error.message]).toEqual([400, "Parameter 'cache_salt' must be a non-empty string if provided."]);
  });

  test('a fleet of several models: each request goes to the workers serving the model it names', async () => {
    const workers = [await startWorker({ model: 'm-a' }), await startWorker({ model: 'm-a' }), await startWorker({ model: 'm-b' })];
    const f = await startFleet(backend, 0, { workers: workers.map((w, i) => workerEntry(w, i + 1)) });
    const ids = async () => {
      const body = (await (await fetch(`${f.url}/v1/models`)).json()) as { data: { id: string }[] };
      return body.data.map((m) => m.id);
    };
    await waitFor(async () => (await ids()).length === 2, 'both models to be learned');
    expect(await ids()).toEqual(['m-a', 'm-b']);
    for (let i = 0; i < 6; i++) {
      const model = i % 2 === 0 ? 'm-a' : 'm-b';
      const r = await postJson(`${f.url}/v1/completions`, { prompt: `${SYSTEM}${i}`, max_tokens: 1, model });
      expect([r.status, r.json.model]).toEqual([200, model]);
      expect(model === 'm-a' ? ['1', '2'] : ['3']).toContain(r.headers.get('x-kvroute-worker'));
    }
    // Latency and counts per model: the name as the workers serve it, `none` for a request naming none.
    expect((await postJson(`${f.url}/v1/completions`, { prompt: 'no model named', max_tokens: 1 })).status).toBe(200);
    const m = await scrape(`${f.url}/metrics`);
    expect(['m-a', 'm-b', 'none'].map((model) => m.sum('kvroute_gateway_requests_total', { model, status: '200' }))).toEqual([3, 3, 1]);
    expect(['m-a', 'm-b', 'none'].map((model) => m.sum('kvroute_gateway_time_to_first_token_seconds', { model }))).toEqual([3, 3, 1]);
    expect(m.sum('kvroute_gateway_request_duration_seconds', { model: 'm-b' })).toBe(3);
    // Dynamo's indexer API answers per model: its workers' scores, its workers.
    await waitFor(() => f.gateway.router.stats().index.blocks >= 2 * Math.floor(SYSTEM.length / 16), 'the blocks');
    const holders = async (model?: string) => {
      const q = await postJson(`${f.adminUrl}/query`, { token_ids: mockTokenize(SYSTEM), ...(model ? { model_name: model } : {}) });
      return Object.keys(q.json.scores).sort();
    };
    expect(await holders('m-b')).toEqual(['3']);
    expect((await holders('m-a')).every((id) => ['1', '2'].includes(id))).toBe(true);
    expect((await holders()).length).toBeGreaterThan((await holders('m-a')).length);
    const listed = (await (await fetch(`${f.adminUrl}/workers?model_name=m-b`)).json()) as { instance_id: number; model_name: string }[];
    expect(listed.map((w) => [w.instance_id, w.model_name])).toEqual([[3, 'm-b']]);
    // An index-only worker registered under a model answers for it (here it hears worker 3's events too).
    const registered = await postJson(`${f.adminUrl}/register`, {
      instance_id: 9,
      endpoint: workers[2].kvEventsEndpoints[0],
      model_name: 'm-b',
      block_size: 16,
    });
    expect(registered.status).toBe(201);
    // Its subscription takes a moment to reach the publisher: each try stores a new prompt, whose events it may hear.
    let fresh = '';
    const heard = async () => {
      const q = await postJson(`${f.adminUrl}/query`, { token_ids: mockTokenize(fresh), model_name: 'm-b' });
      return Object.keys(q.json.scores).sort();
    };
    let tries = 0;
    await waitFor(async () => {
      if ((await heard()).length === 2) return true;
      fresh = `Prompt ${tries++} that only model m-b has seen. ${SYSTEM}`;
      await postJson(`${f.url}/v1/completions`, { prompt: fresh, max_tokens: 1, model: 'm-b' });
      await sleep(50);
      return (await heard()).length === 2;
    }, 'the registered worker to hear the blocks');
    expect(await heard()).toEqual(['3', '9']);
  });

  test('a worker serving its model under several names (vLLM --served-model-name a b) takes requests for each', async () => {
    const engine = createServer(async (req, res) => {
      if (req.url === '/health') return res.end();
      if (req.url === '/v1/models')
        return res.end(
          JSON.stringify({
            data: [
              { id: 'm-c', parent: null },
              { id: 'm-c-alias', parent: null },
            ],
          }),
        );
      // Any other GET (the probes' /is_sleeping): a route this engine does not serve.
      if (req.method === 'GET') return res.writeHead(404).end();
      let body = '';
      for await (const part of req) body += part;
      if (req.url === '/tokenize') return res.end(JSON.stringify({ tokens: [1, 2, 3] }));
      const { model } = JSON.parse(body);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'x',
          model,
          choices: [{ index: 0, text: 'ok' }],
          usage: { prompt_tokens: 3, prompt_tokens_details: { cached_tokens: 0 } },
        }),
      );
    });
    await new Promise<void>((r) => engine.listen(0, '127.0.0.1', r));
    try {
      const w = await startWorker({ model: 'm-a' });
      const f = await startFleet(backend, 0, {
        workers: [workerEntry(w, 1), { id: 2, url: `http://127.0.0.1:${(engine.address() as AddressInfo).port}` }],
      });
      const ids = async () => ((await (await fetch(`${f.url}/v1/models`)).json()) as { data: { id: string }[] }).data.map((m) => m.id);
      await waitFor(async () => (await ids()).length === 3, 'the models to be learned');
      expect(await ids()).toEqual(['m-a', 'm-c', 'm-c-alias']);
      for (const model of ['m-c', 'm-c-alias', 'm-a', 'm-c-alias']) {
        const r = await postJson(`${f.url}/v1/completions`, { prompt: 'hello there', max_tokens: 1, model });
        expect([r.status, r.headers.get('x-kvroute-worker')]).toEqual([200, model === 'm-a' ? '1' : '2']);
      }
    } finally {
      engine.close();
    }
  });

  /**
   * A fake engine streaming `before`, then holding its stream until released, then `after` and
   * `[DONE]`; the request goes to it through a gateway, which is looked at while the stream is
   * held: the prefill must have ended and the TTFT been taken. Returns the events and the
   * gateway's inter-token gaps once the stream is over.
   */
  async function heldStream(path: string, body: object, before: string[], after: string[]): Promise<{ events: unknown[]; gaps: number }> {
    let release = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    const engine = createServer(async (req, res) => {
      if (req.url === '/health') return res.end();
      if (req.url === '/v1/models') return res.end(JSON.stringify({ data: [{ id: 'fake', parent: null }] }));
      // Any other GET (the probes' /is_sleeping): a route this engine does not serve.
      if (req.method === 'GET') return res.writeHead(404).end();
      for await (const _ of req);
      if (req.url === '/tokenize') return res.end(JSON.stringify({ tokens: Array.from({ length: 64 }, (_, i) => i) }));
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const e of before) res.write(e);
      await held;
      for (const e of after) res.write(e);
      res.end('data: [DONE]\n\n');
    });
    await new Promise<void>((r) => engine.listen(0, '127.0.0.1', r));
    try {
      const f = await startFleet(backend, 0, { workers: [{ id: 1, url: `http://127.0.0.1:${(engine.address() as AddressInfo).port}` }] });
      const pending = sse(`${f.url}${path}`, { ...body, stream: true });
      await waitFor(
        () => f.gateway.router.stats().inFlight === 1 && f.gateway.router.stats().load[0].activePrefillTokens === 0,
        'the prefill to end before the stream is released',
      );
      const metric = async (name: string) => (await scrape(`${f.url}/metrics`)).sum(name);
      expect(await metric('kvroute_gateway_time_to_first_token_seconds')).toBe(1);
      release();
      const { events } = await pending;
      expect(events.at(-1)).toBe('[DONE]');
      expect(f.gateway.router.stats().inFlight).toBe(0);
      return { events, gaps: await metric('kvroute_gateway_inter_token_latency_seconds') };
    } finally {
      release();
      engine.close();
    }
  }

  test("a reasoning model's thinking and an agent's tool calls are first tokens: prefill ends and TTFT is taken there", async () => {
    const chunk = (delta: object) =>
      `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
    // An engine whose answer starts with thinking, then calls a tool, and never writes content.
    const { events, gaps } = await heldStream(
      '/v1/chat/completions',
      { messages: [{ role: 'user', content: 'Weather?' }] },
      [chunk({ role: 'assistant', content: '' }), chunk({ reasoning_content: 'The user wants the weather.' })],
      [chunk({ tool_calls: [{ index: 0, id: 't1', type: 'function', function: { name: 'weather', arguments: '{}' } }] })],
    );
    const kinds = events.map((e) => (e === '[DONE]' ? 'done' : Object.keys((e as { choices: { delta: object }[] }).choices[0].delta)[0]));
    expect(kinds).toEqual(['role', 'reasoning_content', 'tool_calls', 'done']);
    // The bare role is no token: one gap, from the thinking to the tool call.
    expect(gaps).toBe(1);
  });

  test('a token whose text is held back (a stop string may still match) is a first token all the same', async () => {
    const chunk = (text: string, finish: string | null) =>
      `data: ${JSON.stringify({ id: 'c', object: 'text_completion', choices: [{ index: 0, text, logprobs: null, finish_reason: finish, stop_reason: null }] })}\n\n`;
    // vLLM with `stop: ["</answer>"]` streams its first 8 tokens with empty text.
    const { gaps } = await heldStream(
      '/v1/completions',
      { prompt: 'Answer?', max_tokens: 3, stop: ['</answer>'] },
      [chunk('', null)],
      [chunk('', null), chunk('42', 'length')],
    );
    // Two gaps between three tokens; the finished chunk counts by its text.
    expect(gaps).toBe(2);
  });

  test('usage an engine puts in every chunk because the gateway asked for usage is taken out for a client that did not', async () => {
    // An engine whose continuous_usage_stats defaults to true (Aphrodite's) sends running usage in every chunk once asked for include_usage.
    const usage = (n: number) => ({ prompt_tokens: 64, completion_tokens: n, total_tokens: 64 + n });
    const chunk = (text: string, n: number, finish: string | null) =>
      `data: ${JSON.stringify({ id: 'c', object: 'text_completion', choices: [{ index: 0, text, finish_reason: finish }], usage: usage(n) })}\n\n`;
    const last = `data: ${JSON.stringify({ id: 'c', object: 'text_completion', choices: [], usage: usage(2) })}\n\n`;
    const { events } = await heldStream(
      '/v1/completions',
      { prompt: 'Answer?', max_tokens: 2 },
      [chunk('4', 1, null)],
      [chunk('2', 2, 'length'), last],
    );
    expect(events).toEqual([
      { id: 'c', object: 'text_completion', choices: [{ index: 0, text: '4', finish_reason: null }] },
      { id: 'c', object: 'text_completion', choices: [{ index: 0, text: '2', finish_reason: 'length' }] },
      '[DONE]',
    ]);
  });

  test("workers started with an API key (vLLM's --api-key) are called with upstream.apiKey, never with the client's", async () => {
    const w = await startWorker({ apiKey: 'sk-worker', loraModules: ['a1'] });
    expect((await postJson(`${w.url}/v1/completions`, { prompt: 'x', max_tokens: 1 })).status).toBe(401);
    const withoutKey = await startFleet(backend, 0, { workers: [workerEntry(w, 1)] });
    const refused = await postJson(`${withoutKey.url}/v1/completions`, { prompt: SYSTEM, max_tokens: 1 });
    expect([refused.status, refused.json]).toEqual([401, { error: 'Unauthorized' }]);
    const f = await startFleet(backend, 0, {
      workers: [workerEntry(w, 1)],
      upstream: { apiKey: 'sk-worker' },
      auth: { apiKeys: ['sk-client'] },
    });
    const asClient = { authorization: 'Bearer sk-client' };
    const ok = await postJson(`${f.url}/v1/completions`, { prompt: SYSTEM, max_tokens: 1, model: 'a1' }, asClient);
    expect([ok.status, ok.json.model]).toEqual([200, 'a1']);
    // The key reached /v1/models too: the adapter was learned, so the request was routed in its scope.
    await waitFor(async () => {
      const models = (await (await fetch(`${f.url}/v1/models`, { headers: asClient })).json()) as { data: { id: string }[] };
      return models.data.some((m) => m.id === 'a1');
    }, 'the adapter to be learned');
    await expect(startFleet(backend, 0, { upstream: { apiKey: 7 as never } })).rejects.toThrow(/upstream\.apiKey must be/);
  });

  test('truncate_prompt_tokens: routing and the prediction use the prompt the engine runs (its last tokens)', async () => {
    const f = await startFleet(backend, 3);
    // Each prompt: its own junk, then the shared text and a question of a fixed length; the engine keeps the last part.
    const ask = (junk: string, question: string) =>
      postJson(`${f.url}/v1/completions`, {
        prompt: `${junk.repeat(40)}${SYSTEM}${question}`,
        truncate_prompt_tokens: SYSTEM.length + question.length,
        max_tokens: 1,
      });
    const first = await ask('a', 'First?');
    expect([first.status, first.json.usage.prompt_tokens]).toEqual([200, SYSTEM.length + 6]);
    await waitFor(() => f.gateway.router.stats().index.blocks >= Math.floor(SYSTEM.length / 16), 'the blocks');
    const next = await ask('b', 'Other?');
    expect(next.headers.get('x-kvroute-worker')).toBe(first.headers.get('x-kvroute-worker'));
    const predicted = Number(next.headers.get('x-kvroute-cached-tokens'));
    expect(predicted).toBeGreaterThanOrEqual(Math.floor(SYSTEM.length / 16) * 16);
    expect(next.json.usage.prompt_tokens_details.cached_tokens).toBe(predicted);
    const bad = await postJson(`${f.url}/v1/completions`, { prompt: 'x', truncate_prompt_tokens: -2 });
    expect([bad.status, bad.json.error.message]).toEqual([400, 'truncate_prompt_tokens must be an integer ≥ -1']);
  });

  test('streams pass through event by event; the usage chunk appears only when the client asks', async () => {
    const f = await startFleet(backend, 2);
    const direct = await sse(`${f.workers[0].url}/v1/chat/completions`, {
      messages: [{ role: 'user', content: 'hello there' }],
      max_tokens: 6,
      stream: true,
    });
    const body = { messages: [{ role: 'user', content: 'hello there' }], max_tokens: 6, stream: true };
    const via = await sse(`${f.url}/v1/chat/completions`, body);
    expect(via.status).toBe(200);
    expect(via.headers.get('content-type')).toBe('text/event-stream');
    expect(via.headers.get('x-kvroute-dp-rank')).toBe('0');
    expect(via.events.length).toBe(direct.events.length);
    expect(via.events.at(-1)).toBe('[DONE]');
    expect(via.events.some((e) => e !== '[DONE]' && e.usage)).toBe(false);
    const text = (events: typeof via.events) =>
      events
        .filter((e) => e !== '[DONE]')
        .map((e) => e.choices[0]?.delta?.content ?? '')
        .join('');
    expect(text(via.events)).toBe(text(direct.events));
    const withUsage = await sse(`${f.url}/v1/chat/completions`, { ...body, stream_options: { include_usage: true } });
    const usage = withUsage.events.find((e) => e !== '[DONE]' && e.usage);
    expect(usage.usage.completion_tokens).toBe(6);
    // vLLM's continuous usage stats (usage in every chunk) count only with include_usage: the
    // gateway's own request for usage does not turn them on for a client without it.
    const unasked = await sse(`${f.url}/v1/chat/completions`, { ...body, stream_options: { continuous_usage_stats: true } });
    expect(unasked.events.filter((e) => e !== '[DONE]' && e.usage)).toEqual([]);
    const continuous = await sse(`${f.url}/v1/chat/completions`, {
      ...body,
      stream_options: { include_usage: true, continuous_usage_stats: true },
    });
    const chunks = continuous.events.filter((e) => e !== '[DONE]' && e.choices.length === 1);
    // The role chunk first, no output counted yet.
    expect(chunks.map((e) => e.usage?.completion_tokens)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(continuous.events.at(-2)).toMatchObject({ choices: [], usage: { completion_tokens: 6 } });
    const metrics = await (await fetch(`${f.url}/metrics`)).text();
    // Every stream reported its cached tokens although only some clients asked for usage.
    expect(metrics).toMatch(/kvroute_gateway_reported_cached_tokens_total\{worker="\d"\} \d+/);
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_time_to_first_token_seconds')).toBe(4);
    expect(m.sum('kvroute_gateway_inter_token_latency_seconds')).toBe(20);
  });

  test('a client that goes away aborts the upstream request and frees its booking', async () => {
    const f = await startFleet(backend, 1, {}, { speedup: 1 });
    const controller = new AbortController();
    const r = await fetch(`${f.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'tell me a long story', max_tokens: 2000, stream: true }),
      signal: controller.signal,
    });
    const reader = (r.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    expect(f.gateway.router.stats().inFlight).toBe(1);
    controller.abort();
    await waitFor(() => f.workers[0].stats().aborted === 1, 'the worker to abort the request');
    await waitFor(() => f.gateway.router.stats().inFlight === 0, 'the booking to be freed');
    expect(f.gateway.router.stats().unknownFree).toBe(0);
  });

  test("the client's X-Request-Id reaches the engine, which names the request after it; the router keeps its own ids", async () => {
    const f = await startFleet(backend, 1);
    const traced = { 'x-request-id': 'trace-42' };
    // Two at once under one client id: the engine's business, as without the gateway; the router's ids stay unique.
    const [a, b] = await Promise.all(
      [0, 1].map((i) => postJson(`${f.url}/v1/completions`, { prompt: `hello ${i}`, max_tokens: 2 }, traced)),
    );
    expect([a.status, a.json.id, b.status, b.json.id]).toEqual([200, 'cmpl-trace-42', 200, 'cmpl-trace-42']);
    expect(a.headers.get('x-kvroute-request-id')).not.toBe(b.headers.get('x-kvroute-request-id'));
    // Without one, the engine hears the gateway's id.
    const plain = await postJson(`${f.url}/v1/completions`, { prompt: 'hello', max_tokens: 2 });
    expect(plain.json.id).toBe(`cmpl-${plain.headers.get('x-kvroute-request-id')}`);
    const tooLong = await postJson(`${f.url}/v1/completions`, { prompt: 'hello', max_tokens: 2 }, { 'x-request-id': 'x'.repeat(513) });
    expect([tooLong.status, tooLong.json.error.message]).toEqual([400, 'X-Request-Id must be at most 512 characters, got 513']);
    expect(f.gateway.router.stats().routed).toBe(3);
  });

  test('bad requests get 400 in OpenAI shape and book nothing', async () => {
    const f = await startFleet(backend, 1);
    const bad: [object, RegExp][] = [
      [{ prompt: '' }, /prompt must be a non-empty string/],
      [{ prompt: [1, 2, -3] }, /prompt\[2\] must be a token id/],
      [{ prompt: [[1], 'a', 2] }, /prompt must be a non-empty string or a non-empty list of token ids/],
      [{ prompt: [[[1]]] }, /prompt must be/],
      [{ messages: [] }, /messages must be a non-empty array/],
      [{ prompt: 'x', stream: 'yes' }, /stream must be a boolean/],
      [{ prompt: 'x', add_special_tokens: 'no' }, /add_special_tokens must be a boolean/],
      [{ messages: [{ role: 'user', content: 'x' }], tools: 'all' }, /tools must be a list/],
      [{ messages: [{ role: 'user', content: 7 }] }, /messages\[0\]\.content must be a string, a list of parts or null/],
      [{ messages: [{ role: 'user', content: 'x' }], continue_final_message: true }, /Cannot set both/],
      [{ messages: [{ role: 'user', content: 'x' }], chat_template_kwargs: [1] }, /chat_template_kwargs must be an object/],
      [{ messages: [{ role: 'user', content: 'x' }], chat_template: '{{ 1 }}' }, /chat_template in a request is refused/],
      [
        { messages: [{ role: 'assistant', content: null, tool_calls: [{ function: { name: 'f', arguments: '{oops' } }] }] },
        /messages\[0\]\.tool_calls\[0\]\.function\.arguments is not JSON/,
      ],
    ];
    for (const [body, message] of bad) {
      const path = 'messages' in body ? 'chat/completions' : 'completions';
      const r = await postJson(`${f.url}/v1/${path}`, body);
      expect(r.status).toBe(400);
      expect(r.json.error.message).toMatch(message);
    }
    const tooLong = await postJson(`${f.url}/v1/completions`, { prompt: 'hi', max_tokens: 10_000_000 });
    expect(tooLong.status).toBe(400);
    expect(f.gateway.router.stats().routed).toBe(1);
    // A batch of one is routed as its prompt.
    const single = await postJson(`${f.url}/v1/completions`, { prompt: [[5, 6, 7]], max_tokens: 1 });
    expect(single.status).toBe(200);
    expect(single.json.usage.prompt_tokens).toBe(3);
    expect(f.gateway.router.stats().routed).toBe(2);
    expect(f.gateway.router.stats().inFlight).toBe(0);
  });
});
