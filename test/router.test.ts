import { describe, expect, test } from 'vitest';
import { blockHashes, KvRouteError, KvRouter, type KvRouterOptions, type RouteDecision } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { stored } from './helpers/events.js';
import { Rng } from './helpers/random.js';
import { routerSuite } from './helpers/routers.js';

const BS = 4;
const tokens = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

async function rejection(p: Promise<unknown>): Promise<KvRouteError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(KvRouteError);
    return err as KvRouteError;
  }
  throw new Error('expected a rejection');
}

describe.each(BACKENDS)('KvRouter on the %s backend', (backend) => {
  const { clock, make } = routerSuite(backend, BS);
  /** Worker `w` caches the first `n` blocks of `t`. */
  const cache = (r: KvRouter, w: number, t: number[], n: number, dpRank = 0) =>
    r.applyEvent(stored(w, [...blockHashes(t, BS, { backend })].slice(0, n), { dpRank }));
  const costs = (d: RouteDecision) =>
    d.candidates.map((c) => [Number(c.workerId), c.dpRank, c.overlap, c.prefillTokens, c.decodeBlocks, c.cost]);

  test('hand-computed costs: overlap, prefill and decode terms', async () => {
    const r = make();
    r.addWorker(1);
    r.addWorker(2);
    const t = tokens(1, 12); // 3 blocks
    cache(r, 1, t, 2);
    await r.flush();
    // w1: prefill 12 - 2·4 = 4 tokens (1 block), decode 0 + 3 new blocks → 4; w2: 12 tokens (3) + 3 → 6
    const d = await r.route({ requestId: 'a', tokens: t });
    expect(costs(d)).toEqual([
      [1, 0, 2, 4, 3, 4],
      [2, 0, 0, 12, 3, 6],
    ]);
    expect(d).toMatchObject({ workerId: 1n, dpRank: 0, overlapBlocks: 2, cachedTokens: 8, requiredBlocks: 3, cost: 4, queuedMs: 0 });
    // Booked on w1: its active load now counts. Same prompt again: w1 prefill 4 + 4, decode 3 + 0 new.
    expect(r.potentialLoads({ requestId: 'b', tokens: t })).toEqual([
      {
        workerId: 1n,
        dpRank: 0,
        overlapBlocks: 2,
        hostBlocks: 0,
        diskBlocks: 0,
        sharedBlocks: 0,
        cachedTokens: 8,
        prefillTokens: 8,
        decodeBlocks: 3,
        activeRequests: 1,
      },
      {
        workerId: 2n,
        dpRank: 0,
        overlapBlocks: 0,
        hostBlocks: 0,
        diskBlocks: 0,
        sharedBlocks: 0,
        cachedTokens: 0,
        prefillTokens: 12,
        decodeBlocks: 3,
        activeRequests: 0,
      },
    ]);
    r.markPrefillCompleted('a');
    expect(r.potentialLoads({ requestId: 'b', tokens: t })[0]).toMatchObject({ prefillTokens: 4, decodeBlocks: 3 });
    r.free('a');
    expect(r.potentialLoads({ requestId: 'b', tokens: t })[0]).toMatchObject({ prefillTokens: 4, decodeBlocks: 3 });
    expect(r.stats().load).toEqual([]);
  });

  test('overlap weights 0 and 2, and dp ranks as separate candidates', async () => {
    const t = tokens(1, 12);
    const zero = make({ overlapScoreWeight: 0 });
    zero.addWorker(1);
    zero.addWorker(2);
    cache(zero, 1, t, 2);
    await zero.flush();
    // Costs 3 and 3: the tie goes to the smaller cache, w2.
    expect((await zero.route({ requestId: 'a', tokens: t })).workerId).toBe(2n);
    const two = make({ overlapScoreWeight: 2 });
    two.addWorker(1, { dataParallelSize: 2, dataParallelStartRank: 4 });
    cache(two, 1, t, 3, 5);
    await two.flush();
    const d = await two.route({ requestId: 'a', tokens: t });
    expect(costs(d)).toEqual([
      [1, 4, 0, 12, 3, 9],
      [1, 5, 3, 0, 3, 3],
    ]);
    expect([d.workerId, d.dpRank]).toEqual([1n, 5]);
    expect(two.potentialLoads({ requestId: 'b', tokens: t, overrides: { overlapScoreWeight: 0 } }).map((p) => p.prefillTokens)).toEqual([
      12, 0,
    ]);
  });

  test('ties: the smallest cache first, then a seeded random pick', async () => {
    const t = tokens(100, 8);
    const r = make({ overlapScoreWeight: 0 });
    for (const w of [1, 2, 3]) r.addWorker(w);
    cache(r, 1, tokens(500, 8), 2);
    await r.flush();
    const picks: bigint[] = [];
    for (let i = 0; i < 40; i++) {
      const d = await r.route({ requestId: `r${i}`, tokens: t });
      picks.push(d.workerId);
      r.free(`r${i}`);
    }
    expect(picks).not.toContain(1n);
    expect(new Set(picks)).toEqual(new Set([2n, 3n]));
    const again = make({ overlapScoreWeight: 0 });
    for (const w of [1, 2, 3]) again.addWorker(w);
    cache(again, 1, tokens(500, 8), 2);
    await again.flush();
    const replay: bigint[] = [];
    for (let i = 0; i < 40; i++) {
      replay.push((await again.route({ requestId: `r${i}`, tokens: t })).workerId);
      again.free(`r${i}`);
    }
    expect(replay).toEqual(picks);
  });

  test('temperature samples by softmax over normalised costs (seeded, statistical)', async () => {
    const r = make({ routerTemperature: 0.5, seed: 7 });
    for (const w of [1, 2, 3]) r.addWorker(w);
    const t = tokens(1, 16); // 4 blocks
    cache(r, 1, t, 4);
    cache(r, 2, t, 2);
    await r.flush();
    const d0 = await r.route({ requestId: 'probe', tokens: t });
    r.free('probe');
    const c = d0.candidates.map((x) => x.cost);
    const [lo, hi] = [Math.min(...c), Math.max(...c)];
    const w = c.map((x) => Math.exp(-(x - lo) / ((hi - lo) * 0.5)));
    const expected = w.map((x) => x / w.reduce((a, b) => a + b, 0));
    const n = 4000;
    const counts = [0, 0, 0];
    for (let i = 0; i < n; i++) {
      counts[Number((await r.route({ requestId: `r${i}`, tokens: t })).workerId) - 1]++;
      r.free(`r${i}`);
    }
    counts.forEach((k, i) => {
      expect(Math.abs(k / n - expected[i])).toBeLessThan(0.03);
    });
    expect(counts[0]).toBeGreaterThan(counts[2]);
  });

  test('queueing: waits while every candidate is busy, released by markPrefillCompleted and free', async () => {
    const r = make({ routerQueueThreshold: 0.5 });
    r.addWorker(1, { maxNumBatchedTokens: 10 });
    const first = await r.route({ requestId: 'a', tokens: tokens(1, 8) }); // 8 prefill tokens > 0.5 · 10
    expect(first.queuedMs).toBe(0);
    const second = r.route({ requestId: 'b', tokens: tokens(50, 4) });
    let settled = false;
    second.then(() => {
      settled = true;
    });
    await Promise.resolve();
    expect(settled).toBe(false);
    expect(r.stats()).toMatchObject({ queued: 1, queuedTotal: 1 });
    clock.now += 250;
    r.markPrefillCompleted('a');
    const d = await second;
    expect(d.queuedMs).toBe(250);
    expect(r.stats()).toMatchObject({ queued: 0, inFlight: 2 });
  });

  test.each([
    ['fcfs', ['b', 'c', 'd']],
    ['lcfs', ['d', 'c', 'b']],
  ] as const)('release order under %s, with higher priority first', async (policy, order) => {
    const r = make({ routerQueueThreshold: 0, routerQueuePolicy: policy });
    r.addWorker(1, { maxNumBatchedTokens: 100 });
    await r.route({ requestId: 'a', tokens: tokens(1, 8) });
    const released: string[] = [];
    const waits = ['b', 'c', 'd'].map((id) => r.route({ requestId: id, tokens: tokens(1, 8) }).then(() => released.push(id)));
    const urgent = r.route({ requestId: 'urgent', tokens: tokens(1, 8), priority: 5 }).then(() => released.push('urgent'));
    for (const id of ['a', 'urgent', ...order]) {
      r.markPrefillCompleted(id);
      await Promise.resolve();
    }
    await Promise.all([...waits, urgent]);
    expect(released).toEqual(['urgent', ...order]);
  });

  test('wspt serves the request with the least uncached work first', async () => {
    const r = make({ routerQueueThreshold: 0, routerQueuePolicy: 'wspt' });
    r.addWorker(1, { maxNumBatchedTokens: 100 });
    cache(r, 1, tokens(1, 40), 10);
    await r.flush();
    await r.route({ requestId: 'a', tokens: tokens(900, 8) });
    const released: string[] = [];
    const long = r.route({ requestId: 'long', tokens: tokens(500, 40) }).then(() => released.push('long'));
    const cached = r.route({ requestId: 'cached', tokens: tokens(1, 40) }).then(() => released.push('cached'));
    r.markPrefillCompleted('a');
    await Promise.resolve();
    r.markPrefillCompleted('cached');
    await Promise.all([long, cached]);
    expect(released).toEqual(['cached', 'long']);
  });

  test('a signal aborts a wait, free cancels one, close rejects the rest', async () => {
    const r = make({ routerQueueThreshold: 0 });
    r.addWorker(1);
    await r.route({ requestId: 'a', tokens: tokens(1, 8) });
    const ac = new AbortController();
    const aborted = r.route({ requestId: 'b', tokens: tokens(1, 8), signal: ac.signal });
    const cancelled = r.route({ requestId: 'c', tokens: tokens(1, 8) });
    const closed = r.route({ requestId: 'd', tokens: tokens(1, 8) });
    ac.abort();
    expect((await rejection(aborted)).code).toBe('ERR_ABORTED');
    r.free('c');
    expect((await rejection(cancelled)).code).toBe('ERR_ABORTED');
    expect(r.stats().aborted).toBe(2);
    const pre = new AbortController();
    pre.abort();
    expect((await rejection(r.route({ requestId: 'e', tokens: tokens(1, 8), signal: pre.signal }))).code).toBe('ERR_ABORTED');
    r.close();
    expect((await rejection(closed)).code).toBe('ERR_CLOSED');
    expect((await rejection(r.route({ requestId: 'f', tokens: tokens(1, 8) }))).code).toBe('ERR_CLOSED');
  });

  test('load returns to exactly zero after many random route / first-token / free cycles', async () => {
    const r = make({ routerQueueThreshold: 2 });
    r.addWorker(1, { maxNumBatchedTokens: 64 });
    r.addWorker(2, { dataParallelSize: 2, maxNumBatchedTokens: 64 });
    const rng = new Rng(5);
    const live: string[] = [];
    const pending: Promise<unknown>[] = [];
    for (let i = 0; i < 600; i++) {
      const id = `r${i}`;
      pending.push(
        r.route({ requestId: id, tokens: tokens(rng.int(4) * 16, 4 + rng.int(40)) }).then(
          () => live.push(id),
          () => undefined,
        ),
      );
      await Promise.resolve();
      if (live.length > 0 && rng.chance(0.5)) r.markPrefillCompleted(live[rng.int(live.length)]);
      if (live.length > 0 && rng.chance(0.6)) r.free(live.splice(rng.int(live.length), 1)[0]);
    }
    while (live.length > 0 || r.stats().queued > 0) {
      for (const id of live.splice(0)) r.free(id);
      await Promise.resolve();
    }
    await Promise.all(pending);
    expect(r.stats()).toMatchObject({ inFlight: 0, queued: 0, load: [] });
    expect(r.stats().routed).toBe(600);
  });

  test('stale in-flight requests expire on the router clock', async () => {
    const r = make({ requestExpirySecs: 10 });
    r.addWorker(1);
    await r.route({ requestId: 'a', tokens: tokens(1, 8) });
    clock.now += 9_000;
    expect(r.stats()).toMatchObject({ inFlight: 1, expired: 0 });
    clock.now += 1_001;
    expect(r.stats()).toMatchObject({ inFlight: 0, expired: 1, load: [] });
    r.free('a');
    expect(r.stats().unknownFree).toBe(1);
  });

  test('approximate mode routes a repeated prefix to the same worker until the TTL passes', async () => {
    const r = make({ useKvEvents: false, routerTtlSecs: 10 });
    for (const w of [1, 2, 3]) r.addWorker(w);
    const prefix = tokens(7000, 32);
    const first = await r.route({ requestId: 'r0', tokens: [...prefix, 1, 2, 3, 4] });
    r.free('r0');
    for (let i = 1; i <= 5; i++) {
      clock.now += 1000;
      const d = await r.route({ requestId: `r${i}`, tokens: [...prefix, ...tokens(i * 10, 4)] });
      expect(d.workerId).toBe(first.workerId);
      expect(d.overlapBlocks).toBe(8);
      r.free(`r${i}`);
    }
    clock.now += 10_001;
    const later = await r.route({ requestId: 'late', tokens: [...prefix, 9, 9, 9, 9] });
    expect(later.overlapBlocks).toBe(0);
  });

  test("multimodal requests match the blocks an engine cached with their media's hashes", async () => {
    const r = make();
    r.addWorker(1);
    r.addWorker(2);
    const t = tokens(1, 16);
    // The second block holds an image: the engine's blocks from there on hash with it.
    const mmHashes = [null, [0x1234n]];
    r.applyEvent(stored(1, [...blockHashes(t, BS, { mmHashes, backend })]));
    r.applyEvent(stored(2, [...blockHashes(t, BS, { backend })]));
    await r.flush();
    const withImage = await r.route({ requestId: 'a', tokens: t, mmHashes });
    expect(withImage.candidates.map((c) => [Number(c.workerId), c.overlap])).toEqual([
      [1, 4],
      [2, 1],
    ]);
    expect(withImage.workerId).toBe(1n);
    const textOnly = await r.route({ requestId: 'b', tokens: t });
    expect(textOnly.candidates.map((c) => [Number(c.workerId), c.overlap])).toEqual([
      [1, 1],
      [2, 4],
    ]);
    expect((await rejection(r.route({ requestId: 'c', tokens: t, mmHashes: [[-1n]] }))).message).toMatch(/req\.mmHashes\[0\]\[0\]/);
  });

  test('removing a worker drops its in-flight requests and cache entries', async () => {
    const r = make();
    r.addWorker(1);
    r.addWorker(2);
    const t = tokens(1, 16);
    cache(r, 1, t, 4);
    await r.flush();
    expect((await r.route({ requestId: 'a', tokens: t })).workerId).toBe(1n);
    r.removeWorker(1);
    await r.flush();
    expect(r.stats()).toMatchObject({ workers: 1, inFlight: 0, droppedWithWorker: 1, load: [] });
    expect(r.index.findMatchesForRequest(t).scores).toEqual([]);
    r.free('a');
    expect(r.stats().unknownFree).toBe(1);
    expect((await r.route({ requestId: 'b', tokens: t })).workerId).toBe(2n);
  });

  test('a custom selector chooses among the scored candidates', async () => {
    const r = make({ selector: (candidates) => candidates.length - 1 });
    r.addWorker(1);
    r.addWorker(2);
    expect((await r.route({ requestId: 'a', tokens: tokens(1, 8) })).workerId).toBe(2n);
    const bad = make({ selector: () => 7 });
    bad.addWorker(1);
    expect((await rejection(bad.route({ requestId: 'a', tokens: tokens(1, 8) }))).message).toMatch(/selector returned 7/);
    expect(bad.stats().inFlight).toBe(0);
  });

  test('routing errors: no workers, not allowed, pinned, duplicates, empty prompts', async () => {
    const r = make();
    expect((await rejection(r.route({ requestId: 'a', tokens: [1] }))).code).toBe('ERR_NO_WORKERS');
    r.addWorker(1, { dataParallelSize: 2 });
    r.addWorker(2);
    expect((await rejection(r.route({ requestId: 'a', tokens: [1], allowedWorkers: [9] }))).code).toBe('ERR_NO_WORKERS');
    expect((await r.route({ requestId: 'a', tokens: [1], allowedWorkers: [2] })).workerId).toBe(2n);
    expect((await rejection(r.route({ requestId: 'a', tokens: [1] }))).code).toBe('ERR_DUPLICATE_REQUEST');
    expect((await r.route({ requestId: 'b', tokens: [1], pinnedWorker: { workerId: 1, dpRank: 1 } })).dpRank).toBe(1);
    expect((await rejection(r.route({ requestId: 'c', tokens: [1], pinnedWorker: { workerId: 9 } }))).code).toBe('ERR_INVALID_ARG');
    expect((await rejection(r.route({ requestId: 'c', tokens: [1], pinnedWorker: { workerId: 1 }, allowedWorkers: [2] }))).code).toBe(
      'ERR_INVALID_ARG',
    );
    expect((await rejection(r.route({ requestId: 'c', tokens: [1], pinnedWorker: { workerId: 1, dpRank: 2 } }))).message).toMatch(
      /no dp rank 2/,
    );
    // Ranks 4 and 5: a pin names one of them, not a position in the worker's list.
    r.addWorker(3, { dataParallelSize: 2, dataParallelStartRank: 4 });
    expect((await r.route({ requestId: 'p5', tokens: [1], pinnedWorker: { workerId: 3, dpRank: 5 } })).dpRank).toBe(5);
    for (const dpRank of [0, 3, 6]) {
      expect((await rejection(r.route({ requestId: 'c', tokens: [1], pinnedWorker: { workerId: 3, dpRank } }))).message).toMatch(
        new RegExp(`pinned worker 3 has no dp rank ${dpRank}`),
      );
    }
    expect((await rejection(r.route({ requestId: 'c', tokens: [] }))).message).toMatch(/req\.tokens must not be empty/);
    expect((await rejection(r.route({ requestId: '', tokens: [1] }))).message).toMatch(/requestId/);
    expect((await rejection(r.route({ requestId: 'c', tokens: [1], priority: Number.NaN }))).message).toMatch(/priority/);
    r.markPrefillCompleted('nobody');
    r.free('nobody');
    expect(r.stats()).toMatchObject({ unknownFree: 1, unknownPrefillCompleted: 1 });
  });

  test('options and worker configs are validated up front, naming the option', () => {
    const cases: Array<[Partial<KvRouterOptions>, RegExp]> = [
      [{ blockSize: 0 }, /opts\.blockSize/],
      [{ overlapScoreWeight: -1 }, /opts\.overlapScoreWeight/],
      [{ routerTemperature: Number.NaN }, /opts\.routerTemperature/],
      [{ routerTtlSecs: 0 }, /opts\.routerTtlSecs/],
      [{ routerQueueThreshold: -2 }, /opts\.routerQueueThreshold/],
      [{ routerQueuePolicy: 'sjf' as never }, /opts\.routerQueuePolicy/],
      [{ requestExpirySecs: -1 }, /opts\.requestExpirySecs/],
      [{ seed: 1.5 }, /opts\.seed/],
      [{ selector: 3 as never }, /opts\.selector/],
      [{ useKvEvents: 'no' as never }, /opts\.useKvEvents/],
      [{ overlapWeight: 1 } as never, /unknown option "overlapWeight"/],
    ];
    for (const [opts, message] of cases) {
      expect(() => new KvRouter({ blockSize: BS, backend, ...opts })).toThrow(
        expect.objectContaining({ code: 'ERR_INVALID_ARG', message: expect.stringMatching(message) }),
      );
    }
    const r = make();
    expect(() => r.addWorker(1, { dataParallelSize: 0 })).toThrow(/cfg\.dataParallelSize/);
    r.addWorker(1);
    expect(() => r.addWorker(1)).toThrow(/already added/);
    expect(() => r.updateWorker(2, {})).toThrow(/not registered/);
    expect(() => r.addWorker(-1 as never)).toThrow(/workerId/);
  });
});
