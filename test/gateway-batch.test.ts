import { describe, expect, test } from 'vitest';
import { mockTokenize } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { closeFleetsAfterEach, startFleet } from './helpers/gateway.js';
import { postJson, sse } from './helpers/http.js';
import { waitFor } from './helpers/wait.js';

closeFleetsAfterEach();

const PREFIX_A = 'Context A: the quarterly report lists revenue by region and product line. '.repeat(3);
const PREFIX_B = 'Context B: the incident log records every outage with its cause and fix. '.repeat(3);
const PROMPTS = [`${PREFIX_A}Question 1?`, `${PREFIX_B}Question 2?`, `${PREFIX_A}Question 3?`];

describe.each(BACKENDS)('gateway: a completion that batches several prompts (%s)', (backend) => {
  /**
   * A fleet whose workers 1 and 2 hold PREFIX_A and PREFIX_B. Warmed on the workers themselves:
   * through the gateway both could land on one worker, and then a batch's B prompt rightly goes
   * elsewhere (the A prompt's load booked there outweighs B's cached prefix).
   */
  const fleetWithPrefixes = async () => {
    const f = await startFleet(backend, 3);
    await postJson(`${f.workers[0].url}/v1/completions`, { prompt: `${PREFIX_A}warm`, max_tokens: 1 });
    await postJson(`${f.workers[1].url}/v1/completions`, { prompt: `${PREFIX_B}warm`, max_tokens: 1 });
    const blocks = 2 * Math.floor(PREFIX_A.length / 16);
    await waitFor(() => f.gateway.router.stats().index.blocks >= blocks, 'both prefixes to be indexed');
    return { f, workerA: '1', workerB: '2' };
  };
  /** What each prompt alone gets (the mock's output is a function of the prompt). */
  const alone = async (url: string) =>
    Promise.all(PROMPTS.map(async (prompt) => (await postJson(`${url}/v1/completions`, { prompt, max_tokens: 3 })).json.choices[0].text));

  test("each prompt goes to its own prefix's worker, and the answer is vLLM's for the batch", async () => {
    const { f, workerA, workerB } = await fleetWithPrefixes();
    const r = await postJson(`${f.url}/v1/completions`, { prompt: PROMPTS, max_tokens: 3 });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-kvroute-worker')).toBe(`${workerA},${workerB},${workerA}`);
    expect(r.json.id).toBe(`cmpl-${r.headers.get('x-kvroute-request-id')}`);
    expect(r.json.choices.map((c: { index: number }) => c.index)).toEqual([0, 1, 2]);
    expect(r.json.choices.map((c: { text: string }) => c.text)).toEqual(await alone(f.url));
    const promptTokens = PROMPTS.reduce((n, p) => n + mockTokenize(p).length, 0);
    expect(r.json.usage).toMatchObject({ prompt_tokens: promptTokens, completion_tokens: 9, total_tokens: promptTokens + 9 });
    // Each prompt was predicted its prefix; the batch reports the engines' sum, which may be more:
    // prompt 3 can also reuse what prompt 1 (same worker, same batch) stored before it ran.
    const predicted = r.headers.get('x-kvroute-cached-tokens')?.split(',').map(Number) ?? [];
    expect(predicted.every((n) => n >= Math.floor(PREFIX_A.length / 16) * 16)).toBe(true);
    expect(r.json.usage.prompt_tokens_details.cached_tokens).toBeGreaterThanOrEqual(predicted.reduce((x, y) => x + y, 0));
    expect(f.gateway.router.stats()).toMatchObject({ inFlight: 0 });
    // Token-id prompts too, under the client's request id.
    const ids = await postJson(
      `${f.url}/v1/completions`,
      {
        prompt: [
          [1, 2, 3],
          [4, 5],
        ],
        max_tokens: 1,
      },
      { 'x-request-id': 'trace-7' },
    );
    expect([ids.status, ids.json.id, ids.json.usage.prompt_tokens]).toEqual([200, 'cmpl-trace-7', 5]);
    // With n samples each, prompt i's choices are numbered from i × n, as vLLM numbers them.
    const sampled = await postJson(`${f.url}/v1/completions`, { prompt: PROMPTS.slice(0, 2), max_tokens: 3, n: 2 });
    const each = await Promise.all(
      PROMPTS.slice(0, 2).map(async (prompt) => (await postJson(`${f.url}/v1/completions`, { prompt, max_tokens: 3, n: 2 })).json.choices),
    );
    expect(sampled.json.choices).toEqual(
      each.flatMap((choices, i) => choices.map((c: { index: number }) => ({ ...c, index: i * 2 + c.index }))),
    );
  });

  test('a streamed batch interleaves the prompts event by event, with one usage chunk and one [DONE]', async () => {
    const { f } = await fleetWithPrefixes();
    const expected = await alone(f.url);
    for (const includeUsage of [true, false]) {
      const body = { prompt: PROMPTS, max_tokens: 3, stream: true, ...(includeUsage ? { stream_options: { include_usage: true } } : {}) };
      const r = await sse(`${f.url}/v1/completions`, body);
      expect(r.status).toBe(200);
      expect(r.events.filter((e) => e === '[DONE]').length).toBe(1);
      expect(r.events.at(-1)).toBe('[DONE]');
      const chunks = r.events.filter((e) => e !== '[DONE]') as {
        id: string;
        choices: { index: number; text: string }[];
        usage?: unknown;
      }[];
      expect(new Set(chunks.map((c) => c.id))).toEqual(new Set([`cmpl-${r.headers.get('x-kvroute-request-id')}`]));
      const texts = ['', '', ''];
      for (const c of chunks) for (const choice of c.choices) texts[choice.index] += choice.text;
      expect(texts).toEqual(expected);
      const usage = chunks.filter((c) => c.choices.length === 0);
      if (includeUsage) {
        expect(usage.length).toBe(1);
        expect(chunks.at(-1)?.choices).toEqual([]);
        expect(usage[0].usage).toMatchObject({ completion_tokens: 9 });
      } else expect(usage).toEqual([]);
    }
    expect(f.gateway.router.stats()).toMatchObject({ inFlight: 0 });
  });

  test("all or nothing: one prompt the engine refuses is the whole batch's answer; bad batches are the gateway's 400", async () => {
    const f = await startFleet(backend, 2, {}, { maxModelLen: 64 });
    const r = await postJson(`${f.url}/v1/completions`, { prompt: ['short', 'x'.repeat(100)], max_tokens: 2 });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toMatch(/maximum context length is 64 tokens/);
    const bad = [
      [{ prompt: Array.from({ length: 257 }, () => 'p') }, 'a request may batch at most 256 prompts, got 257'],
      [{ prompt: ['fine', [1, -2]] }, /^prompt\[1\]: prompt\[1\] must be a token id/],
    ] as const;
    for (const [body, message] of bad) {
      const answer = await postJson(`${f.url}/v1/completions`, body);
      expect(answer.status).toBe(400);
      expect(answer.json.error.message).toMatch(message);
    }
    // A model no worker serves is the request's, not one prompt's: the engine's 404, in its words.
    const unknown = await postJson(`${f.url}/v1/completions`, { prompt: ['a', 'b'], model: 'nope' });
    expect([unknown.status, unknown.json.error]).toEqual([
      404,
      { message: 'The model `nope` does not exist.', type: 'NotFoundError', param: null, code: 404 },
    ]);
    await waitFor(() => f.gateway.router.stats().inFlight === 0, 'every booking to be freed');
    const metrics = await (await fetch(`${f.url}/metrics`)).text();
    expect(metrics).toMatch(/kvroute_gateway_requests_total\{worker="\d",status="400",model="none"\} /);
  });
});
