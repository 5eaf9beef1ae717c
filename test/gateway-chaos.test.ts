/**
 * The gateway under faults: a bounded run of concurrent requests (streamed and not, sharing
 * prefixes) over four mock workers while one crashes, one hangs then recovers, and one's engine
 * restarts. Whatever the timing, every request ends (no hang past the upstream timeouts), each
 * with a whole answer or a clean error (an OpenAI error body, or a streamed error event after the
 * tokens already sent), no booking outlives its request, the dead worker leaves routing and its
 * index entries, and once the faults are over every request is served. The same of fleets
 * disaggregated over vLLM's two steps and SGLang's bootstrap protocol, where a prefill and a
 * decode worker die.
 */

import { describe, expect, test } from 'vitest';
import type { BackendName, MockFault, MockWorker } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { disaggregatedFleet, sglangFleet } from './helpers/disaggregated-fleet.js';
import { closeFleetsAfterEach, nothingInFlight, startFleet } from './helpers/gateway.js';
import { type Json, postJson, sse } from './helpers/http.js';
import { scrape } from './helpers/prometheus.js';
import { Rng } from './helpers/random.js';
import { sleep, waitFor } from './helpers/wait.js';

closeFleetsAfterEach();

/** How a request ended: its status, and whether its answer was whole (all its tokens, a finish), or the client left it. */
interface Ended {
  status: number;
  whole: boolean;
  error?: string;
  left?: true;
}

const MAX_TOKENS = 24;

/** A streamed request the client leaves once its answer started, after `chunks` chunks of it. */
async function leftStream(url: string, body: Json, chunks: number): Promise<Ended> {
  const client = new AbortController();
  const res = await fetch(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: client.signal,
  });
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  for (let i = 0; i < chunks && !(await reader.read()).done; i++);
  client.abort();
  return { status: res.status, whole: false, left: true };
}

/**
 * One request of the run: a completion on one of the shared prefixes, streamed or not; a
 * stream with `leaveAfter` set is left by its client after that many chunks.
 */
async function oneRequest(url: string, prefix: number, turn: number, stream: boolean, leaveAfter?: number): Promise<Ended> {
  const shared = `${'shared system prompt '.repeat(8)}${prefix} `.repeat(4);
  const prompt = `${shared}question ${turn} of prefix ${prefix}`;
  const body = { model: 'mock-model', prompt, max_tokens: MAX_TOKENS, stream };
  try {
    if (stream && leaveAfter !== undefined) return await leftStream(url, body, leaveAfter);
    if (!stream) {
      const r = await postJson(`${url}/v1/completions`, body);
      if (r.status !== 200) return { status: r.status, whole: false, error: (r.json as Json)?.error?.message };
      return { status: 200, whole: r.json.usage.completion_tokens === MAX_TOKENS && r.json.choices[0].finish_reason === 'length' };
    }
    const r = await sse(`${url}/v1/completions`, { ...body, stream_options: { include_usage: true } });
    if (r.status !== 200) return { status: r.status, whole: false };
    const failed = r.events.find((e) => typeof e === 'object' && e.error !== undefined);
    if (failed) return { status: 200, whole: false, error: failed.error.message };
    const usage = r.events.find((e) => typeof e === 'object' && e.usage)?.usage;
    return { status: 200, whole: r.events.at(-1) === '[DONE]' && usage?.completion_tokens === MAX_TOKENS };
  } catch (err) {
    // The gateway's connection failing is never a clean answer.
    return { status: 0, whole: false, error: (err as Error).message };
  }
}

/**
 * `total` requests from `clients` concurrent clients, each drawing a prefix and a kind; with
 * `leaving`, one stream in five is left by its client after its first chunks.
 */
async function run(url: string, total: number, clients: number, seed: number, leaving = false): Promise<Ended[]> {
  const random = new Rng(seed);
  const plan = Array.from({ length: total }, (_, i) => {
    const stream = random.chance(0.5);
    const leaveAfter = leaving && stream && random.chance(0.2) ? random.int(3) : undefined;
    return { prefix: random.int(6), turn: i, stream, leaveAfter };
  });
  const ended: Ended[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < plan.length) {
        const { prefix, turn, stream, leaveAfter } = plan[next++];
        ended.push(await oneRequest(url, prefix, turn, stream, leaveAfter));
      }
    }),
  );
  return ended;
}

/** A fault, injected `afterMs` after the one before it (or the run's start). */
type FaultStep = [afterMs: number, worker: MockWorker, fault: MockFault];

/**
 * {@link run} while `steps` are injected; then each request must have ended whole, or with a
 * clean error: a gateway status of its own, or an error event mid-stream.
 */
async function runThrough(url: string, steps: FaultStep[], total: number, clients: number, seed: number): Promise<void> {
  const faults = (async () => {
    for (const [afterMs, worker, fault] of steps) {
      await sleep(afterMs);
      worker.fault(fault);
    }
  })();
  const [ended] = await Promise.all([run(url, total, clients, seed, true), faults]);
  expect(ended).toHaveLength(total);
  expect(ended.some((e) => e.left)).toBe(true);
  const unclean = ended.filter((e) => !e.whole && !e.left && !(e.status >= 500 && e.status <= 504) && !(e.status === 200 && e.error));
  expect(unclean).toEqual([]);
  expect(ended.filter((e) => e.whole).length).toBeGreaterThan(total / 2);
}

async function chaosFleet(backend: BackendName) {
  return startFleet(backend, 4, {
    upstream: { retries: 2, headersTimeoutMs: 1500, bodyTimeoutMs: 1500 },
    health: { intervalMs: 100, timeoutMs: 200, failureThreshold: 2 },
  });
}

describe.each(BACKENDS)('the gateway under faults (%s)', (backend) => {
  test('a crash, a hang and an engine restart mid-run: every request ends cleanly, no booking leaks, and service resumes on the healthy workers', async () => {
    const f = await chaosFleet(backend);
    const [, crashing, hanging, restarting] = f.workers;
    await runThrough(
      f.url,
      [
        [150, crashing, { kind: 'crash' }],
        [150, hanging, { kind: 'hang' }],
        [200, restarting, { kind: 'restart' }],
        // Past the upstream timeouts: the requests it holds time out, and it leaves routing.
        [2000, hanging, { kind: 'recover' }],
      ],
      240,
      16,
      7,
    );

    // The crashed worker is out of routing; the hung one is back once it answers its probes again.
    await waitFor(async () => {
      const workers = await f.gateway.workers();
      return workers.find((w) => w.id === 2n)?.routable === false && workers.filter((w) => w.routable).length === 3;
    }, 'the fleet settled');
    // Once the faults are over, every request is served, streamed or not.
    const after = await run(f.url, 60, 8, 8);
    expect(after.filter((e) => !e.whole)).toEqual([]);

    // No request or booking outlives its client (the streams left end soon after), and every request was counted once.
    await nothingInFlight(f.url);
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_requests_total')).toBe(300);
    // The dead worker left the router (its index entries and load with it).
    expect(m.sum('kvroute_router_workers')).toBe(3);
  }, 60_000);

  // Workers 1 and 2 prefill, 3 and 4 decode; one of each dies.
  test.each([
    ["vLLM's two steps", 'vllm', [1, 2], 11],
    ["SGLang's bootstrap protocol", 'sglang', [0, 3], 9],
  ] as [string, 'vllm' | 'sglang', number[], number][])(
    'disaggregated over %s, a prefill and a decode worker die mid-run: every request ends cleanly, no booking leaks, and the workers left serve on',
    async (_name, protocol, dying, seed) => {
      const upstream = { retries: 2, headersTimeoutMs: 1500, bodyTimeoutMs: 1500 };
      const f =
        protocol === 'sglang'
          ? await sglangFleet(backend, undefined, { upstream })
          : await disaggregatedFleet(backend, undefined, { upstream });
      const [prefill, decode] = dying;
      await runThrough(
        f.url,
        [
          [150, f.workers[prefill], { kind: 'crash' }],
          [250, f.workers[decode], { kind: 'crash' }],
        ],
        160,
        12,
        seed,
      );
      const after = await run(f.url, 40, 6, seed + 1);
      expect(after.filter((e) => !e.whole)).toEqual([]);
      const workers = await f.gateway.workers();
      const left = [1n, 2n, 3n, 4n].filter((id) => !dying.includes(Number(id) - 1));
      expect(workers.filter((w) => w.routable).map((w) => w.id)).toEqual(left);
      await nothingInFlight(f.url);
      const m = await scrape(`${f.url}/metrics`);
      expect(m.sum('kvroute_gateway_requests_total')).toBe(200);
    },
    60_000,
  );
});
