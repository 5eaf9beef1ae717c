/**
 * Unit tests of the simulated engine behind `kvroute replay`. The engine is internal (not part
 * of the package's API), so these tests import it directly; everything else about replay is
 * tested through `replay()` and the CLI.
 */
import { describe, expect, test } from 'vitest';
import { BlockIds } from '../ts/replay/block-ids.js';
import { Engine } from '../ts/replay/engine.js';
import type { EngineConfig } from '../ts/replay/engine-config.js';
import { type CacheEvent, type FullBlock, KvCache } from '../ts/replay/kv-cache.js';
import { SimRequest } from '../ts/replay/sim-request.js';
import { decodeMs, prefillMs } from '../ts/replay/timing.js';

const blocks = (ids: number[]): FullBlock[] => ids.map((i) => ({ seq: BigInt(1000 + i), local: BigInt(i), id: i }));
const stored = (e: CacheEvent) => ('stored' in e ? e.stored.blocks.map((b) => Number(b.local)) : null);

describe('KV block pool', () => {
  test('reuses cached blocks without events; announces new ones with their parent', () => {
    const cache = new KvCache(8);
    expect(cache.use(blocks([1, 2, 3]), null)).toBe(3);
    expect(cache.takeEvents()).toEqual([{ stored: { parent: null, blocks: blocks([1, 2, 3]) } }]);
    cache.release(blocks([1, 2, 3]));
    expect(cache.used).toBe(0);
    expect(cache.prefixHit(blocks([1, 2, 9]))).toBe(2);
    expect(cache.use(blocks([1, 2, 4]), null)).toBe(3);
    const events = cache.takeEvents();
    expect(events).toEqual([{ stored: { parent: 1002n, blocks: blocks([4]) } }]);
  });

  test('evicts the least recently used cached block, tails before prefixes', () => {
    const cache = new KvCache(4);
    cache.use(blocks([1, 2, 3]), null);
    cache.release(blocks([1, 2, 3])); // released tail first: LRU order 3, 2, 1
    cache.takeEvents();
    expect(cache.use(blocks([7, 8]), null)).toBe(2);
    expect(cache.takeEvents().filter((e) => 'removed' in e)).toEqual([{ removed: [1003n] }]);
    expect(cache.prefixHit(blocks([1, 2]))).toBe(2);
  });

  test('activePrefix counts the blocks of a hit that are in use, not those only cached', () => {
    const cache = new KvCache(8);
    cache.use(blocks([1, 2, 3]), null);
    cache.release(blocks([3]));
    const prompt = blocks([1, 2, 3, 4]);
    expect(cache.prefixHit(prompt)).toBe(3);
    expect(cache.activePrefix(prompt, 3)).toBe(2);
    expect(cache.activePrefix(prompt, 1)).toBe(1);
  });

  test('a pool full of blocks in use takes only what fits', () => {
    const cache = new KvCache(3);
    expect(cache.use(blocks([1, 2, 3, 4]), null)).toBe(3);
    expect(cache.usePrivate()).toBe(false);
    cache.release(blocks([3]));
    expect(cache.usePrivate()).toBe(true);
  });

  test('a promoted block merges with an identical cached one', () => {
    const cache = new KvCache(4);
    cache.use(blocks([1]), null);
    cache.release(blocks([1]));
    cache.takeEvents();
    expect(cache.usePrivate()).toBe(true);
    cache.promote(blocks([1])[0], null);
    expect(cache.takeEvents()).toEqual([]);
    expect(cache.used).toBe(1);
  });
});

const config = (over: Partial<EngineConfig> = {}): EngineConfig => ({
  blockSize: 4,
  numGpuBlocks: 64,
  maxNumSeqs: 8,
  maxNumBatchedTokens: 32,
  speedup: 1,
  timing: 'classic',
  ...over,
});
const request = (uid: number, ids: number[], extra: number, out: number) => new SimRequest(uid, ids.length * 4 + extra, out, blocks(ids));

describe('block ids of the pools', () => {
  test('equal hashes share an id, different ones never do, even when their low 32 bits agree', () => {
    const ids = new BlockIds();
    const low = 0x1234_5678n;
    const a = ids.of(new BigUint64Array([low, low | (1n << 40n), 7n, low]));
    expect(Array.from(a)).toEqual([0, 1, 2, 0]);
    expect(Array.from(ids.of(new BigUint64Array([7n, low | (1n << 40n), low | (1n << 63n)])))).toEqual([2, 1, 3]);
    expect(ids.size).toBe(4);
  });

  test('the LRU evicts in release order across many evictions', () => {
    const cache = new KvCache(4);
    for (let round = 0; round < 50; round++) {
      const bs = blocks([4 * round + 1, 4 * round + 2]);
      expect(cache.use(bs, null)).toBe(2);
      cache.release(bs);
    }
    // 100 distinct blocks went through a pool of 4: the 4 most recently released remain.
    expect(cache.prefixHit(blocks([197]))).toBe(1);
    expect(cache.prefixHit(blocks([198]))).toBe(1);
    expect(cache.prefixHit(blocks([193]))).toBe(1);
    expect(cache.prefixHit(blocks([189]))).toBe(0);
    const removed = cache.takeEvents().flatMap((e) => ('removed' in e ? e.removed : []));
    expect(removed.length).toBe(96);
    // Released tail first, so within a pair the tail (2nd block) goes first.
    expect(removed.slice(0, 2)).toEqual([1002n, 1001n]);
  });
});

describe('engine (classic timing; scheduling is the same under both models)', () => {
  test("timing follows the polynomials of Dynamo's mocker", () => {
    expect(prefillMs(0)).toBe(0);
    expect(prefillMs(1000)).toBeCloseTo(4.209989e-7 * 1e6 + 15.18344 + 16.50142, 9);
    expect(decodeMs(0)).toBeCloseTo(5.74, 9);
    expect(decodeMs(0.5)).toBeCloseTo(-25.74 * 0.25 + 54.01 * 0.5 + 5.74, 9);
    expect(decodeMs(2)).toBeCloseTo(decodeMs(1), 9);
  });

  test('a request prefills, emits its first token at the end of that pass, then decodes to completion', () => {
    const e = new Engine(config());
    const r = request(1, [1, 2], 2, 3); // 10 prompt tokens, 3 output tokens
    r.arrivalMs = 0;
    e.enqueue(r);
    const first = e.step(0);
    expect(first.firstTokens).toEqual([r]);
    expect(first.durationMs).toBeCloseTo(prefillMs(10) + decodeMs(3 / 64), 9);
    expect(r.firstTokenMs).toBe(first.durationMs);
    expect(first.events.map(stored)).toEqual([[1, 2]]);
    let t = first.durationMs;
    const second = e.step(t);
    t += second.durationMs;
    expect(second.finished).toEqual([]);
    const third = e.step(t);
    expect(third.finished).toEqual([r]);
    expect(r.generated).toBe(3);
    // 10 prompt + 2 decoded tokens = 12: the third block filled and was announced
    expect([...second.events, ...third.events].flatMap((x) => stored(x) ?? []).length).toBe(1);
    expect(e.idle).toBe(true);
    expect(e.cache.used).toBe(0);
  });

  test('a cached prefix is reused: fewer tokens to prefill, counted as reused', () => {
    const e = new Engine(config());
    const a = request(1, [1, 2, 3], 0, 1);
    e.enqueue(a);
    e.step(0);
    const b = request(2, [1, 2, 9], 0, 1);
    e.enqueue(b);
    const pass = e.step(100);
    expect(b.reusedTokens).toBe(8);
    expect(pass.events.map(stored)).toEqual([[9]]);
    const fresh = new Engine(config());
    fresh.enqueue(request(3, [1, 2, 9], 0, 1));
    const cold = fresh.step(0);
    expect(cold.durationMs - pass.durationMs).toBeCloseTo(prefillMs(12) - prefillMs(4), 9);
  });

  test("pulled KV (a disaggregated decode's prompt) takes no prefill time; the tokens past it do", () => {
    const cold = new Engine(config());
    cold.enqueue(request(1, [1, 2], 2, 3));
    const computed = cold.step(0);
    const pulled = new Engine(config());
    const r = request(1, [1, 2], 2, 3); // 10 prompt tokens
    r.remoteTokens = 10;
    pulled.enqueue(r);
    const pass = pulled.step(0);
    expect(pass.firstTokens).toEqual([r]);
    expect(pass.durationMs).toBeCloseTo(decodeMs(3 / 64), 9);
    expect(computed.durationMs - pass.durationMs).toBeCloseTo(prefillMs(10), 9);
    // Part pulled: the rest is computed.
    const partly = new Engine(config());
    const q = request(1, [1, 2], 2, 3);
    q.remoteTokens = 8;
    partly.enqueue(q);
    expect(partly.step(0).durationMs).toBeCloseTo(prefillMs(2) + decodeMs(3 / 64), 9);
  });

  test('long prompts are prefilled in chunks of the batch budget', () => {
    const e = new Engine(config({ maxNumBatchedTokens: 16 }));
    const r = request(1, [1, 2, 3, 4, 5, 6, 7, 8], 0, 1); // 32 tokens
    e.enqueue(r);
    const p1 = e.step(0);
    expect(p1.firstTokens).toEqual([]);
    expect(p1.durationMs).toBeCloseTo(prefillMs(16), 9);
    const p2 = e.step(p1.durationMs);
    expect(p2.firstTokens).toEqual([r]);
  });

  test('a decode pass needs blocks for the context, not for the token it samples', () => {
    // 7 prompt tokens: one full block and a partial one. The first pass prefills them and samples
    // token 8; the second computes token 8's KV, filling the partial block, and samples token 9,
    // whose KV (and block) waits for the third pass.
    const e = new Engine(config());
    const r = request(1, [1], 3, 4);
    e.enqueue(r);
    expect(e.step(0).firstTokens).toEqual([r]);
    expect(e.cache.used).toBe(2);
    const second = e.step(1);
    expect(r.generated).toBe(2);
    expect(e.cache.used).toBe(2);
    expect(second.events.flatMap(stored)).toHaveLength(1); // the filled block, announced
    e.step(2);
    expect(e.cache.used).toBe(3);
  });

  /** Two requests that cannot both fit, run to the end. */
  function preemptingPair() {
    // Each request alone needs 7 blocks (8 prompt + 20 output tokens); both together need 14.
    const e = new Engine(config({ numGpuBlocks: 8, maxNumBatchedTokens: 64 }));
    const old = request(1, [1, 2], 0, 20);
    const young = request(2, [3, 4], 0, 20);
    e.enqueue(old);
    e.enqueue(young);
    let t = 0;
    for (let i = 0; i < 200 && !e.idle; i++) t += e.step(t).durationMs;
    return { e, old, young };
  }

  test('when blocks run out, the newest running request is preempted and resumes later', () => {
    const { e, old, young } = preemptingPair();
    expect(e.idle).toBe(true);
    expect(young.preemptions).toBeGreaterThan(0);
    expect(old.preemptions).toBe(0);
    expect([old.generated, young.generated]).toEqual([20, 20]);
    expect(e.cache.used).toBe(0);
  });

  test('every gap between two tokens is recorded: output − 1 per request, summing to last − first', () => {
    const { e, old, young } = preemptingPair();
    expect(young.preemptions).toBeGreaterThan(0);
    // The young request was preempted: its gaps include the stall, still one per token.
    expect(e.tokenGaps.length).toBe(19 + 19);
    const sum = e.tokenGaps.reduce((a, b) => a + b, 0);
    expect(sum).toBeCloseTo(old.lastTokenMs - old.firstTokenMs + (young.lastTokenMs - young.firstTokenMs), 6);
    expect(Math.max(...e.tokenGaps)).toBeGreaterThan(Math.min(...e.tokenGaps));
  });

  test('at most maxNumSeqs requests run at once', () => {
    const e = new Engine(config({ maxNumSeqs: 2, maxNumBatchedTokens: 64 }));
    for (let i = 0; i < 4; i++) e.enqueue(request(i, [10 + i], 0, 5));
    e.step(0);
    expect(e.running).toBe(2);
  });
});

describe("engine with Dynamo 1.6's timing (the default)", () => {
  const dynamo = (over: Partial<EngineConfig> = {}) => config({ timing: 'dynamo', ...over });

  test('the default timing model is dynamo', () => {
    const { timing: _, ...noTiming } = dynamo();
    const e = new Engine(noTiming);
    e.enqueue(request(1, [1, 2], 0, 2));
    expect(e.step(0).durationMs).toBeCloseTo(prefillMs(8), 9);
  });

  test('rule 1: the prefill polynomial is applied once, to the pass total', () => {
    const e = new Engine(dynamo());
    const c = new Engine(config());
    for (const engine of [e, c]) for (let i = 0; i < 3; i++) engine.enqueue(request(i, [10 * i + 1, 10 * i + 2], 0, 2));
    // Three 8-token prompts in one pass: one constant, not three.
    expect(e.step(0).durationMs).toBeCloseTo(prefillMs(24), 9);
    const classic = c.step(0).durationMs;
    expect(classic).toBeCloseTo(3 * prefillMs(8) + decodeMs(c.cache.used / 64), 9);
    expect(classic - prefillMs(24)).toBeGreaterThan(2 * 16.5);
  });

  test('rule 2: a pass in which nothing is decoding yet charges no decode step', () => {
    const e = new Engine(dynamo());
    const r = request(1, [1, 2], 2, 3); // 10 prompt tokens
    e.enqueue(r);
    const first = e.step(0);
    expect(first.firstTokens).toEqual([r]);
    expect(first.durationMs).toBeCloseTo(prefillMs(10), 9);
    // Next pass: r decodes (11 tokens = 3 blocks of 4), nothing to prefill.
    expect(e.step(first.durationMs).durationMs).toBeCloseTo(decodeMs(3 / 64), 9);
  });

  test('rule 3: decode occupancy sums the decoding sequences, a shared prefix once per sequence', () => {
    const e = new Engine(dynamo({ maxNumBatchedTokens: 64 }));
    const c = new Engine(config({ maxNumBatchedTokens: 64 }));
    for (const engine of [e, c]) for (let i = 0; i < 4; i++) engine.enqueue(request(i, [1, 2, 3, 4], 0, 4));
    const t = e.step(0).durationMs;
    c.step(0);
    // Each sequence holds 17 tokens = 5 blocks; 4 sequences = 20 blocks, though the shared
    // prefix is only 4 blocks in the pool.
    expect(e.step(t).durationMs).toBeCloseTo(decodeMs(20 / 64), 9);
    const used = c.cache.used;
    expect(used).toBeLessThan(20);
    expect(c.step(t).durationMs).toBeCloseTo(decodeMs(used / 64), 9);
  });
});
