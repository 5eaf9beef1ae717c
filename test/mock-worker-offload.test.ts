/**
 * The mock worker's CPU offloading (vLLM's `--kv-offloading-size`): its host-memory tier, the
 * KV events it publishes for it (medium CPU, SGLang's CPU_PINNED) through real sockets into a
 * kvroute index on both backends, and prompts that load back from host memory what the GPU
 * evicted, as kvroute's tier walk predicted.
 */
import { describe, expect, test } from 'vitest';
import {
  blockHashes,
  decodeEngineBatch,
  type EngineSource,
  encodeEngineBatch,
  type KvIndex,
  type MockWorker,
  mockTokenize,
  startMockWorker,
} from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { expectKvError } from './helpers/errors.js';
import { closeFleetsAfterEach, startFleet } from './helpers/gateway.js';
import { postJson } from './helpers/http.js';
import { mockWorkerSuite, PROMPT, textBlocks } from './helpers/mock-worker.js';
import { scrape } from './helpers/prometheus.js';
import { waitFor } from './helpers/wait.js';

const { subscribed } = mockWorkerSuite();
/** A prompt of 16 full blocks that shares no block with PROMPT (15 full blocks and a token). */
const OTHER = 'Pack my box with five dozen liquor jugs, then pack it once more.';
const BS = 4;

/** The index's view of worker 1's reach for a text: device prefix, then the host tier's continuation. */
function reach(index: KvIndex, text: string): { device: number; host: number } {
  const hashes = blockHashes(mockTokenize(text), BS, { backend: index.backend });
  const [r] = index.findTieredMatches(hashes, [{ workerId: 1 }]);
  return { device: r.device, host: r.hostPinned };
}

/** Waits until the index applied every batch the worker published; then its host tier must hold what the worker's host memory holds. */
async function settled(w: MockWorker, index: KvIndex, src: EngineSource): Promise<void> {
  await waitFor(() => src.stats().ranks[0].batches === w.stats().batchesPublished, 'every batch to reach the index');
  await index.flush();
  expect(index.stats().lowerTiers.host_pinned.blocks).toBe(w.stats().hostBlocks[0]);
}

describe.each(BACKENDS)('mock worker CPU offload into kvroute (%s)', (backend) => {
  test.each(['vllm-0.33', 'vllm-0.11', 'sglang'] as const)(
    'a prompt the GPU evicted loads back from host memory, as the tier walk predicted (%s wire)',
    async (wire) => {
      const n = textBlocks(PROMPT);
      expect([n, textBlocks(OTHER)]).toEqual([15, 16]);
      // Room for one prompt on the GPU; host memory for both.
      const { w, index, src } = await subscribed(backend, { numGpuBlocks: n + 2, cpuOffloadBlocks: 64, wire });
      await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 2 });
      await settled(w, index, src);
      expect(reach(index, PROMPT)).toEqual({ device: n, host: 0 });
      // The other prompt takes the GPU: every block of the first leaves it, and stays in host memory.
      await postJson(`${w.url}/v1/completions`, { prompt: OTHER, max_tokens: 2 });
      await settled(w, index, src);
      expect(reach(index, PROMPT)).toEqual({ device: 0, host: n });
      expect(w.stats().hostBlocks[0]).toBeGreaterThanOrEqual(n + 16);
      const again = await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 2 });
      expect(again.json.usage.prompt_tokens_details.cached_tokens).toBe(n * BS);
      expect(w.stats()).toMatchObject({ hostLoadedBlocks: n });
      // vLLM's metrics with a KV connector: the loaded tokens are external hits, not GPU ones.
      const m = await scrape(`${w.url}/metrics`);
      const prompts = 2 * mockTokenize(PROMPT).length + mockTokenize(OTHER).length;
      expect(m.sum('vllm:prefix_cache_queries_total')).toBe(prompts);
      expect(m.sum('vllm:prefix_cache_hits_total')).toBe(0);
      expect(m.sum('vllm:external_prefix_cache_queries_total')).toBe(prompts);
      expect(m.sum('vllm:external_prefix_cache_hits_total')).toBe(n * BS);
      expect(m.sum('vllm:prompt_tokens_cached_total')).toBe(n * BS);
      const bySource = (source: string) => m.sum('vllm:prompt_tokens_by_source_total', { source });
      expect([bySource('local_compute'), bySource('local_cache_hit'), bySource('external_kv_transfer')]).toEqual([
        prompts - n * BS,
        0,
        n * BS,
      ]);
      // Loaded back, the prompt is on the GPU again (the other one's blocks made room).
      await settled(w, index, src);
      expect(reach(index, PROMPT)).toEqual({ device: n, host: 0 });
      expect(reach(index, OTHER).device + reach(index, OTHER).host).toBe(16);
      const s = src.stats().ranks[0];
      expect(s).toMatchObject({ decodeErrors: 0, gaps: 0 });
      expect(Object.values(s.filtered).every((v) => v === 0)).toBe(true);
      expect(index.stats().lowerTiers.host_pinned).toMatchObject({ unanchored: 0, conflicting: 0, not_found: 0 });
    },
  );

  test("an engine restart empties host memory too, and the index drops the old incarnation's host tier", async () => {
    const n = textBlocks(PROMPT);
    const { w, index, src } = await subscribed(backend, { cpuOffloadBlocks: 64 });
    await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 2 });
    await settled(w, index, src);
    expect(reach(index, PROMPT)).toEqual({ device: n, host: 0 });
    expect(index.stats().lowerTiers.host_pinned.blocks).toBe(n);
    w.fault({ kind: 'restart' });
    await postJson(`${w.url}/v1/completions`, { prompt: OTHER, max_tokens: 2 });
    await waitFor(() => src.stats().ranks[0].restarts === 1, 'the restart');
    await settled(w, index, src);
    // Only the new incarnation's blocks: the other prompt's, on the device and in host memory.
    expect(w.stats().hostBlocks[0]).toBe(16);
    expect(reach(index, PROMPT)).toEqual({ device: 0, host: 0 });
    expect(reach(index, OTHER)).toEqual({ device: 16, host: 0 });
  });

  test("host memory's least recently used blocks leave it, and the index removes them", async () => {
    const n = textBlocks(PROMPT);
    const { w, index, src } = await subscribed(backend, { numGpuBlocks: 64, cpuOffloadBlocks: n + 1 });
    await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 2 });
    await settled(w, index, src);
    expect(w.stats().hostBlocks[0]).toBe(n);
    await postJson(`${w.url}/v1/completions`, { prompt: OTHER, max_tokens: 2 });
    await settled(w, index, src);
    // Host memory holds the other prompt's 16 blocks only; the GPU still holds both prompts.
    expect(w.stats().hostBlocks[0]).toBe(16);
    expect(index.stats().lowerTiers.host_pinned).toMatchObject({ blocks: 16, removed: n, not_found: 0 });
    expect(reach(index, PROMPT)).toEqual({ device: n, host: 0 });
    expect(reach(index, OTHER)).toEqual({ device: 16, host: 0 });
  });
});

describe.each(BACKENDS)('a gateway over offloading mock workers (%s)', (backend) => {
  closeFleetsAfterEach();
  const ids = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

  test('a prompt whose worker offloaded it to host memory goes back to that worker, which loads it', async () => {
    // Blocks of 16 tokens: the GPU has room for one prompt, host memory for several.
    const f = await startFleet(backend, 2, {}, { numGpuBlocks: 17, cpuOffloadBlocks: 256 });
    const prompt = ids(1000, 15 * 16 + 1);
    const first = await postJson(`${f.url}/v1/completions`, { prompt, max_tokens: 2 });
    const holder = Number(first.headers.get('x-kvroute-worker'));
    // Another prompt straight to that worker pushes the first out of its GPU, into host memory.
    await postJson(`${f.workers[holder - 1].url}/v1/completions`, { prompt: ids(5000, 16 * 16), max_tokens: 2 });
    const hashes = blockHashes(prompt, 16, { backend });
    await waitFor(async () => {
      await f.gateway.router.flush();
      const [r] = f.gateway.router.index.findTieredMatches(hashes, [{ workerId: holder }]);
      return r.device === 0 && r.hostPinned === 15;
    }, "the holder's offload to reach the gateway");
    // The router's decision weighs the host blocks for the cost (0.75 each, Dynamo's default).
    const decision = await f.gateway.router.route({ requestId: 'probe', tokens: prompt });
    f.gateway.router.free('probe');
    expect([decision.workerId, decision.overlapBlocks, decision.cachedTokens]).toEqual([BigInt(holder), 0, Math.round(0.75 * 15 * 16)]);
    const again = await postJson(`${f.url}/v1/completions`, { prompt, max_tokens: 2 });
    // The host blocks' credit (0.75 each, Dynamo's default) outweighs an idle worker's nothing.
    expect(Number(again.headers.get('x-kvroute-worker'))).toBe(holder);
    expect(f.workers[holder - 1].stats().hostLoadedBlocks).toBe(15);
    // The gateway expects the engine to count the blocks it loads back as cached, as it does:
    // unweighted.
    expect(again.json.usage.prompt_tokens_details.cached_tokens).toBe(15 * 16);
    expect(Number(again.headers.get('x-kvroute-cached-tokens'))).toBe(15 * 16);
    // Both requests' predictions matched the engines' reports.
    expect((await scrape(`${f.url}/metrics`)).sum('kvroute_gateway_cache_predictions_total', { outcome: 'exact' })).toBe(2);
  });
});

describe('mock worker CPU offload: loads run beside the passes', () => {
  const { worker } = mockWorkerSuite();
  const n = textBlocks(PROMPT);

  /**
   * A worker whose loads are slow (15 blocks take about 1.5 s: 500 ms a token before the speedup
   * of 20) and whose host memory holds PROMPT, pushed off its GPU (room for one prompt) by OTHER.
   */
  async function promptInHostMemory(): Promise<MockWorker> {
    const w = await worker({ numGpuBlocks: n + 2, cpuOffloadBlocks: 64, cpuLoadUsPerToken: 500_000 });
    await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 2 });
    await postJson(`${w.url}/v1/completions`, { prompt: OTHER, max_tokens: 2 });
    return w;
  }

  test('a request that arrives while the engine waits only for a load runs at once', async () => {
    const w = await promptInHostMemory();
    const done: string[] = [];
    const loading = postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 1 }).then(() => done.push('loading'));
    await waitFor(() => w.stats().hostLoadedBlocks === n, 'the load to start');
    // A prompt of one block fits beside the loading one (16 blocks of 17). Held back until the
    // load ended, it would prefill in the loading request's pass and finish one pass after it
    // (two tokens to its one).
    await postJson(`${w.url}/v1/completions`, { prompt: 'Hi', max_tokens: 2 }).then(() => done.push('short'));
    await loading;
    expect(done).toEqual(['short', 'loading']);
  });

  test('a request sharing the blocks a load fills waits for that load, then finds them on the GPU', async () => {
    const w = await promptInHostMemory();
    const done: string[] = [];
    const loading = postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 1 }).then((r) => {
      done.push('loading');
      return r;
    });
    await waitFor(() => w.stats().hostLoadedBlocks === n, 'the load to start');
    // The same prompt again while its blocks load: they hold nothing yet, so it cannot finish
    // first, and it does not load them a second time.
    const second = await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 1 }).then((r) => {
      done.push('second');
      return r;
    });
    const first = await loading;
    expect(done).toEqual(['loading', 'second']);
    expect(first.json.usage.prompt_tokens_details.cached_tokens).toBe(n * BS);
    expect(second.json.usage.prompt_tokens_details.cached_tokens).toBe(n * BS);
    expect(w.stats().hostLoadedBlocks).toBe(n);
    // The second request's blocks were GPU hits; only the first's came from host memory.
    const m = await scrape(`${w.url}/metrics`);
    expect(m.sum('vllm:external_prefix_cache_hits_total')).toBe(n * BS);
    expect(m.sum('vllm:prefix_cache_hits_total')).toBe(n * BS);
  });

  test('a request that goes away while loading leaves nothing cached of its load', async () => {
    const w = await promptInHostMemory();
    const ac = new AbortController();
    const gone = fetch(`${w.url}/v1/completions`, {
      method: 'POST',
      body: JSON.stringify({ prompt: PROMPT, max_tokens: 1, stream: true }),
      headers: { 'content-type': 'application/json' },
      signal: ac.signal,
    }).catch(() => undefined);
    await waitFor(() => w.stats().hostLoadedBlocks === n, 'the load to start');
    ac.abort();
    await gone;
    await waitFor(() => w.stats().aborted === 1 && w.stats().waiting[0] === 0, 'the cancellation');
    // The blocks its load was filling never got their KV: the prompt loads back again.
    const again = await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 1 });
    expect(again.json.usage.prompt_tokens_details.cached_tokens).toBe(n * BS);
    expect(w.stats().hostLoadedBlocks).toBe(2 * n);
    expect((await scrape(`${w.url}/metrics`)).sum('vllm:prefix_cache_hits_total')).toBe(0);
    expect(w.stats()).toMatchObject({ running: [0], waiting: [0], kvUsage: [0] });
  });
});

describe('mock worker CPU offload options and wire', () => {
  test('bad options are typed errors', async () => {
    for (const [opts, pattern] of [
      [{ cpuOffloadBlocks: -1 }, /opts\.cpuOffloadBlocks must be an integer/],
      [{ cpuOffloadBlocks: 1.5 }, /opts\.cpuOffloadBlocks must be an integer/],
      [{ cpuLoadUsPerToken: -1 }, /opts\.cpuLoadUsPerToken must be a finite number >= 0/],
      [{ cpuLoadUsPerToken: 'fast' }, /opts\.cpuLoadUsPerToken must be a finite number >= 0/],
    ] as const) {
      await expect(startMockWorker({ port: 0, ...(opts as object) })).rejects.toMatchObject({ code: 'ERR_INVALID_ARG', message: pattern });
    }
  });

  test.each(BACKENDS)("encodeEngineBatch writes a lower tier's medium, which the decoder reads back (%s)", (backend) => {
    const events = [
      { type: 'BlockStored' as const, blockHashes: [5n], parent: null, tokens: [1, 2, 3, 4], blockSize: 4, medium: 'CPU' },
      { type: 'BlockRemoved' as const, blockHashes: [5n], medium: 'CPU' },
    ];
    for (const wire of ['vllm-0.33', 'vllm-0.11', 'sglang'] as const) {
      const decoded = decodeEngineBatch(encodeEngineBatch(1, events, 0, wire), { backend });
      expect(decoded.events.map((e) => ('medium' in e ? e.medium : undefined))).toEqual(['CPU', 'CPU']);
    }
    expectKvError(
      () => encodeEngineBatch(1, [{ type: 'BlockRemoved', blockHashes: [5n], medium: '' }], 0, 'vllm-0.33'),
      'ERR_INVALID_ARG',
      /events\[0\]\.medium must be a non-empty string/,
    );
  });
});
