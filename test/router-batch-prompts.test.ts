import { describe, expect, test } from 'vitest';
import { blockHashes, type KvRouter, MAX_PROMPTS_PER_BATCH, type RouteDecision } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { expectKvError } from './helpers/errors.js';
import { stored } from './helpers/events.js';
import { routerSuite } from './helpers/routers.js';

const BS = 4;
const tokens = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

/** The request's own prompt (2 blocks) and its batch's two others (3 and 2 blocks). */
const a = tokens(1, 8);
const b = tokens(100, 12);
const c = tokens(200, 8);

describe.each(BACKENDS)('KvRouter batchPrompts (%s)', (backend) => {
  const { clock, make } = routerSuite(backend, BS);
  /** Worker `w` caches the first `n` blocks of `t`. */
  const cache = (r: KvRouter, w: number, t: number[], n: number) =>
    r.applyEvent(stored(w, [...blockHashes(t, BS, { backend })].slice(0, n)));
  const figures = (d: RouteDecision) => d.candidates.map((x) => [Number(x.workerId), x.overlap, x.prefillTokens, x.decodeBlocks, x.cost]);

  /** w1 holds the request's own prompt, w2 the batch's other two. */
  async function split(opts = {}): Promise<KvRouter> {
    const r = make(opts);
    r.addWorker(1);
    r.addWorker(2);
    cache(r, 1, a, 2);
    cache(r, 2, b, 3);
    cache(r, 2, c, 2);
    await r.flush();
    return r;
  }

  test('a batch is placed by the work all its prompts bring, not by its first prompt', async () => {
    const r = await split();
    // Alone, `a` goes to w1 (w1: 0 prefill + 2 blocks = 2; w2: 8/4 + 2 = 4).
    expect((await r.route({ requestId: 'alone', tokens: a })).workerId).toBe(1n);
    r.free('alone');
    // With b and c: w1 prefill 0 + 12 + 8 = 20 tokens (5 blocks) + decode 2 + 3 + 2 = 7 → 12;
    // w2 prefill 8 + 0 + 0 (2 blocks) + 7 → 9.
    const d = await r.route({ requestId: 'batch', tokens: a, batchPrompts: [b, c] });
    expect(figures(d)).toEqual([
      [1, 2, 20, 7, 12],
      [2, 0, 8, 7, 9],
    ]);
    expect(d).toMatchObject({ workerId: 2n, overlapBlocks: 0, cachedTokens: 0, requiredBlocks: 2 });
  });

  test('every prompt is booked on the rank chosen, and ends with the request', async () => {
    const r = await split();
    await r.route({ requestId: 'batch', tokens: a, batchPrompts: [b, Uint32Array.from(c)] });
    // One request in flight; three prompts' load on w2: only a's 8 tokens uncached, 7 blocks.
    expect(r.stats()).toMatchObject({
      inFlight: 1,
      routed: 1,
      load: [{ workerId: 2n, dpRank: 0, activePrefillTokens: 8, activeBlocks: 7, requests: 3 }],
    });
    // Another request sees all of it: w2 prefill 8 + 8, decode 7 (a's blocks are active there).
    expect(r.potentialLoads({ requestId: 'peek', tokens: a })[1]).toMatchObject({ prefillTokens: 16, decodeBlocks: 7, activeRequests: 3 });
    r.markPrefillCompleted('batch');
    expect(r.stats().load).toEqual([{ workerId: 2n, dpRank: 0, activePrefillTokens: 0, activeBlocks: 7, requests: 3 }]);
    r.free('batch');
    expect(r.stats()).toMatchObject({ inFlight: 0, load: [] });
    // Freed once: the batch's bookings went with it.
    r.free('batch');
    expect(r.stats().unknownFree).toBe(1);
  });

  test("blocks the batch's prompts share count once, when choosing as in the booking", async () => {
    const r = make();
    r.addWorker(3);
    const longer = [...b, 900, 901, 902, 903]; // b's 3 blocks and one more
    const d = await r.route({ requestId: 'batch', tokens: a, batchPrompts: [longer, b, b] });
    // Prefill counts each prompt (each is prefilled as a request); blocks: a's 2, longer's 4.
    expect(d.candidates[0]).toMatchObject({ prefillTokens: 8 + 16 + 12 + 12, decodeBlocks: 2 + 4 });
    expect(r.stats().load).toEqual([{ workerId: 3n, dpRank: 0, activePrefillTokens: 48, activeBlocks: 2 + 4, requests: 4 }]);
  });

  test("the request's own blocks count once with a batch prompt that shares them, and so do blocks active on the rank", async () => {
    const r = make();
    r.addWorker(1);
    // Active on w1: a's first block only (a request of its own holds it).
    await r.route({ requestId: 'held', tokens: a.slice(0, 4) });
    const own = [...a, 50, 51, 52, 53]; // a's 2 blocks and one more
    const loads = r.potentialLoads({ requestId: 'p', tokens: own, batchPrompts: [a, [...a, 60, 61, 62, 63], a.slice(0, 4)] });
    // Distinct blocks: a1 (active), a2, own's third, the other third: 3 not active, 4 in all.
    expect(loads[0]).toMatchObject({ decodeBlocks: 1 + 3 });
  });

  test("the request's multimodal blocks are shared with a batch prompt only before the first image", async () => {
    const r = make();
    r.addWorker(1);
    const d = await r.route({ requestId: 'mm', tokens: b, mmHashes: [null, [0xabcn], null], batchPrompts: [b] });
    // b's first block is the same; its second and third differ from the image on: 3 + 2.
    expect(d.candidates[0]).toMatchObject({ decodeBlocks: 5 });
    expect(r.stats().load[0]).toMatchObject({ activeBlocks: 5, requests: 2 });
  });

  test('blocks under different adapters, or without KV reuse assumed, are not shared', async () => {
    const lora = make();
    lora.addWorker(1);
    const d = await lora.route({
      requestId: 'x',
      tokens: b,
      batchPrompts: [{ tokens: b, loraName: 'A' }, { tokens: b, loraName: 'B' }, b],
    });
    expect(d.candidates[0]).toMatchObject({ decodeBlocks: 3 * 3 });
    expect(lora.stats().load[0]).toMatchObject({ activeBlocks: 3 * 3, requests: 4 });
    const unshared = make({ routerAssumeKvReuse: false });
    unshared.addWorker(1);
    const u = await unshared.route({ requestId: 'x', tokens: b, batchPrompts: [b, b] });
    expect(u.candidates[0]).toMatchObject({ decodeBlocks: 3 * 3 });
    expect(unshared.stats().load[0]).toMatchObject({ activeBlocks: 3 * 3, requests: 3 });
  });

  test('potentialLoads weighs a batch and books nothing', async () => {
    const r = await split();
    const loads = r.potentialLoads({ requestId: 'peek', tokens: a, batchPrompts: [b, c] });
    expect(loads.map((l) => [Number(l.workerId), l.prefillTokens, l.decodeBlocks, l.cachedTokens])).toEqual([
      [1, 20, 7, 8],
      [2, 8, 7, 0],
    ]);
    expect(r.stats()).toMatchObject({ inFlight: 0, routed: 0, load: [] });
  });

  test("touch renews every prompt's lease, and they expire together", async () => {
    const r = await split({ requestExpirySecs: 10 });
    await r.route({ requestId: 'batch', tokens: a, batchPrompts: [b, c] });
    clock.now += 8_000;
    expect(r.touch('batch')).toBe(true);
    clock.now += 8_000;
    expect(r.stats()).toMatchObject({ expired: 0, inFlight: 1, load: [{ workerId: 2n, requests: 3 }] });
    clock.now += 3_000;
    expect(r.stats()).toMatchObject({ expired: 1, inFlight: 0, load: [] });
  });

  test("removing the worker drops the request with its batch's bookings", async () => {
    const r = await split();
    await r.route({ requestId: 'batch', tokens: a, batchPrompts: [b, c] });
    r.removeWorker(2);
    expect(r.stats()).toMatchObject({ inFlight: 0, droppedWithWorker: 1, load: [] });
  });

  test('a queued batch waits as one request and books all its prompts when released', async () => {
    const r = make({ routerQueueThreshold: 0 });
    r.addWorker(1);
    await r.route({ requestId: 'first', tokens: a });
    const waiting = r.route({ requestId: 'batch', tokens: c, batchPrompts: [b] });
    await new Promise((done) => setImmediate(done));
    expect(r.stats()).toMatchObject({ queued: 1, load: [{ requests: 1 }] });
    r.markPrefillCompleted('first');
    expect((await waiting).workerId).toBe(1n);
    expect(r.stats().load).toEqual([{ workerId: 1n, dpRank: 0, activePrefillTokens: 20, activeBlocks: 2 + 2 + 3, requests: 3 }]);
  });

  test('predictions record every prompt of a routed batch (approximate mode)', async () => {
    const r = make({ useKvEvents: false });
    r.addWorker(1);
    r.addWorker(2);
    const d = await r.route({ requestId: 'batch', tokens: a, batchPrompts: [b] });
    r.free('batch');
    await r.flush();
    // b alone now finds its 3 blocks predicted where the batch went.
    const alone = await r.route({ requestId: 'b', tokens: b });
    expect(alone).toMatchObject({ workerId: d.workerId, overlapBlocks: 3 });
  });

  test("a prompt under an adapter of its own is matched against that adapter's blocks; null is the base model's", async () => {
    const r = make();
    r.addWorker(1);
    r.addWorker(2);
    r.applyEvent(stored(2, [...blockHashes(b, BS, { backend, loraName: 'A' })]));
    r.applyEvent(stored(1, [...blockHashes(c, BS, { backend })]));
    await r.flush();
    const byWorker = (batchPrompts: NonNullable<Parameters<KvRouter['potentialLoads']>[0]['batchPrompts']>, loraName?: string) =>
      r.potentialLoads({ requestId: 'p', tokens: a, batchPrompts, ...(loraName ? { loraName } : {}) }).map((l) => l.prefillTokens);
    // a is cached nowhere (8 tokens); b under 'A' on w2 only, c under no adapter on w1 only.
    expect(byWorker([{ tokens: b, loraName: 'A' }])).toEqual([8 + 12, 8]);
    expect(byWorker([b])).toEqual([8 + 12, 8 + 12]);
    // The request's adapter is the default; null names the base model.
    expect(byWorker([b, { tokens: c, loraName: null }], 'A')).toEqual([8 + 12, 8 + 8]);
    expect(byWorker([b, c], 'A')).toEqual([8 + 12 + 8, 8 + 8]);
  });

  test('bad batchPrompts are ERR_INVALID_ARG and change nothing', async () => {
    const r = await split();
    const bad: [unknown, RegExp][] = [
      ['ab', /req\.batchPrompts must be an array of token lists or \{ tokens, loraName \} objects, got/],
      [[{ tokens: [] }], /req\.batchPrompts\[0\]\.tokens must not be empty/],
      [[{ tokens: b, loraName: 5 }], /req\.batchPrompts\[0\]\.loraName must be a string/],
      [[{ tokens: b, lora: 'A' }], /req\.batchPrompts\[0\] has an unknown (key|option|field)/],
      [[{ loraName: 'A' }], /req\.batchPrompts\[0\]\.tokens must be a Uint32Array/],
      [[b, []], /req\.batchPrompts\[1\] must not be empty/],
      [[[1, -1]], /req\.batchPrompts\[0\]\[1\] must be an integer in \[0, 2\^32\)/],
      [[b, 'xy'], /req\.batchPrompts\[1\] must be a Uint32Array or an array of integers/],
      [Array(MAX_PROMPTS_PER_BATCH + 1).fill(c), new RegExp(`has ${MAX_PROMPTS_PER_BATCH + 1} prompts; at most ${MAX_PROMPTS_PER_BATCH}`)],
    ];
    for (const [batchPrompts, message] of bad) {
      const req = { requestId: 'x', tokens: a, batchPrompts } as unknown as Parameters<KvRouter['route']>[0];
      await expect(r.route(req)).rejects.toMatchObject({ code: 'ERR_INVALID_ARG', message: expect.stringMatching(message) });
      expectKvError(() => r.potentialLoads(req), 'ERR_INVALID_ARG', message);
    }
    expect(r.stats()).toMatchObject({ routed: 0, inFlight: 0, load: [] });
    // The most prompts a batch may hold route.
    const most = await r.route({ requestId: 'most', tokens: a, batchPrompts: Array(MAX_PROMPTS_PER_BATCH).fill(c) });
    expect(r.stats().load).toEqual([
      {
        workerId: most.workerId,
        dpRank: 0,
        activePrefillTokens: expect.any(Number),
        activeBlocks: expect.any(Number),
        requests: MAX_PROMPTS_PER_BATCH + 1,
      },
    ]);
  });
});
