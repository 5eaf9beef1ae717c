import { describe, expect, test } from 'vitest';
import { closeFleetsAfterEach, startWorker } from './helpers/gateway.js';
import { postJson, sse } from './helpers/http.js';
import { waitFor } from './helpers/wait.js';

closeFleetsAfterEach();

describe("the mock worker's /generate (SGLang's native API)", () => {
  test('answers {text, output_ids, meta_info}; a repeated prompt reports its cached tokens; max_new_tokens defaults to 128', async () => {
    const w = await startWorker();
    const input = Array.from({ length: 40 }, (_, i) => 65 + (i % 26));
    const first = await postJson(`${w.url}/generate`, { input_ids: input, sampling_params: { max_new_tokens: 3 }, rid: 'a' });
    expect(first.status).toBe(200);
    expect(Object.keys(first.json)).toEqual(['text', 'output_ids', 'meta_info']);
    expect(first.json.output_ids).toHaveLength(3);
    expect(first.json.meta_info).toMatchObject({
      id: 'a',
      finish_reason: { type: 'length', length: 3 },
      prompt_tokens: 40,
      completion_tokens: 3,
      cached_tokens: 0,
    });
    const again = await postJson(`${w.url}/generate`, { input_ids: input, sampling_params: { max_new_tokens: 3 } });
    // The same prompt: the same output, its full blocks (less the last token's) cached.
    expect(again.json.output_ids).toEqual(first.json.output_ids);
    expect(again.json.meta_info.cached_tokens).toBe(32);
    expect(again.json.meta_info.id).toMatch(/^[0-9a-f]{32}$/);
    const text = await postJson(`${w.url}/generate`, { text: 'hello there' });
    expect(text.json.meta_info.completion_tokens).toBe(128);
  });

  test('streams the text and output ids so far in each event, the finish reason in the last, then [DONE]', async () => {
    const w = await startWorker({ streamInterval: 2 });
    const r = await sse(`${w.url}/generate`, { text: 'stream me', sampling_params: { max_new_tokens: 5 }, stream: true });
    expect(r.events.at(-1)).toBe('[DONE]');
    const events = r.events.slice(0, -1) as { text: string; output_ids: number[]; meta_info: Record<string, unknown> }[];
    // The first token at once, then every second one, the last with the rest.
    expect(events.map((e) => e.output_ids.length)).toEqual([1, 3, 5]);
    expect(events.map((e) => e.meta_info.finish_reason)).toEqual([null, null, { type: 'length', length: 5 }]);
    for (const [i, e] of events.entries()) if (i > 0) expect(e.text.startsWith(events[i - 1].text)).toBe(true);
  });

  test("a batch's answer is a list in its order; streamed, each event names its prompt's index, and [DONE] comes after the last", async () => {
    const w = await startWorker();
    const batch = {
      input_ids: [
        [1, 2, 3, 4],
        [5, 6, 7],
      ],
      sampling_params: [{ max_new_tokens: 2 }, { max_new_tokens: 3 }],
      rid: ['x', 'y'],
    };
    const whole = await postJson(`${w.url}/generate`, batch);
    expect(whole.status).toBe(200);
    expect(
      whole.json.map((a: { meta_info: Record<string, unknown> }) => [
        a.meta_info.id,
        a.meta_info.prompt_tokens,
        a.meta_info.completion_tokens,
      ]),
    ).toEqual([
      ['x', 4, 2],
      ['y', 3, 3],
    ]);
    const streamed = await sse(`${w.url}/generate`, { text: ['one', 'two'], sampling_params: { max_new_tokens: 2 }, stream: true });
    expect(streamed.events.at(-1)).toBe('[DONE]');
    const events = streamed.events.slice(0, -1) as { index: number; meta_info: { finish_reason: unknown } }[];
    expect(
      events
        .filter((e) => e.meta_info.finish_reason !== null)
        .map((e) => e.index)
        .sort(),
    ).toEqual([0, 1]);
    expect(new Set(events.map((e) => e.index))).toEqual(new Set([0, 1]));
    const mismatched = await postJson(`${w.url}/generate`, { text: ['a', 'b'], sampling_params: [{}] });
    expect([mismatched.status, mismatched.json.error.message]).toEqual([400, 'sampling_params has 1 entries for 2 prompts']);
  });

  test('/abort_request with abort_all ends a streamed generation: its last event says abort, then [DONE]', async () => {
    const w = await startWorker({ speedup: 0.05 });
    const streamed = sse(`${w.url}/generate`, { input_ids: [1, 2, 3, 4, 5], sampling_params: { max_new_tokens: 500 }, stream: true });
    await waitFor(() => w.stats().running.some((n) => n > 0), 'the generation running');
    const aborted = await fetch(`${w.url}/abort_request`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"abort_all":true}',
    });
    expect(aborted.status).toBe(200);
    const r = await streamed;
    expect(r.events.at(-1)).toBe('[DONE]');
    const last = r.events.at(-2) as { meta_info: { finish_reason: { type: string }; completion_tokens: number } };
    expect(last.meta_info.finish_reason.type).toBe('abort');
    expect(last.meta_info.completion_tokens).toBeLessThan(500);
    expect(w.stats().running.reduce((a, b) => a + b, 0)).toBe(0);
  });

  test('refuses what it cannot run with 400: both prompts or none, n above 1, embeddings', async () => {
    const w = await startWorker();
    const bad: [unknown, RegExp][] = [
      [{ text: 'a', input_ids: [1] }, /exactly one of text and input_ids/],
      [{}, /exactly one of text and input_ids/],
      [{ text: 'a', sampling_params: { n: 2 } }, /one sequence per prompt/],
      [{ input_embeds: [[0.5]] }, /not input_embeds/],
      [{ text: 'a', sampling_params: { max_new_tokens: 0 } }, /max_new_tokens must be a positive integer/],
    ];
    for (const [body, message] of bad) {
      const r = await postJson(`${w.url}/generate`, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.error.message, JSON.stringify(body)).toMatch(message);
    }
  });
});
