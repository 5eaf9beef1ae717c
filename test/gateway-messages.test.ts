import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { request } from 'undici';
import { describe, expect, test } from 'vitest';
import { mockTokenizerConfig, writeMockTokenizer } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { closeFleetsAfterEach, gatewayBehindWire, startFleet } from './helpers/gateway.js';
import { namedEvents, postJson } from './helpers/http.js';
import { scrape } from './helpers/prometheus.js';
import { scratchDir } from './helpers/scratch-dir.js';
import { headsOn } from './helpers/tcp-proxy.js';
import { waitFor } from './helpers/wait.js';

closeFleetsAfterEach();

/** A Messages API request with what agents send: system blocks, thinking, tool calls and their results, tools. */
const AGENT_TURN = {
  model: 'mock-model',
  max_tokens: 4,
  system: [
    { type: 'text', text: 'x-anthropic-billing-header: cc_version=2.1; cch=93a1;' },
    { type: 'text', text: 'You are a coding agent. ' },
    { type: 'text', text: 'Be brief.' },
  ],
  messages: [
    { role: 'user', content: 'List the files, then read the first one.' },
    {
      role: 'assistant',
      content: [
        { type: 'thinking', thinking: 'I should list them.', signature: 'abc' },
        { type: 'text', text: 'Listing.' },
        { type: 'tool_use', id: 'toolu_1', name: 'ls', input: { path: '/tmp', depth: 1, note: 'café' } },
      ],
    },
    {
      role: 'user',
      content: [
        {
          type: 'tool_result',
          tool_use_id: 'toolu_1',
          content: [
            { type: 'text', text: 'a.txt' },
            { type: 'text', text: 'b.txt' },
          ],
        },
        { type: 'text', text: 'Go on.' },
      ],
    },
    { role: 'ctx', content: 'The repository is small.' },
  ],
  tools: [{ name: 'ls', description: 'Lists a directory', input_schema: { properties: { path: { type: 'string' } } } }],
};

/** The chat vLLM runs for AGENT_TURN (vllm/entrypoints/anthropic/serving.py's rules, written out by hand): its fields that shape the prompt. */
const AGENT_TURN_AS_CHAT = {
  model: 'mock-model',
  messages: [
    { role: 'system', content: 'You are a coding agent. Be brief.' },
    { role: 'user', content: 'List the files, then read the first one.' },
    {
      role: 'assistant',
      content: 'Listing.',
      reasoning: 'I should list them.',
      tool_calls: [
        { id: 'toolu_1', type: 'function', function: { name: 'ls', arguments: '{"path": "/tmp", "depth": 1, "note": "caf\\u00e9"}' } },
      ],
    },
    { role: 'tool', tool_call_id: 'toolu_1', content: 'a.txt\nb.txt' },
    { role: 'user', content: 'Go on.' },
    { role: 'user', content: 'The repository is small.' },
  ],
  tools: [
    {
      type: 'function',
      function: { name: 'ls', description: 'Lists a directory', parameters: { properties: { path: { type: 'string' } }, type: 'object' } },
    },
  ],
};

describe.each(BACKENDS)("gateway: Anthropic's Messages API (%s)", (backend) => {
  test('tokenized as the chat vLLM converts it to, forwarded as it came, answered as the worker answers', async () => {
    const g = await gatewayBehindWire(backend);
    try {
      const r = await postJson(`${g.url}/v1/messages`, AGENT_TURN, { 'x-request-id': 'agent-1' });
      expect(r.status).toBe(200);
      const answer = r.json as {
        type: string;
        role: string;
        content: { type: string; text: string }[];
        stop_reason: string;
        usage: Record<string, number>;
      };
      expect(answer).toMatchObject({ type: 'message', role: 'assistant', stop_reason: 'max_tokens', usage: { output_tokens: 4 } });
      expect(answer.content[0].type).toBe('text');
      const sent = headsOn(g.wire.sent);
      // The engine tokenizer asks the worker's /tokenize for the converted chat ...
      const tokenize = sent.filter((s) => s.line === 'POST /tokenize');
      expect(tokenize).toHaveLength(1);
      expect(JSON.parse(tokenize[0].body)).toEqual(AGENT_TURN_AS_CHAT);
      // ... whose token count is the one the worker counts for the Messages request itself.
      const counted = await postJson(`${g.url}/v1/messages/count_tokens`, AGENT_TURN);
      expect(counted.status).toBe(200);
      const { tokens } = (await postJson(`${g.url}/tokenize`, AGENT_TURN_AS_CHAT)).json as { tokens: number[] };
      expect(counted.json).toEqual({ input_tokens: tokens.length });
      expect(answer.usage.input_tokens).toBe(tokens.length);
      // The worker got the request as the client sent it.
      const forwarded = sent.find((s) => s.line === 'POST /v1/messages');
      expect(JSON.parse(forwarded?.body ?? '{}')).toEqual(AGENT_TURN);
      expect(forwarded?.head['x-request-id']).toBe('agent-1');
    } finally {
      await g.close();
    }
  });

  test("with the local tokenizer: the converted chat rendered by the model's template, the same tokens as the engine's", async () => {
    const dir = scratchDir('kvroute-messages-tok-');
    const path = writeMockTokenizer(dir);
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify(mockTokenizerConfig()));
    const exporter = new InMemorySpanExporter();
    const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
    const f = await startFleet(backend, 1, { tokenizer: path, tracing: { tracerProvider: provider } });
    const r = await postJson(`${f.url}/v1/messages`, AGENT_TURN);
    expect(r.status).toBe(200);
    // The request's span ends just after its answer is sent.
    const isRequest = (s: ReadableSpan) => s.kind === SpanKind.SERVER && s.name === 'POST /v1/messages';
    await waitFor(() => exporter.getFinishedSpans().some(isRequest), 'the request span');
    const spans = exporter.getFinishedSpans();
    expect(spans.find((s) => s.name === 'tokenize')?.attributes['kvroute.tokenizer']).toBe('local');
    expect(spans.find(isRequest)?.attributes['gen_ai.usage.input_tokens']).toBe(r.json.usage.input_tokens);
  });

  test('a conversation goes back to the worker holding its prefix; a stream passes its events through and is measured', async () => {
    const f = await startFleet(backend, 2);
    const turn1 = {
      model: 'mock-model',
      max_tokens: 8,
      system: 'You are a patient tutor who explains each step of a long derivation in plain words. '.repeat(4),
      messages: [{ role: 'user', content: 'Derive the quadratic formula, one step at a time, from the general form.' }],
    };
    const first = await postJson(`${f.url}/v1/messages`, turn1);
    expect(first.status).toBe(200);
    const worker = first.headers.get('x-kvroute-worker');
    const reply = (first.json as { content: { text: string }[] }).content[0].text;
    const turn2 = {
      ...turn1,
      stream: true,
      messages: [...turn1.messages, { role: 'assistant', content: reply }, { role: 'user', content: 'Now the next step.' }],
    };
    // Once the first turn's blocks are indexed, the second turn goes where they are.
    let streamed: Awaited<ReturnType<typeof namedEvents>> | undefined;
    for (let i = 0; i < 40; i++) {
      streamed = await namedEvents(`${f.url}/v1/messages`, turn2);
      if (Number(streamed.headers.get('x-kvroute-cached-tokens')) > 0) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    if (!streamed) throw new Error('no stream');
    expect(streamed.status).toBe(200);
    expect(streamed.headers.get('x-kvroute-worker')).toBe(worker);
    expect(Number(streamed.headers.get('x-kvroute-cached-tokens'))).toBeGreaterThan(0);
    expect(streamed.events.map((e) => e.event)).toEqual([
      'message_start',
      'content_block_start',
      ...streamed.events.filter((e) => e.event === 'content_block_delta').map(() => 'content_block_delta'),
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(streamed.events.find((e) => e.event === 'message_delta')?.data.usage).toMatchObject({ output_tokens: 8 });
    const m = await scrape(`${f.url}/metrics`);
    // Every stream's first token was seen (the time to first token), and each request counted by its worker.
    expect(m.sum('kvroute_gateway_time_to_first_token_seconds')).toBeGreaterThanOrEqual(2);
    expect(m.sum('kvroute_gateway_requests_total', { worker: worker as string, status: '200' })).toBeGreaterThanOrEqual(2);
  });

  test("refusals in Anthropic's error shape; the key also as x-api-key; the worker's own errors pass as they came", async () => {
    const f = await startFleet(backend, 1, { auth: { apiKeys: ['key-1'] } });
    const errorOf = async (r: { status: number; json: unknown }) => ({ status: r.status, body: r.json as { error: { type: string } } });
    const key = { 'x-api-key': 'key-1' };
    expect(await errorOf(await postJson(`${f.url}/v1/messages`, { model: 'mock-model', max_tokens: 1, messages: [] }))).toEqual({
      status: 401,
      body: { type: 'error', error: { type: 'authentication_error', message: 'a valid API key is required' } },
    });
    const bad = await errorOf(
      await postJson(`${f.url}/v1/messages`, { model: 'mock-model', messages: [{ role: 'user', content: 'hi' }] }, key),
    );
    expect(bad).toEqual({
      status: 400,
      body: { type: 'error', error: { type: 'invalid_request_error', message: expect.stringMatching(/max_tokens/) } },
    });
    const block = { model: 'mock-model', max_tokens: 1, messages: [{ role: 'user', content: [{ type: 'video', url: 'x' }] }] };
    expect((await errorOf(await postJson(`${f.url}/v1/messages`, block, { authorization: 'Bearer key-1' }))).body.error.type).toBe(
      'invalid_request_error',
    );
    // The worker's own refusal: an unknown model, answered by the worker (vLLM) in Anthropic's shape.
    const unknown = await errorOf(
      await postJson(`${f.url}/v1/messages`, { model: 'no-such-model', max_tokens: 1, messages: [{ role: 'user', content: 'hi' }] }, key),
    );
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ type: 'error', error: { type: 'not_found_error' } });
    // A served request, with the key as Anthropic's SDKs send it.
    expect(
      (await postJson(`${f.url}/v1/messages`, { model: 'mock-model', max_tokens: 1, messages: [{ role: 'user', content: 'hi' }] }, key))
        .status,
    ).toBe(200);
  });

  test('no worker: 503 as overloaded_error; a worker lost mid-stream ends the stream with an error event', async () => {
    const none = await startFleet(backend, 0, { workers: [] });
    const r = await postJson(`${none.url}/v1/messages`, {
      model: 'mock-model',
      max_tokens: 1,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(r.status).toBe(503);
    expect(r.json).toMatchObject({ type: 'error', error: { type: 'overloaded_error' } });

    const g = await gatewayBehindWire(backend);
    try {
      const res = await request(`${g.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'mock-model',
          max_tokens: 4000,
          stream: true,
          messages: [{ role: 'user', content: 'a long answer' }],
        }),
      });
      expect(res.statusCode).toBe(200);
      let text = '';
      let cut = false;
      for await (const chunk of res.body) {
        text += chunk.toString();
        if (!cut && text.includes('content_block_delta')) {
          cut = true;
          await g.wire.cut();
        }
      }
      const last = text.trim().split('\n\n').at(-1) as string;
      expect(last.split('\n')[0]).toBe('event: error');
      expect(JSON.parse(last.split('\n')[1].slice(6))).toMatchObject({
        type: 'error',
        error: { type: 'api_error', message: expect.stringMatching(/failed mid-stream/) },
      });
    } finally {
      await g.close();
    }
  });
});
