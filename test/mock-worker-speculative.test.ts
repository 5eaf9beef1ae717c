/**
 * The mock worker with speculative decoding (MTP, EAGLE): an engine step emits the sampled token
 * plus the drafts accepted, and the step's tokens go out in one streamed chunk, as vLLM streams a
 * step's output; `/metrics` counts drafts and acceptances under vLLM's `spec_decode_*` names.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { KvRouteError } from '../ts/index.js';
import { ROOT, requireDist } from './helpers/dist.js';
import { type Json, namedEvents, postJson, sse } from './helpers/http.js';
import { mockWorkerSuite } from './helpers/mock-worker.js';
import { scrape } from './helpers/prometheus.js';
import { Rng } from './helpers/random.js';

const { worker } = mockWorkerSuite();

/** Three drafts, always accepted: 4 tokens a step (fewer only at the end). */
const ALL_ACCEPTED = { draftTokens: 3, acceptRates: [1, 1, 1] };
const CONTINUOUS = { include_usage: true, continuous_usage_stats: true };

const tokenChunks = (events: Json[]) => events.filter((e) => e !== '[DONE]' && e.choices.length === 1 && e.choices[0].token_ids?.length);

describe('mock worker with speculative decoding', () => {
  test("a step's tokens stream as one chunk, with their ids and the running usage; the answer is the same", async () => {
    const w = await worker({ speculative: ALL_ACCEPTED });
    const body = { prompt: 'hello', max_tokens: 10, return_token_ids: true };
    const whole = (await postJson(`${w.url}/v1/completions`, body)).json.choices[0];
    const chunks = tokenChunks((await sse(`${w.url}/v1/completions`, { ...body, stream: true, stream_options: CONTINUOUS })).events);
    expect(chunks.map((c) => [c.choices[0].token_ids.length, c.usage.completion_tokens])).toEqual([
      [4, 4],
      [4, 8],
      [2, 10],
    ]);
    expect(chunks.flatMap((c) => c.choices[0].token_ids)).toEqual(whole.token_ids);
    expect(chunks.map((c) => c.choices[0].text).join('')).toBe(whole.text);
    // A chat's steps likewise, after its role chunk; the Responses API's deltas too.
    const chat = (await sse(`${w.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }], max_tokens: 6, stream: true }))
      .events;
    const contents = chat.filter((e) => e !== '[DONE]' && e.choices[0]?.delta?.content).map((e) => e.choices[0].delta.content.length);
    expect(contents).toEqual([4, 2]);
    const responses = await namedEvents(`${w.url}/v1/responses`, { input: 'hi', max_output_tokens: 9, stream: true });
    const deltas = responses.events.filter((e) => e.event === 'response.output_text.delta').map((e) => (e.data.delta as string).length);
    expect(deltas).toEqual([4, 4, 1]);
  });

  test('with a stream interval, a chunk is due once per step: the first at once, then when the interval is reached', async () => {
    const w = await worker({ speculative: ALL_ACCEPTED, streamInterval: 5 });
    const events = (await sse(`${w.url}/v1/completions`, { prompt: 'hello', max_tokens: 10, stream: true, return_token_ids: true })).events;
    // Steps of 4, 4 and 2 tokens: the first step's at once; 4 more are short of 5; the last step ends it.
    expect(tokenChunks(events).map((c) => c.choices[0].token_ids.length)).toEqual([4, 6]);
  });

  test("vLLM's spec_decode counters: drafts, draft tokens, and acceptances per position", async () => {
    const w = await worker({ speculative: ALL_ACCEPTED });
    await postJson(`${w.url}/v1/completions`, { prompt: 'hello', max_tokens: 10 });
    const m = await scrape(`${w.url}/metrics`);
    // Three steps of three drafts; each accepted all three (acceptance counts before the end cut the last burst).
    expect(m.sum('vllm:spec_decode_num_drafts_total')).toBe(3);
    expect(m.sum('vllm:spec_decode_num_draft_tokens_total')).toBe(9);
    expect(m.sum('vllm:spec_decode_num_accepted_tokens_total')).toBe(9);
    expect([0, 1, 2].map((p) => m.sum('vllm:spec_decode_num_accepted_tokens_per_pos_total', { position: String(p) }))).toEqual([3, 3, 3]);
    expect(w.stats().speculative).toEqual({ drafts: 3, draftTokens: 9, acceptedTokens: 9 });
    const plain = await worker();
    expect((await scrape(`${plain.url}/metrics`)).has('vllm:spec_decode_num_drafts_total')).toBe(false);
    expect(plain.stats().speculative).toBeUndefined();
  });

  test("seeded: random acceptance gives chunks of 1 to 3 tokens, and the counters' mean acceptance length near the rates'", async () => {
    const w = await worker({ speculative: { draftTokens: 2 } });
    const random = new Rng(23);
    let steps = 0;
    for (let round = 0; round < 30; round++) {
      const maxTokens = 5 + random.int(36);
      const body = { prompt: `round ${round}`, max_tokens: maxTokens, stream: true, return_token_ids: true, stream_options: CONTINUOUS };
      const chunks = tokenChunks((await sse(`${w.url}/v1/completions`, body)).events);
      const sizes = chunks.map((c) => c.choices[0].token_ids.length);
      for (const size of sizes) expect(size).toBeGreaterThanOrEqual(1);
      for (const size of sizes) expect(size).toBeLessThanOrEqual(3);
      expect(sizes.reduce((a, b) => a + b, 0)).toBe(maxTokens);
      expect(chunks.at(-1)?.usage.completion_tokens).toBe(maxTokens);
      steps += sizes.length;
    }
    const m = await scrape(`${w.url}/metrics`);
    const drafts = m.sum('vllm:spec_decode_num_drafts_total');
    expect(drafts).toBe(steps);
    const accepted = m.sum('vllm:spec_decode_num_accepted_tokens_total');
    const [first, second] = [0, 1].map((p) => m.sum('vllm:spec_decode_num_accepted_tokens_per_pos_total', { position: String(p) }));
    expect(first + second).toBe(accepted);
    expect(second).toBeLessThanOrEqual(first);
    // Dynamo's default rates (0.85, then 0.3): 1 + 0.85 + 0.85 × 0.3 = 2.105 tokens a step.
    expect(1 + accepted / drafts).toBeGreaterThan(1.8);
    expect(1 + accepted / drafts).toBeLessThan(2.4);
  });

  test('options: checked, and not with decodeSpeedup', async () => {
    await expect(worker({ speculative: { draftTokens: 9 } })).rejects.toThrow(
      /opts\.speculative\.draftTokens must be an integer in \[1, 5\]/,
    );
    await expect(worker({ speculative: { draftTokens: 2, acceptRates: [2] } })).rejects.toThrow(KvRouteError);
    await expect(worker({ speculative: { draftTokens: 2 }, decodeSpeedup: 3 })).rejects.toThrow(
      /opts\.speculative and opts\.decodeSpeedup both model/,
    );
  });

  test('the command line names the flags in its errors', () => {
    requireDist();
    const run = spawnSync(
      process.execPath,
      [join(ROOT, 'dist', 'cli.js'), 'mock-worker', '--num-speculative-tokens', '2', '--spec-accept-rates', '1.2'],
      {
        encoding: 'utf8',
      },
    );
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/--spec-accept-rates\[0\] must be a number in \[0, 1\], got 1\.2/);
    expect(spawnSync(process.execPath, [join(ROOT, 'dist', 'cli.js'), 'mock-worker', '--help'], { encoding: 'utf8' }).stdout).toMatch(
      /--num-speculative-tokens/,
    );
  });
});
