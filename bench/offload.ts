/**
 * Does crediting host memory pay? A fleet of mock workers with CPU offload (`cpuOffloadBlocks`)
 * behind a gateway, fed a workload whose shared prefixes outgrow the GPUs: the prefixes spill to
 * host memory, from which a worker loads them back if the request comes to it. Three variants,
 * alternated over the rounds, each on a fresh fleet: no offload; offload with the router ignoring
 * the host tier (`hostCacheHitWeight` 0); offload at Dynamo's default weight (0.75). Reports the
 * engines' own cached tokens over prompt tokens, the blocks loaded back from host memory, and
 * request latency (non-streamed, so end to end; the engines run at Dynamo's timing, unscaled).
 */

import { createGateway, type MockWorker, startMockWorker } from '../ts/index.js';
import { fmt, machine, percentile, printTable, QUICK, sortedCopy, writeResult } from './common.js';

const WORKERS = 4;
const BS = 16;
const GPU_BLOCKS = 48;
const HOST_BLOCKS = 128;
const GROUPS = 16;
const PREFIX_BLOCKS = 24;
const SUFFIX_TOKENS = 20;
const REQUESTS = QUICK ? 64 : 320;
const CLIENTS = 4;
const ROUNDS = QUICK ? 1 : 3;

interface Variant {
  name: string;
  hostBlocks: number;
  hostWeight: number;
}

const VARIANTS: Variant[] = [
  { name: 'no offload', hostBlocks: 0, hostWeight: 0.75 },
  { name: 'offload, host ignored (weight 0)', hostBlocks: HOST_BLOCKS, hostWeight: 0 },
  { name: 'offload, host credited (weight 0.75)', hostBlocks: HOST_BLOCKS, hostWeight: 0.75 },
];

/** A seeded xorshift: every variant gets the same requests in the same order. */
function workload(): number[][] {
  let x = 0x9e3779b9;
  const next = () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
  const prefix = (g: number) => Array.from({ length: PREFIX_BLOCKS * BS }, (_, i) => 1000 + g * 10_000 + i);
  return Array.from({ length: REQUESTS }, (_, r) => {
    const g = Math.floor(next() * GROUPS);
    return [...prefix(g), ...Array.from({ length: SUFFIX_TOKENS }, (_, i) => 500_000 + r * 100 + i)];
  });
}

async function run(v: Variant, prompts: number[][]) {
  const workers: MockWorker[] = await Promise.all(
    Array.from({ length: WORKERS }, () =>
      startMockWorker({
        port: 0,
        kvEvents: 'tcp://127.0.0.1:0',
        replay: 'tcp://127.0.0.1:0',
        blockSize: BS,
        numGpuBlocks: GPU_BLOCKS,
        cpuOffloadBlocks: v.hostBlocks,
        speedup: 1,
      }),
    ),
  );
  const gateway = createGateway({
    blockSize: BS,
    logLevel: false,
    router: { hostCacheHitWeight: v.hostWeight },
    workers: workers.map((w, i) => ({ id: i + 1, url: w.url, kvEvents: w.kvEventsEndpoints, replay: w.replayEndpoints })),
  });
  try {
    const { url } = await gateway.listen();
    await new Promise((r) => setTimeout(r, 300)); // the subscriptions reach the publishers
    const latencies: number[] = [];
    let cached = 0;
    let promptTokens = 0;
    let nextRequest = 0;
    const start = performance.now();
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        while (nextRequest < prompts.length) {
          const prompt = prompts[nextRequest++];
          const t0 = performance.now();
          const res = await fetch(`${url}/v1/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ prompt, max_tokens: 4 }),
          });
          const body = (await res.json()) as { usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } } };
          if (res.status !== 200) throw new Error(`request failed: ${res.status} ${JSON.stringify(body)}`);
          latencies.push(performance.now() - t0);
          cached += body.usage.prompt_tokens_details.cached_tokens;
          promptTokens += body.usage.prompt_tokens;
        }
      }),
    );
    const wallS = (performance.now() - start) / 1000;
    const sorted = sortedCopy(latencies);
    return {
      variant: v.name,
      hitRatio: cached / promptTokens,
      hostLoadedBlocks: workers.reduce((n, w) => n + w.stats().hostLoadedBlocks, 0),
      latencyMeanMs: latencies.reduce((a, b) => a + b, 0) / latencies.length,
      latencyP50Ms: percentile(sorted, 50),
      latencyP99Ms: percentile(sorted, 99),
      wallS,
    };
  } finally {
    await gateway.close();
    await Promise.all(workers.map((w) => w.close()));
  }
}

const prompts = workload();
const runs: Awaited<ReturnType<typeof run>>[] = [];
for (let round = 0; round < ROUNDS; round++) for (const v of VARIANTS) runs.push({ ...(await run(v, prompts)), round } as never);
printTable(
  `${WORKERS} offloading mock workers (GPU ${GPU_BLOCKS} blocks, host ${HOST_BLOCKS}), ${GROUPS} prefixes of ${PREFIX_BLOCKS} blocks, ${REQUESTS} requests, ${CLIENTS} clients`,
  runs.map((r) => ({
    variant: r.variant,
    'hit ratio': `${fmt(100 * r.hitRatio)}%`,
    'host loads (blocks)': r.hostLoadedBlocks,
    'mean ms': fmt(r.latencyMeanMs),
    'p50 ms': fmt(r.latencyP50Ms),
    'p99 ms': fmt(r.latencyP99Ms),
    'wall s': fmt(r.wallS, 2),
  })),
);
writeResult('offload', { machine: machine(), workers: WORKERS, gpuBlocks: GPU_BLOCKS, hostBlocks: HOST_BLOCKS, requests: REQUESTS, runs });
