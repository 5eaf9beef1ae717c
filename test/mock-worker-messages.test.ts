import { describe, expect, test } from 'vitest';
import { closeFleetsAfterEach, startWorker } from './helpers/gateway.js';
import { namedEvents, postJson } from './helpers/http.js';

closeFleetsAfterEach();

describe("the mock worker's Messages API (vLLM's /v1/messages)", () => {
  test('answers the chat the request converts to, whole or as named events with the same text and usage', async () => {
    const w = await startWorker();
    const request = {
      model: 'mock-model',
      max_tokens: 6,
      system: 'Answer in one line.',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'What is a KV cache?' }] }],
    };
    const whole = await postJson(`${w.url}/v1/messages`, request);
    expect(whole.status).toBe(200);
    // The prompt is the converted chat's: the system prompt first, the one text block as the content.
    const chat = await postJson(`${w.url}/tokenize`, {
      model: 'mock-model',
      messages: [
        { role: 'system', content: 'Answer in one line.' },
        { role: 'user', content: 'What is a KV cache?' },
      ],
    });
    expect(whole.json).toMatchObject({
      type: 'message',
      role: 'assistant',
      model: 'mock-model',
      stop_reason: 'max_tokens',
      stop_sequence: null,
      usage: { input_tokens: chat.json.count, output_tokens: 6 },
    });
    expect((await postJson(`${w.url}/v1/messages/count_tokens`, request)).json).toEqual({ input_tokens: chat.json.count });

    const { status, headers, events: streamed } = await namedEvents(`${w.url}/v1/messages`, { ...request, stream: true });
    expect([status, headers.get('content-type')]).toEqual([200, 'text/event-stream']);
    const names = streamed.map((e) => e.event);
    expect(names.slice(0, 2)).toEqual(['message_start', 'content_block_start']);
    expect(names.slice(-3)).toEqual(['content_block_stop', 'message_delta', 'message_stop']);
    expect(new Set(names.slice(2, -3))).toEqual(new Set(['content_block_delta']));
    expect(streamed[0].data.message).toMatchObject({
      role: 'assistant',
      content: [],
      usage: { input_tokens: chat.json.count, output_tokens: 0 },
    });
    const text = streamed
      .filter((e) => e.event === 'content_block_delta')
      .map((e) => (e.data.delta as { type: string; text: string }).text)
      .join('');
    // The same prompt gives the same text (the mock's output is seeded by the prompt).
    expect(text).toBe((whole.json.content as { text: string }[])[0].text);
    expect(streamed.at(-2)?.data).toMatchObject({
      delta: { stop_reason: 'max_tokens' },
      usage: { input_tokens: chat.json.count, output_tokens: 6 },
    });
  });

  test("refuses in Anthropic's error shape: a bad request 400, a model it does not serve 404", async () => {
    const w = await startWorker();
    const cases: [unknown, number, string][] = [
      [{ model: 'mock-model', messages: [{ role: 'user', content: 'hi' }] }, 400, 'invalid_request_error'],
      [{ model: 'mock-model', max_tokens: 1, messages: [{ role: 'tool', content: 'hi' }] }, 400, 'invalid_request_error'],
      [{ model: 'mock-model', max_tokens: 1, messages: 'hi' }, 400, 'invalid_request_error'],
      [{ model: 'other-model', max_tokens: 1, messages: [{ role: 'user', content: 'hi' }] }, 404, 'not_found_error'],
      [{ model: 'mock-model', max_tokens: 1_000_000, messages: [{ role: 'user', content: 'hi' }] }, 400, 'invalid_request_error'],
    ];
    for (const [body, status, type] of cases) {
      const r = await postJson(`${w.url}/v1/messages`, body);
      expect([r.status, r.json.type, r.json.error?.type]).toEqual([status, 'error', type]);
      expect(typeof r.json.error.message).toBe('string');
    }
  });
});
