import { describe, expect, test } from 'vitest';
import type { MockWorker } from '../ts/index.js';
import { namedEvents, postJson } from './helpers/http.js';
import { mockWorkerSuite } from './helpers/mock-worker.js';

const { worker } = mockWorkerSuite();

const INSTRUCTIONS = 'You answer in riddles about rivers and stones.';
const FIRST = 'Where does the river go when the stones are asleep?';

/** The chat completion of the same conversation: the Responses API renders its prompt as this chat. */
async function chatOf(w: MockWorker, messages: unknown[], maxTokens: number) {
  const r = await postJson(`${w.url}/v1/chat/completions`, { messages, max_tokens: maxTokens });
  expect(r.status).toBe(200);
  return { text: r.json.choices[0].message.content as string, promptTokens: r.json.usage.prompt_tokens as number };
}

describe('mock worker: the Responses API', () => {
  test("a response is the chat answer to instructions + input; a follow-up's prompt repeats the stored conversation, found cached", async () => {
    const w = await worker({ responsesStore: true });
    const first = await postJson(`${w.url}/v1/responses`, { input: FIRST, instructions: INSTRUCTIONS, max_output_tokens: 8 });
    expect(first.status).toBe(200);
    const conversation = [
      { role: 'system', content: INSTRUCTIONS },
      { role: 'user', content: FIRST },
    ];
    const chat = await chatOf(w, conversation, 8);
    // The mock model never ends its message itself: it reaches max_output_tokens, which vLLM reports as incomplete.
    expect(first.json).toMatchObject({
      object: 'response',
      status: 'incomplete',
      incomplete_details: { reason: 'max_output_tokens' },
      // The sampling values resolved, as vLLM's response repeats them.
      temperature: 1,
      top_p: 1,
      top_logprobs: null,
      service_tier: 'auto',
      truncation: 'disabled',
      model: 'mock-model',
      instructions: INSTRUCTIONS,
      previous_response_id: null,
      output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: chat.text }] }],
      usage: { input_tokens: chat.promptTokens, output_tokens: 8, total_tokens: chat.promptTokens + 8 },
    });
    expect(first.json.id).toMatch(/^resp_[0-9a-f]{32}$/);
    // vLLM's continuation: the stored messages (its instructions too), the answer, then the new input.
    const second = await postJson(`${w.url}/v1/responses`, {
      input: 'And then?',
      previous_response_id: first.json.id,
      max_output_tokens: 6,
    });
    expect(second.status).toBe(200);
    const followed = await chatOf(
      w,
      [...conversation, { role: 'assistant', content: chat.text }, { role: 'user', content: 'And then?' }],
      6,
    );
    expect(second.json.output[0].content[0].text).toBe(followed.text);
    expect(second.json.usage.input_tokens).toBe(followed.promptTokens);
    // The first turn's prompt blocks (up to its generation prompt) were cached by the first request.
    expect(second.json.usage.input_tokens_details.cached_tokens).toBeGreaterThanOrEqual(Math.floor(FIRST.length / 4) * 4);
    expect(second.json.previous_response_id).toBe(first.json.id);
    const got = await fetch(`${w.url}/v1/responses/${second.json.id}`);
    expect([got.status, ((await got.json()) as { output: unknown }).output]).toEqual([200, second.json.output]);
    const cancel = await postJson(`${w.url}/v1/responses/${first.json.id}/cancel`, {});
    expect([cancel.status, cancel.json.error.message]).toEqual([400, 'Cannot cancel a synchronous response.']);
    const unknown = await postJson(`${w.url}/v1/responses`, { input: 'x', previous_response_id: 'resp_nope' });
    expect([unknown.status, unknown.json.error]).toEqual([
      404,
      { message: "Response with id 'resp_nope' not found.", type: 'NotFoundError', param: null, code: 404 },
    ]);
    expect((await fetch(`${w.url}/v1/responses/resp_nope`)).status).toBe(404);
    // store: false is not kept; a client's request_id names the response.
    const unstored = await postJson(`${w.url}/v1/responses`, { input: FIRST, store: false, request_id: 'resp_mine', max_output_tokens: 2 });
    expect([unstored.status, unstored.json.id]).toEqual([200, 'resp_mine']);
    expect((await fetch(`${w.url}/v1/responses/resp_mine`)).status).toBe(404);
  });

  test('a stream is named, numbered events whose deltas make the whole answer, ending in response.completed with the usage', async () => {
    const w = await worker({ responsesStore: true });
    const whole = await postJson(`${w.url}/v1/responses`, { input: FIRST, max_output_tokens: 7 });
    const streamed = await namedEvents(`${w.url}/v1/responses`, { input: FIRST, max_output_tokens: 7, stream: true });
    expect([streamed.status, streamed.headers.get('content-type')]).toEqual([200, 'text/event-stream']);
    const names = streamed.events.map((e) => e.event);
    expect(names).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      ...Array(7).fill('response.output_text.delta'),
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(streamed.events.map((e) => e.data.sequence_number)).toEqual(names.map((_, i) => i));
    expect(streamed.events.every((e) => e.data.type === e.event)).toBe(true);
    const text = whole.json.output[0].content[0].text;
    const deltas = streamed.events.filter((e) => e.event === 'response.output_text.delta').map((e) => e.data.delta);
    expect(deltas.join('')).toBe(text);
    expect(streamed.events[0].data.response).toMatchObject({ status: 'in_progress', output: [], usage: null });
    const done = streamed.events.at(-1)?.data.response;
    // vLLM's last event is response.completed whatever the status.
    expect(done).toMatchObject({ status: 'incomplete', output: [{ content: [{ text }] }], usage: { output_tokens: 7 } });
    expect(done.usage.input_tokens_details.cached_tokens).toBeGreaterThan(0);
    // The streamed response is stored like a whole one.
    expect((await fetch(`${w.url}/v1/responses/${done.id}`)).status).toBe(200);
  });

  test("without the store (vLLM's default) nothing is kept: `store` is ignored, a follow-up is 404, background is refused", async () => {
    const w = await worker();
    const r = await postJson(`${w.url}/v1/responses`, { input: FIRST, max_output_tokens: 2 });
    expect(r.status).toBe(200);
    expect((await fetch(`${w.url}/v1/responses/${r.json.id}`)).status).toBe(404);
    const follow = await postJson(`${w.url}/v1/responses`, { input: 'more', previous_response_id: r.json.id });
    expect(follow.status).toBe(404);
    const background = await postJson(`${w.url}/v1/responses`, { input: FIRST, background: true });
    expect([background.status, background.json.error.message]).toEqual([
      400,
      'This vLLM engine does not support `store=True` and therefore does not support the background mode.',
    ]);
  });

  test('input items become chat messages: messages with parts, tool calls and their outputs; reasoning is left out', async () => {
    const w = await worker();
    const input = [
      { role: 'user', content: [{ type: 'input_text', text: 'What is the weather?' }] },
      { type: 'reasoning', id: 'rs_1', summary: [] },
      { type: 'function_call', call_id: 'call_1', name: 'weather', arguments: '{"city":"Oslo"}' },
      { type: 'function_call_output', call_id: 'call_1', output: 'rain' },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'It rains.' }] },
      { role: 'user', content: 'Thanks' },
    ];
    const r = await postJson(`${w.url}/v1/responses`, { input, max_output_tokens: 4 });
    expect(r.status).toBe(200);
    const chat = await chatOf(
      w,
      [
        { role: 'user', content: [{ type: 'text', text: 'What is the weather?' }] },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }],
        },
        { role: 'tool', tool_call_id: 'call_1', content: 'rain' },
        { role: 'assistant', content: 'It rains.' },
        { role: 'user', content: 'Thanks' },
      ],
      4,
    );
    expect([r.json.usage.input_tokens, r.json.output[0].content[0].text]).toEqual([chat.promptTokens, chat.text]);
  });

  test.each([
    [{}, 'input must be a non-empty string or a non-empty list of items'],
    [{ input: '' }, 'input must be a non-empty string or a non-empty list of items'],
    [{ input: [] }, 'input must be a non-empty string or a non-empty list of items'],
    [{ input: ['hi'] }, 'input[0] must be an object'],
    [{ input: [{ type: 'web_search_call' }] }, 'input[0]: items of type "web_search_call" are not supported'],
    [{ input: [{ content: 'no role' }] }, 'input[0].role must be a string'],
    [{ input: 'x', instructions: 3 }, 'instructions must be a string'],
    [{ input: 'x', tools: [{ type: 'function', name: 'f' }] }, 'Tool use is not supported in Responses API without Harmony'],
    [{ input: 'x', max_output_tokens: 0 }, 'max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)'],
    [{ input: 'x', max_output_tokens: 1.5 }, 'max_output_tokens must be an integer, got 1.5'],
    [{ input: 'x', temperature: 3 }, 'temperature must be in [0, 2], got 3.0. (parameter=temperature, value=3.0)'],
    [{ input: 'x', top_p: 0 }, 'top_p must be in (0, 1], got 0.0. (parameter=top_p, value=0.0)'],
    [{ input: 'x', prompt: { id: 'pmpt_1' } }, 'prompt template is not supported (parameter=prompt)'],
    [
      { input: 'x', include: ['message.output_text.logprobs'], top_logprobs: 21 },
      'Requested sample logprobs of 21, which is greater than max allowed: 20',
    ],
    [
      { input: 'x', include: ['message.output_text.logprobs'], top_logprobs: -1 },
      'Requested sample logprobs of 256, which is greater than max allowed: 20',
    ],
    [{ input: 'x', include: ['message.output_text.logprobs'], top_logprobs: -2 }, 'logprobs must be non-negative or -1, got -2.'],
    [{ input: 'x', stream: 'yes' }, 'stream must be a boolean'],
    [{ input: 'x', previous_response_id: 7 }, 'previous_response_id must be a string'],
  ])('bad request %j is 400 with its reason', async (body, reason) => {
    const w = await worker({ responsesStore: true });
    const r = await postJson(`${w.url}/v1/responses`, body);
    expect(r.status).toBe(400);
    expect(r.json.error.message).toMatch(reason);
    expect(w.stats().finished).toEqual([0]);
  });

  test.each([[{ input: 'x', model: 'other' }], [{ input: [], model: 'other' }]])(
    "a model the worker does not serve is vLLM's 404, checked first: %j",
    async (body) => {
      const w = await worker({ responsesStore: true });
      const r = await postJson(`${w.url}/v1/responses`, body);
      expect([r.status, r.json.error]).toEqual([
        404,
        { message: 'The model `other` does not exist.', type: 'NotFoundError', param: null, code: 404 },
      ]);
      expect(w.stats().finished).toEqual([0]);
    },
  );

  test('the response repeats the sampling values; include asks for logprobs, whole and streamed, as vLLM gives them', async () => {
    const w = await worker();
    const body = {
      input: 'hello',
      max_output_tokens: 4,
      temperature: 0.5,
      top_p: 0.9,
      user: 'u1',
      include: ['message.output_text.logprobs'],
      top_logprobs: 2,
    };
    const r = await postJson(`${w.url}/v1/responses`, body);
    expect(r.json).toMatchObject({ temperature: 0.5, top_p: 0.9, user: 'u1', top_logprobs: 2 });
    const part = r.json.output[0].content[0];
    expect(part.logprobs.map((e: { token: string }) => e.token).join('')).toBe(part.text);
    for (const e of part.logprobs) {
      expect(e.bytes).toEqual([...Buffer.from(e.token)]);
      expect(e.top_logprobs).toHaveLength(2);
      expect(e.top_logprobs[0]).toEqual({ token: e.token, logprob: e.logprob, bytes: e.bytes });
    }
    const streamed = await namedEvents(`${w.url}/v1/responses`, { ...body, stream: true });
    const deltas = streamed.events.filter((e) => e.event === 'response.output_text.delta').map((e) => e.data.logprobs);
    // The same values per token; a delta's logprobs carry no bytes.
    expect(deltas).toEqual(
      part.logprobs.map((e: { token: string; logprob: number; top_logprobs: { token: string; logprob: number }[] }) => [
        { token: e.token, logprob: e.logprob, top_logprobs: e.top_logprobs.map((t) => ({ token: t.token, logprob: t.logprob })) },
      ]),
    );
    // Without include, none.
    const plain = await postJson(`${w.url}/v1/responses`, { input: 'hello', max_output_tokens: 2 });
    expect([plain.json.output[0].content[0].logprobs, plain.json.top_logprobs]).toEqual([null, null]);
  });
});
