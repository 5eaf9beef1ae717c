/**
 * How the mock worker streams, as vLLM does: a chat opens with each choice's bare role chunk,
 * and with `streamInterval` (vLLM's `--stream-interval`) a chunk carries several tokens, as an
 * engine's chunks do under speculative decoding: their text, logprobs and ids together, the usage
 * counting them all.
 */
import { describe, expect, test } from 'vitest';
import { KvRouteError, mockTokenize } from '../ts/index.js';
import { type Json, namedEvents, postJson, sse } from './helpers/http.js';
import { mockWorkerSuite } from './helpers/mock-worker.js';

const { worker } = mockWorkerSuite();

const chunksOf = (events: Json[]) => events.filter((e) => e !== '[DONE]' && e.choices.length === 1);

describe('mock worker: streamed chunks', () => {
  test('a chat stream opens with the role alone (the prompt ids, no output counted), then the tokens', async () => {
    const w = await worker();
    const messages = [{ role: 'user', content: 'hi' }];
    const body = {
      messages,
      max_tokens: 4,
      stream: true,
      return_token_ids: true,
      stream_options: { include_usage: true, continuous_usage_stats: true },
    };
    const chunks = chunksOf((await sse(`${w.url}/v1/chat/completions`, body)).events);
    const prompt = (await postJson(`${w.url}/tokenize`, { messages })).json.tokens;
    expect(chunks[0]).toMatchObject({
      choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
      usage: { prompt_tokens: prompt.length, completion_tokens: 0 },
      prompt_token_ids: prompt,
    });
    expect(chunks.slice(1).map((c) => ['role' in c.choices[0].delta, c.choices[0].token_ids.length, c.usage.completion_tokens])).toEqual([
      [false, 1, 1],
      [false, 1, 2],
      [false, 1, 3],
      [false, 1, 4],
    ]);
    // n = 2: both roles first, then each choice's tokens.
    const two = chunksOf((await sse(`${w.url}/v1/chat/completions`, { messages, max_tokens: 2, stream: true, n: 2 })).events);
    expect(two.slice(0, 2).map((c) => [c.choices[0].index, c.choices[0].delta])).toEqual([
      [0, { role: 'assistant', content: '' }],
      [1, { role: 'assistant', content: '' }],
    ]);
    expect(two.slice(2).filter((c) => 'role' in c.choices[0].delta)).toEqual([]);
    // An echo follows the role, in a chunk of its own.
    const echo = chunksOf(
      (
        await sse(`${w.url}/v1/chat/completions`, {
          messages: [...messages, { role: 'assistant', content: 'Sure: ' }],
          add_generation_prompt: false,
          continue_final_message: true,
          echo: true,
          max_tokens: 2,
          stream: true,
        })
      ).events,
    );
    expect(echo.slice(0, 2).map((c) => c.choices[0].delta)).toEqual([{ role: 'assistant', content: '' }, { content: 'Sure: ' }]);
    expect(echo).toHaveLength(4);
  });

  test('at a stream interval, chunks carry the first token, then that many, then the rest, each with its tokens logprobs, ids and usage', async () => {
    const w = await worker({ streamInterval: 4 });
    const whole = await postJson(`${w.url}/v1/completions`, { prompt: 'hello', max_tokens: 10, logprobs: 2, return_token_ids: true });
    const body = {
      prompt: 'hello',
      max_tokens: 10,
      logprobs: 2,
      return_token_ids: true,
      stream: true,
      stream_options: { include_usage: true, continuous_usage_stats: true },
    };
    const chunks = chunksOf((await sse(`${w.url}/v1/completions`, body)).events);
    const c = whole.json.choices[0];
    expect(chunks.map((e) => [e.choices[0].text, e.choices[0].token_ids, e.usage.completion_tokens, e.choices[0].finish_reason])).toEqual([
      [c.text.slice(0, 1), c.token_ids.slice(0, 1), 1, null],
      [c.text.slice(1, 5), c.token_ids.slice(1, 5), 5, null],
      [c.text.slice(5, 9), c.token_ids.slice(5, 9), 9, null],
      [c.text.slice(9), c.token_ids.slice(9), 10, 'length'],
    ]);
    // Each chunk's logprobs are its tokens', at their offsets in the text.
    const streamed = chunks.map((e) => e.choices[0].logprobs);
    for (const key of ['tokens', 'token_logprobs', 'top_logprobs', 'text_offset'])
      expect(
        streamed.flatMap((l) => l[key]),
        key,
      ).toEqual(c.logprobs[key]);
    // A chat's tokens likewise, after its role; the Responses API's deltas too.
    const chat = chunksOf(
      (
        await sse(`${w.url}/v1/chat/completions`, {
          messages: [{ role: 'user', content: 'hi' }],
          max_tokens: 6,
          stream: true,
          logprobs: true,
        })
      ).events,
    );
    expect(chat.slice(1).map((e) => [e.choices[0].delta.content.length, e.choices[0].logprobs.content.length])).toEqual([
      [1, 1],
      [4, 4],
      [1, 1],
    ]);
    const responses = await namedEvents(`${w.url}/v1/responses`, { input: 'hi', max_output_tokens: 9, stream: true });
    const deltas = responses.events.filter((e) => e.event === 'response.output_text.delta').map((e) => e.data.delta as string);
    expect(deltas.map((d) => d.length)).toEqual([1, 4, 4]);
    const done = responses.events.find((e) => e.event === 'response.completed')?.data;
    expect(deltas.join('')).toBe(done?.response.output[0].content[0].text);
    // The engine generated the same tokens: the interval changes the chunks, not the sequence.
    expect(mockTokenize(chunks.map((e) => e.choices[0].text).join(''))).toEqual(c.token_ids);
  });

  test('the interval is validated', async () => {
    for (const streamInterval of [0, 1.5, '2', -1]) {
      await expect(worker({ streamInterval } as never)).rejects.toThrow(KvRouteError);
      await expect(worker({ streamInterval } as never)).rejects.toThrow(/opts\.streamInterval must be an integer in \[1, 1048576\]/);
    }
  });
});
