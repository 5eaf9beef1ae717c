/**
 * The gateway's tokenizers against real mock workers: the engine's `/tokenize` (what it is sent,
 * how its answers are read, its cache) and a local `tokenizer.json` with its chat template.
 */

import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { createGateway, mockTokenize, renderMockChat, writeMockTokenizer } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { expectKvError } from './helpers/errors.js';
import { closeFleetsAfterEach, startFleet, startWorker, workerEntry } from './helpers/gateway.js';
import { postJson } from './helpers/http.js';
import { scratchDir } from './helpers/scratch-dir.js';
import { chatmlBytes } from './helpers/tokenizer-files.js';

closeFleetsAfterEach();

describe.each(BACKENDS)('gateway tokenizers (%s)', (backend) => {
  test('tokenizers: the engine tokenizer and a local tokenizer.json give the mock worker its own tokens', async () => {
    const dir = scratchDir('kvroute-tok-');
    const path = writeMockTokenizer(dir);
    // Both trust request chat templates (vLLM's --trust-request-chat-template), for the last case.
    const engine = await startFleet(backend, 1, {}, { trustRequestChatTemplate: true });
    const local = await startFleet(backend, 0, {
      tokenizer: { path, trustRequestChatTemplate: true },
      workers: [workerEntry(engine.workers[0], 1)],
    });
    const messages = [
      { role: 'system', content: 'Be brief.' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Grüße, 世界! ' },
          { type: 'text', text: 'two parts' },
        ],
      },
    ];
    // An agent's turn: tools offered, an assistant that only calls one (content null), its result.
    const tools = [
      { type: 'function', function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
    ];
    const agent = [
      { role: 'user', content: 'Weather in Oslo?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'weather', arguments: '{"city": "Oslo"}' } }],
      },
      { role: 'tool', tool_call_id: 'c1', content: '-3 C' },
    ];
    const cases = [
      { prompt: 'plain text prompt with ümlauts' },
      { prompt: 'no special tokens', add_special_tokens: false },
      { messages },
      { messages: agent, tools },
      { messages: [...agent, { role: 'assistant', content: 'It is -3' }], add_generation_prompt: false, continue_final_message: true },
      {
        messages,
        chat_template: '{{ greeting }}{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}',
        chat_template_kwargs: { greeting: 'hi ' },
      },
    ];
    for (const body of cases) {
      const truth = await postJson(`${engine.workers[0].url}/tokenize`, body);
      expect(truth.status, JSON.stringify(body)).toBe(200);
      for (const f of [engine, local]) {
        const explained = await postJson(`${f.adminUrl}/admin/explain`, body);
        expect(explained.json.tokens, JSON.stringify(body)).toEqual(truth.json.tokens);
      }
    }
    // Each field changed the prompt: no two cases tokenized alike.
    const distinct = new Set<string>();
    for (const body of cases) distinct.add(JSON.stringify((await postJson(`${engine.workers[0].url}/tokenize`, body)).json.tokens));
    expect(distinct.size).toBe(cases.length);
    // A template that does not parse is the request's fault; untrusted, a request's template is refused.
    const broken = { messages, chat_template: '{% for %}' };
    for (const f of [engine, local]) {
      const r = await postJson(`${f.adminUrl}/admin/explain`, broken);
      expect([r.status, r.json.error]).toEqual([400, expect.stringMatching(/does not parse/)]);
    }
    const untrusted = await startFleet(backend, 0, { tokenizer: path, workers: [workerEntry(engine.workers[0], 1)] });
    const custom = cases.at(-1) as object;
    const refused = await postJson(`${untrusted.adminUrl}/admin/explain`, custom);
    expect([refused.status, refused.json.error]).toEqual([400, expect.stringMatching(/chat_template in a request is refused/)]);
    const plainWorker = await startWorker();
    expect((await postJson(`${plainWorker.url}/tokenize`, custom)).json.error.message).toMatch(/chat_template in a request is refused/);
    expect(mockTokenize(renderMockChat(messages as never))).toEqual(
      (await postJson(`${engine.workers[0].url}/tokenize`, { messages })).json.tokens,
    );
  });

  test("a template that loops over a message's content gets OpenAI's list of parts, as vLLM detects it", async () => {
    const path = writeMockTokenizer(scratchDir('kvroute-tok-'));
    const engine = await startFleet(backend, 1, {}, { trustRequestChatTemplate: true });
    const workers = [workerEntry(engine.workers[0], 1)];
    const local = await startFleet(backend, 0, { tokenizer: { path, trustRequestChatTemplate: true }, workers });
    const forced = await startFleet(backend, 0, {
      tokenizer: { path, trustRequestChatTemplate: true, chatTemplateContentFormat: 'string' },
      workers,
    });
    const messages = [
      { role: 'system', content: 'Be brief.' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'look' },
          { type: 'image_url', image_url: { url: 'data:,' } },
          'bare',
          { type: 'text', text: 'twice' },
        ],
      },
      { role: 'assistant', content: null },
    ];
    const parts =
      "{% for m in messages %}<{{ m.role }}>{% if m.content is string %}S:{{ m.content }}{% else %}{% for p in m['content'] %}" +
      '{% if p is string %}[str:{{ p }}]{% else %}[{{ p.type }}{% if p.text %}:{{ p.text }}{% endif %}]{% endif %}{% endfor %}{% endif %}{% endfor %}';
    const asString = '<system>S:Be brief.<user>S:look\nbare\ntwice<assistant>S:';
    const cases: [template: string, text: string][] = [
      [parts, '<system>[text:Be brief.]<user>[text:look][image][str:bare][text:twice]<assistant>'],
      // Through a sliced copy of the messages, a loop condition, attribute access and a filter.
      [
        "{% set rest = messages[1:] %}{% for m in rest if m.role == 'user' %}{% for p in m.content | list %}({{ p.type }}){% endfor %}{% endfor %}",
        '(text)(image)()(text)',
      ],
      // No loop over a message's content: the parts' text joined by newlines, media dropped.
      ['{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}', '<system>Be brief.<user>look\nbare\ntwice<assistant>'],
      // The messages assigned to something other than a name: vLLM's walk gives up, "string".
      [`{% set ns = namespace(x=0) %}{% set ns.x = messages %}${parts}`, asString],
    ];
    for (const [chat_template, text] of cases) {
      const body = { messages, chat_template };
      const truth = await postJson(`${engine.workers[0].url}/tokenize`, body);
      expect(truth.json.tokens, chat_template).toEqual(mockTokenize(text));
      expect((await postJson(`${local.adminUrl}/admin/explain`, body)).json.tokens, chat_template).toEqual(truth.json.tokens);
    }
    // chatTemplateContentFormat set as a worker's flag (vLLM's --chat-template-content-format) is: "string" whatever the template.
    const stringWorker = await startWorker({ trustRequestChatTemplate: true, chatTemplateContentFormat: 'string' });
    for (const url of [`${stringWorker.url}/tokenize`, `${forced.adminUrl}/admin/explain`])
      expect((await postJson(url, { messages, chat_template: parts })).json.tokens, url).toEqual(mockTokenize(asString));
    await expect(startWorker({ chatTemplateContentFormat: 'json' as never })).rejects.toThrow(
      /opts.chatTemplateContentFormat must be 'auto', 'string' or 'openai', got "json"/,
    );
    // continue_final_message continues the last text part of the final message.
    const template = '{% for m in messages %}{% for p in m.content %}{{ p.text }}{% endfor %}|END{% endfor %}';
    const reply = (content: unknown) => ({
      messages: [
        { role: 'user', content: 'q' },
        { role: 'assistant', content },
      ],
      chat_template: template,
      continue_final_message: true,
      add_generation_prompt: false,
    });
    const continued = reply([
      { type: 'text', text: 'It is' },
      { type: 'image_url', image_url: { url: 'data:,' } },
    ]);
    for (const url of [`${engine.workers[0].url}/tokenize`, `${local.adminUrl}/admin/explain`])
      expect((await postJson(url, continued)).json.tokens).toEqual(mockTokenize('q|ENDIt is'));
    const noText = await postJson(`${local.adminUrl}/admin/explain`, reply([{ type: 'image_url', image_url: { url: 'data:,' } }]));
    expect([noText.status, noText.json.error]).toEqual([400, expect.stringMatching(/could not find any text to continue/)]);
    expectKvError(
      () => createGateway({ blockSize: 16, tokenizer: { path, chatTemplateContentFormat: 'json' as never } }),
      'ERR_INVALID_ARG',
      /tokenizer.chatTemplateContentFormat must be 'auto', 'string' or 'openai', got "json"/,
    );
  });

  test("the engine tokenizer reads the engine's answers: its error message, a worker without /tokenize, a worker failing", async () => {
    // An engine whose /tokenize answers as the test says: vLLM's nested error, FastAPI's missing route, a 500.
    let mode: 'nested' | 'missing' | 'failing' = 'nested';
    const engine = createServer((req, res) => {
      if (req.url === '/health') return res.end();
      if (req.url === '/v1/models') return res.end(JSON.stringify({ data: [{ id: 'fake', parent: null }] }));
      const [status, body] =
        mode === 'nested'
          ? [400, { error: { message: 'messages[0] is not valid', type: 'BadRequestError', code: 400 } }]
          : mode === 'missing'
            ? [404, { detail: 'Not Found' }]
            : [500, { error: { message: 'engine died', code: 500 } }];
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    });
    await new Promise<void>((r) => engine.listen(0, '127.0.0.1', r));
    try {
      const f = await startFleet(backend, 0, { workers: [{ id: 1, url: `http://127.0.0.1:${(engine.address() as AddressInfo).port}` }] });
      const ask = () => postJson(`${f.url}/v1/completions`, { prompt: 'hello', max_tokens: 1 });
      expect(await ask()).toMatchObject({
        status: 400,
        json: { error: { message: 'cannot tokenize the prompt: messages[0] is not valid' } },
      });
      mode = 'missing';
      for (let i = 0; i < 4; i++) {
        const r = await ask();
        expect(r.status).toBe(500);
        expect(r.json.error.message).toMatch(/worker 1 has no \/tokenize .*set the gateway's tokenizer to the model's tokenizer\.json/);
      }
      // Neither is the worker's fault: it stays in routing.
      expect(f.gateway.workers()[0].health).toBe('healthy');
      mode = 'failing';
      expect(await ask()).toMatchObject({
        status: 503,
        json: { error: { message: /no worker could tokenize the prompt \(\/tokenize answered 500: engine died\)/ } },
      });
    } finally {
      engine.close();
    }
  });

  test("a model no worker serves is the engine's 404 NotFoundError through either tokenizer, on every route", async () => {
    const engine = await startFleet(backend, 1, {}, { responsesStore: true });
    const local = await startFleet(backend, 0, {
      tokenizer: { path: writeMockTokenizer(scratchDir('kvroute-tok-')) },
      workers: [workerEntry(engine.workers[0], 1)],
    });
    const bodies: [string, Record<string, unknown>][] = [
      ['completions', { prompt: 'hello', max_tokens: 1 }],
      ['completions', { prompt: 'hello', max_tokens: 1, stream: true }],
      ['chat/completions', { messages: [{ role: 'user', content: 'hello' }], max_tokens: 1 }],
      ['responses', { input: 'hello', max_output_tokens: 1 }],
    ];
    for (const f of [engine, local])
      for (const [route, body] of bodies) {
        const r = await postJson(`${f.url}/v1/${route}`, { ...body, model: 'nope' });
        expect([r.status, r.json], `${route} ${JSON.stringify(body)}`).toEqual([
          404,
          { error: { message: 'The model `nope` does not exist.', type: 'NotFoundError', param: null, code: 404 } },
        ]);
      }
    // Explaining it gets the same refusal (in the admin API's error shape): the engine's own
    // through the engine tokenizer, and from the workers' model lists with a local one.
    for (const f of [engine, local])
      for (const body of [
        { prompt: 'hello', model: 'nope' },
        { messages: [{ role: 'user', content: 'hello' }], model: 'nope' },
      ]) {
        const explained = await postJson(`${f.adminUrl}/admin/explain`, body);
        expect([explained.status, explained.json]).toEqual([404, { error: 'The model `nope` does not exist.' }]);
      }
    // The model the workers serve is explained through either.
    for (const f of [engine, local])
      expect((await postJson(`${f.adminUrl}/admin/explain`, { prompt: 'hello', model: 'mock-model' })).status).toBe(200);
    // Nothing ran on the worker, and nothing is left booked.
    expect(engine.workers[0].stats().finished).toEqual([0]);
    for (const f of [engine, local]) expect(f.gateway.router.stats()).toMatchObject({ inFlight: 0 });
  });

  test("a local tokenizer gives the chat template the config's special tokens, as Hugging Face does", async () => {
    const dir = scratchDir('kvroute-tok-');
    const path = writeMockTokenizer(dir);
    const config = JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8'));
    const template =
      '{{ bos_token }}{% for m in messages %}{{ m.content }}{{ pad_token }}{% endfor %}{{ additional_special_tokens | join(",") }}';
    writeFileSync(
      join(dir, 'tokenizer_config.json'),
      JSON.stringify({
        ...config,
        chat_template: template,
        bos_token: '<s>',
        pad_token: { content: '<pad>' },
        additional_special_tokens: ['<a>', '<b>'],
      }),
    );
    const f = await startFleet(backend, 1, { tokenizer: path });
    const explained = await postJson(`${f.adminUrl}/admin/explain`, { messages: [{ role: 'user', content: 'hi' }] });
    expect(explained.json.tokens).toEqual(mockTokenize('<s>hi<pad><a>,<b>'));
  });

  test.each(['engine', 'local'])(
    'the %s tokenizer caches prompts within tokenizeCache, least recently used out, and counts hits and misses',
    async (kind) => {
      const cache = { tokenizeCache: { maxPrompts: 2, maxBytes: 64 * 1024 } };
      const f = await startFleet(
        backend,
        1,
        kind === 'engine' ? cache : { ...cache, tokenizer: writeMockTokenizer(scratchDir('kvroute-tok-')) },
      );
      const scrape = async () => {
        const text = await (await fetch(`${f.adminUrl}/metrics`)).text();
        const read = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1]);
        return ['hits_total', 'misses_total', 'prompts', 'bytes'].map((k) => read(`kvroute_gateway_tokenize_cache_${k}`));
      };
      const explain = async (body: object) => expect((await postJson(`${f.adminUrl}/admin/explain`, body)).status).toBe(200);
      await explain({ prompt: 'a first prompt' });
      await explain({ prompt: 'a first prompt' });
      expect(await scrape()).toEqual([1, 1, 1, 2 * JSON.stringify({ prompt: 'a first prompt' }).length + 8 * 14]);
      // The same text as a chat, or with other prompt fields, is another prompt.
      await explain({ messages: [{ role: 'user', content: 'a first prompt' }] });
      await explain({ prompt: 'a first prompt', add_special_tokens: false });
      expect((await scrape()).slice(0, 3)).toEqual([1, 3, 2]);
      await explain({ prompt: 'a first prompt' }); // evicted by the two after it
      expect((await scrape()).slice(0, 3)).toEqual([1, 4, 2]);
      // A prompt over a quarter of maxBytes is tokenized every time, never kept.
      const big = { prompt: 'x'.repeat(3000) };
      await explain(big);
      await explain(big);
      expect((await scrape()).slice(0, 3)).toEqual([1, 6, 2]);
      expect((await scrape())[3]).toBeLessThanOrEqual(64 * 1024);
    },
  );

  test('prompts longer than V8 hashes by content, of one length, are cached apart', async () => {
    const f = await startFleet(backend, 1, { tokenizeCache: { maxPrompts: 16, maxBytes: 16 << 20 } });
    const scrape = async () => {
      const text = await (await fetch(`${f.adminUrl}/metrics`)).text();
      return ['hits', 'misses'].map((k) => Number(new RegExp(`^kvroute_gateway_tokenize_cache_${k}_total (\\d+)$`, 'm').exec(text)?.[1]));
    };
    const prompt = (c: string) => `${c}${'long prompt '.repeat(1_700)}${c}`; // 20,402 characters
    for (const c of ['a', 'b', 'a', 'c', 'b']) {
      const r = await postJson(`${f.adminUrl}/admin/explain`, { prompt: prompt(c) });
      expect(r.status).toBe(200);
      expect(r.json.tokens).toEqual(mockTokenize(prompt(c)));
    }
    expect(await scrape()).toEqual([2, 3]);
  });

  test("a local tokenizer's prefix cache: each turn of a conversation encodes only what it adds, with the same tokens", async () => {
    const dir = scratchDir('kvroute-tok-');
    writeFileSync(join(dir, 'tokenizer.json'), chatmlBytes().json);
    const chatml =
      "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ chat_template: chatml }));
    const cached = await startFleet(backend, 1, { tokenizer: dir });
    const plain = await startFleet(backend, 0, {
      tokenizer: dir,
      tokenizeCache: { prefixMaxBytes: 0 },
      workers: [workerEntry(cached.workers[0], 1)],
    });
    const scrape = async (f: { adminUrl: string }) => {
      const text = await (await fetch(`${f.adminUrl}/metrics`)).text();
      const read = (k: string) => Number(new RegExp(`^kvroute_gateway_tokenize_prefix_cache_${k} (\\d+)$`, 'm').exec(text)?.[1]);
      return { hits: read('hits_total'), misses: read('misses_total'), reused: read('reused_tokens_total'), bytes: read('bytes') };
    };
    const messages = [{ role: 'system', content: 'You answer in one line.' }];
    for (let turn = 0; turn < 4; turn++) {
      messages.push({ role: 'user', content: `question ${turn}: ${'why '.repeat(20 * turn)}` });
      const tokens = [];
      for (const f of [cached, plain]) {
        const r = await postJson(`${f.adminUrl}/admin/explain`, { messages });
        expect(r.status).toBe(200);
        tokens.push(r.json.tokens);
      }
      expect(tokens[0]).toEqual(tokens[1]);
      messages.push({ role: 'assistant', content: `answer ${turn}` });
    }
    const stats = await scrape(cached);
    expect(stats).toMatchObject({ hits: 3, misses: 1 });
    expect(stats.reused).toBeGreaterThan(100);
    expect(stats.bytes).toBeGreaterThan(0);
    // Off: no prefix-cache series at all.
    expect(Number.isNaN((await scrape(plain)).hits)).toBe(true);
  });

  test('tokenizeCache.prefixMaxBytes must be a non-negative integer', () => {
    for (const prefixMaxBytes of [-1, 1.5, '8'])
      expectKvError(
        () => createGateway({ blockSize: 16, backend, tokenizeCache: { prefixMaxBytes } as never }),
        'ERR_INVALID_ARG',
        /prefixMaxBytes/,
      );
  });
});
