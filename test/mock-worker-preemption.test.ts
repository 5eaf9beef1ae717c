/**
 * The mock worker when its KV blocks run out: it preempts a running request (the newest, or with
 * `preemptionMode: 'fifo'` the oldest), which resumes after recomputing; each client still gets
 * its whole answer once, and `/metrics` counts the preemptions under vLLM's name.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { type PreemptionMode, startMockWorker } from '../ts/index.js';
import { ROOT, requireDist } from './helpers/dist.js';
import { postJson, sse } from './helpers/http.js';
import { mockWorkerSuite } from './helpers/mock-worker.js';
import { scrape } from './helpers/prometheus.js';

const { worker } = mockWorkerSuite();

/** Six prompts of 5 mock tokens (one a character), each its own: 6 × (5 + 24 output tokens) need 48 blocks of 4, twice the pool. */
const PROMPTS = Array.from({ length: 6 }, (_, i) => `${i}: hi`);
const MAX_TOKENS = 24;

describe.each(['lifo', 'fifo'] as PreemptionMode[])('mock worker preemption (%s)', (preemptionMode) => {
  test('a pool too small for the batch preempts; every stream still carries its whole answer once', async () => {
    const roomy = await worker({ seed: 3 });
    const alone = await Promise.all(
      PROMPTS.map(
        async (prompt) => (await postJson(`${roomy.url}/v1/completions`, { prompt, max_tokens: MAX_TOKENS, return_token_ids: true })).json,
      ),
    );
    const tight = await worker({ seed: 3, numGpuBlocks: 24, preemptionMode });
    const streams = await Promise.all(
      PROMPTS.map((prompt) => sse(`${tight.url}/v1/completions`, { prompt, max_tokens: MAX_TOKENS, stream: true, return_token_ids: true })),
    );
    streams.forEach((s, i) => {
      const ids = s.events.filter((e) => e !== '[DONE]' && e.choices.length === 1).flatMap((e) => e.choices[0].token_ids ?? []);
      expect(ids, PROMPTS[i]).toEqual(alone[i].choices[0].token_ids);
    });
    const stats = tight.stats();
    expect(stats.preemptions).toBeGreaterThan(0);
    expect((await scrape(`${tight.url}/metrics`)).sum('vllm:num_preemptions_total')).toBe(stats.preemptions);
    expect(roomy.stats().preemptions).toBe(0);
  });
});

describe('the preemptionMode option of the mock worker', () => {
  test('an unknown mode is refused', async () => {
    await expect(startMockWorker({ port: 0, preemptionMode: 'newest' as never })).rejects.toMatchObject({
      code: 'ERR_INVALID_ARG',
      message: expect.stringContaining("opts.preemptionMode must be 'lifo' or 'fifo'"),
    });
  });

  test('kvroute mock-worker --preemption-mode: a bad value is named as the flag', () => {
    requireDist();
    const r = spawnSync(process.execPath, [join(ROOT, 'dist', 'cli.js'), 'mock-worker', '--port', '0', '--preemption-mode', 'oldest'], {
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain("--preemption-mode must be 'lifo' or 'fifo'");
  });
});
