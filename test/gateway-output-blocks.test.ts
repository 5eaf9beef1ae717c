/**
 * The gateway feeds output-block tracking (`router.routerTrackOutputBlocks`): while a stream
 * runs, each token it passes on is reported to the router, so the worker's decode load grows
 * with the output, and a request's `max_tokens` decays the blocks it alone holds as the output
 * nears it. Real mock workers (speedup 1, so a stream lasts long enough to look at mid-way)
 * behind a real gateway, on both backends.
 */
import { describe, expect, test } from 'vitest';
import { BACKENDS } from './helpers/backends.js';
import type { TestFleet } from './helpers/gateway.js';
import { closeFleetsAfterEach, startFleet } from './helpers/gateway.js';
import { sse } from './helpers/http.js';
import { waitFor } from './helpers/wait.js';

closeFleetsAfterEach();

/** 32 bytes: two blocks of the mock's byte tokenizer at block size 16. */
const PROMPT = 'The KV cache router sends this. ';

/**
 * Streams a completion (with a stop string, if given) through the gateway until `tokens` token chunks have arrived, then
 * returns the worker's active blocks as the gateway's router counts them, and stops the stream.
 */
async function activeBlocksMidStream(f: TestFleet, maxTokens: number, tokens: number, stop?: string): Promise<number | undefined> {
  const abort = new AbortController();
  const res = await fetch(`${f.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: PROMPT, max_tokens: maxTokens, stream: true, ...(stop ? { stop } : {}) }),
    signal: abort.signal,
  });
  expect(res.status).toBe(200);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = '';
  let seen = 0;
  while (seen < tokens) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stream ended after ${seen} token chunks`);
    text += decoder.decode(value, { stream: true });
    const events = text.split('\n\n');
    text = events.pop() ?? '';
    // A chunk per generated token (its text maybe held back while a stop string may still match).
    for (const e of events) if (e.startsWith('data: {') && JSON.parse(e.slice(6)).choices?.length === 1) seen++;
  }
  const load = f.gateway.router.stats().load;
  abort.abort();
  await reader.cancel().catch(() => undefined);
  return load[0]?.activeBlocks;
}

/**
 * Streams `body` (a completion, `n` choices) through the gateway until every choice has shown
 * `chars` characters (the mock's tokens are one character each, no stop set), then returns the
 * worker's active blocks as the gateway's router counts them and the chunks the client got.
 */
async function activeBlocksAfterText(f: TestFleet, body: Record<string, unknown>, chars: number) {
  const abort = new AbortController();
  const res = await fetch(`${f.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: PROMPT, max_tokens: 1000, stream: true, ...body }),
    signal: abort.signal,
  });
  expect(res.status).toBe(200);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  const shown = new Map<number, number>();
  const chunks: { choices: { index: number; text: string }[]; usage?: { completion_tokens: number } }[] = [];
  const n = (body.n as number | undefined) ?? 1;
  let text = '';
  while (shown.size < n || [...shown.values()].some((c) => c < chars)) {
    const { value, done } = await reader.read();
    if (done) throw new Error('the stream ended early');
    text += decoder.decode(value, { stream: true });
    const events = text.split('\n\n');
    text = events.pop() ?? '';
    for (const e of events) {
      if (!e.startsWith('data: {')) continue;
      const chunk = JSON.parse(e.slice(6));
      chunks.push(chunk);
      for (const c of chunk.choices) shown.set(c.index, (shown.get(c.index) ?? 0) + c.text.length);
    }
  }
  const load = f.gateway.router.stats().load;
  abort.abort();
  await reader.cancel().catch(() => undefined);
  return { blocks: load[0]?.activeBlocks, chunks };
}

describe.each(BACKENDS)('gateway output-block tracking (%s)', (backend) => {
  test('an engine that streams several tokens a chunk is counted by its running usage, which the client gets only when it asks', async () => {
    // vLLM's --stream-interval 4: the first token alone, then 4 a chunk (speculative decoding looks the same).
    const f = await startFleet(backend, 1, { router: { routerTrackOutputBlocks: true } }, { speedup: 1, streamInterval: 4 });
    const freed = () => waitFor(() => f.gateway.router.stats().load.length === 0, 'the stopped stream is freed');
    // 49 tokens in 13 chunks: ceil((32 + 49) / 16) = 6 blocks (a token a chunk: 13, 3 blocks).
    const one = await activeBlocksAfterText(f, {}, 49);
    expect(one.blocks).toBeGreaterThanOrEqual(6);
    expect(one.chunks.filter((c) => c.usage !== undefined)).toEqual([]);
    // Two choices of 25 tokens each, summed: ceil((32 + 50) / 16) = 6 blocks (the larger choice's count alone: 4).
    await freed();
    const two = await activeBlocksAfterText(f, { n: 2 }, 25);
    expect(two.blocks).toBeGreaterThanOrEqual(6);
    expect(two.chunks.filter((c) => c.usage !== undefined)).toEqual([]);
    // A client that asks for the last chunk's usage gets that alone; one that asks for running usage gets it in every chunk.
    const body = { prompt: PROMPT, max_tokens: 9, stream: true };
    const last = await sse(`${f.url}/v1/completions`, { ...body, stream_options: { include_usage: true } });
    expect(last.events.map((c) => (c === '[DONE]' ? c : [c.choices.length, c.usage?.completion_tokens]))).toEqual([
      [1, undefined],
      [1, undefined],
      [1, undefined],
      [0, 9],
      '[DONE]',
    ]);
    const running = await sse(`${f.url}/v1/completions`, {
      ...body,
      stream_options: { include_usage: true, continuous_usage_stats: true },
    });
    expect(running.events.map((c) => (c === '[DONE]' ? c : c.usage.completion_tokens))).toEqual([1, 5, 9, 9, '[DONE]']);
    // A batch of prompts (each its own upstream stream) likewise.
    const batch = await sse(`${f.url}/v1/completions`, { ...body, prompt: [PROMPT, 'another prompt'] });
    const batchChunks = batch.events.filter((c) => c !== '[DONE]');
    expect(batchChunks.map((c) => c.choices[0].text).join('')).toHaveLength(18);
    expect(batchChunks.filter((c) => c.usage !== undefined)).toEqual([]);
  });

  test('speculative decoding: bursts of a step are counted whole', async () => {
    // Three drafts always accepted: 4 tokens a step, each step one chunk.
    const speculative = { draftTokens: 3, acceptRates: [1, 1, 1] };
    const f = await startFleet(backend, 1, { router: { routerTrackOutputBlocks: true } }, { speedup: 1, speculative });
    // 48 tokens in 12 chunks: ceil((32 + 48) / 16) = 5 blocks (a token a chunk: 12, 3 blocks).
    const { blocks, chunks } = await activeBlocksAfterText(f, {}, 48);
    expect(blocks).toBeGreaterThanOrEqual(5);
    const sizes = chunks.filter((c) => c.choices.length === 1).map((c) => c.choices[0].text.length);
    expect(sizes.length).toBeGreaterThanOrEqual(12);
    expect(new Set(sizes)).toEqual(new Set([4]));
    expect(chunks.filter((c) => c.usage !== undefined)).toEqual([]);
  });

  test('a stream adds its output blocks to its worker decode load; max_tokens decays them near the end', async () => {
    const tracked = await startFleet(backend, 1, { router: { routerTrackOutputBlocks: true } }, { speedup: 1 });
    // 48 tokens or a few more: ceil((32 + 48) / 16) = 5 blocks, barely decayed toward 1,000.
    expect(await activeBlocksMidStream(tracked, 1000, 48)).toBeGreaterThanOrEqual(5);
    await waitFor(() => tracked.gateway.router.stats().load.length === 0, 'the stopped stream is freed');
    // 50 of 64: the decay is set where a block boundary is crossed, last at 49 tokens (until
    // 65: ceil(81 / 16) = 6 blocks), each then weighing 1 - 49/64: 1.41 in all, rounded to 1.
    expect(await activeBlocksMidStream(tracked, 64, 50)).toBe(1);

    // A stop string that never matches: vLLM (and the mock) hold back its length less one
    // character, so the first 15 token chunks have empty text. They are tokens all the same:
    // 49 of them, ceil((32 + 49) / 16) = 6 blocks (counting text alone, 34: 5 blocks).
    await waitFor(() => tracked.gateway.router.stats().load.length === 0, 'the stopped stream is freed');
    expect(await activeBlocksMidStream(tracked, 1000, 49, 'z'.repeat(16))).toBeGreaterThanOrEqual(6);

    const untracked = await startFleet(backend, 1, {}, { speedup: 1 });
    expect(await activeBlocksMidStream(untracked, 1000, 48), 'the prompt blocks alone').toBe(2);
  });
});
