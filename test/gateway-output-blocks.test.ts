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

describe.each(BACKENDS)('gateway output-block tracking (%s)', (backend) => {
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
