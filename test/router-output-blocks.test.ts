/**
 * Output-block tracking (`routerTrackOutputBlocks`, Dynamo's `router_track_output_blocks`) on
 * both backends: `markOutputTokens` adds a block of the request's own at each block boundary
 * its sequence crosses, and a request routed with `maxOutputTokens` weighs the blocks it alone
 * holds by the share of its output still to come. Hand-computed figures, bad input, and a seeded
 * comparison with a deliberately simple model that recounts every rank from scratch.
 */
import { describe, expect, test } from 'vitest';
import { type KvRouter, MAX_TOKENS_PER_REQUEST } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { expectKvError } from './helpers/errors.js';
import { Rng } from './helpers/random.js';
import { routerSuite } from './helpers/routers.js';

const BS = 4;
const tokens = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

/** Active blocks of each worker (rank 0), from the router's stats. */
function activeBlocks(r: KvRouter): Record<string, number> {
  return Object.fromEntries(r.stats().load.map((l) => [String(l.workerId), l.activeBlocks]));
}

describe.each(BACKENDS)('output-block tracking (%s)', (backend) => {
  const { clock, make } = routerSuite(backend, BS);

  test('a block joins at each boundary the output crosses; an expected output decays what the request alone holds', async () => {
    const r = make({ routerTrackOutputBlocks: true });
    r.addWorker(1);
    r.addWorker(2);
    // B: 10 prompt tokens, 2 full blocks tracked; no expected output, so no decay.
    await r.route({ requestId: 'b', tokens: tokens(100, 10), allowedWorkers: [1] });
    r.markOutputTokens('b', 1); // ceil(11/4) = ceil(10/4): no new block
    expect(activeBlocks(r)).toEqual({ 1: 2 });
    r.markOutputTokens('b', 6); // ceil(16/4) = 4: one block
    expect(activeBlocks(r)).toEqual({ 1: 3 });
    r.markOutputTokens('b', 7); // ceil(17/4) = 5: another
    r.markOutputTokens('b', 5); // an older total changes nothing
    expect(activeBlocks(r)).toEqual({ 1: 4 });

    // C: 8 prompt tokens (2 blocks), expecting 8 output tokens.
    await r.route({ requestId: 'c', tokens: tokens(0, 8), maxOutputTokens: 8, allowedWorkers: [2] });
    r.markOutputTokens('c', 2); // 1 output block, decay 1 - 2/8: 3 × 0.75 = 2.25
    expect(activeBlocks(r)[2]).toBe(2);
    r.markOutputTokens('c', 6); // 2 output blocks, decay 0.25: 4 × 0.25 = 1
    expect(activeBlocks(r)[2]).toBe(1);
    r.markOutputTokens('c', 8); // no boundary crossed: Dynamo updates the decay only at one
    expect(activeBlocks(r)[2]).toBe(1);
    // D shares C's prompt: those 2 blocks count whole again; C's outputs decay to 0 at 9 tokens.
    await r.route({ requestId: 'd', tokens: tokens(0, 8), allowedWorkers: [2] });
    r.markOutputTokens('c', 9);
    expect(activeBlocks(r)[2]).toBe(2);
    // Others' decode estimate sees the same figure.
    const [w2] = r.potentialLoads({ requestId: 'x', tokens: tokens(500, 8), allowedWorkers: [2] });
    expect(w2.decodeBlocks).toBe(2 + 2);
    r.free('c');
    expect(activeBlocks(r)[2]).toBe(2);
    for (const id of ['b', 'd']) r.free(id);
    expect(r.stats().load).toEqual([]);
  });

  test('without the option, markOutputTokens only renews the lease', async () => {
    const r = make();
    r.addWorker(1);
    await r.route({ requestId: 'a', tokens: tokens(0, 8), maxOutputTokens: 4 });
    r.markOutputTokens('a', 100);
    expect(activeBlocks(r)).toEqual({ 1: 2 });
  });

  test('the lease is renewed by output progress', async () => {
    const r = make({ routerTrackOutputBlocks: true, requestExpirySecs: 10 });
    r.addWorker(1);
    await r.route({ requestId: 'a', tokens: tokens(0, 8) });
    clock.now += 8_000;
    r.markOutputTokens('a', 1);
    clock.now += 8_000;
    expect(r.stats()).toMatchObject({ inFlight: 1, expired: 0 });
    clock.now += 3_000;
    expect(r.stats()).toMatchObject({ inFlight: 0, expired: 1 });
  });

  test('bad input is refused and changes nothing; unknown ids and calls after close are counted', async () => {
    expectKvError(
      () => make({ routerTrackOutputBlocks: true, routerTrackActiveBlocks: false }),
      'ERR_INVALID_ARG',
      /routerTrackOutputBlocks/,
    );
    expectKvError(() => make({ routerTrackOutputBlocks: 'yes' as never }), 'ERR_INVALID_ARG', /routerTrackOutputBlocks/);
    const r = make({ routerTrackOutputBlocks: true });
    r.addWorker(1);
    await r.route({ requestId: 'a', tokens: tokens(0, 8), maxOutputTokens: 8 });
    for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '3', 2 ** 53, MAX_TOKENS_PER_REQUEST + 1])
      expectKvError(() => r.markOutputTokens('a', bad as number), 'ERR_INVALID_ARG', /generatedTokens/);
    expectKvError(() => r.markOutputTokens(7 as never, 1), 'ERR_INVALID_ARG', /requestId/);
    expect(activeBlocks(r)).toEqual({ 1: 2 });
    r.markOutputTokens('a', 100_000);
    expect(activeBlocks(r), "a long output past the request's expected one weighs nothing").toEqual({ 1: 0 });
    r.markOutputTokens('nobody', 5);
    expect(r.stats().unknownOutputTokens).toBe(1);
    r.close();
    r.markOutputTokens('a', 5);
    expect(r.stats().callsAfterClose).toBe(1);
  });

  test('seeded: every rank matches a model that recounts its blocks and their weights from scratch', async () => {
    const rng = new Rng(20261205);
    const r = make({ routerTrackOutputBlocks: true, routerTemperature: 0.5, seed: 3 });
    for (const w of [1, 2, 3]) r.addWorker(w);
    interface ModelRequest {
      worker: string;
      prompt: number;
      keys: string[];
      expected: number | undefined;
      generated: number;
      outputs: number;
    }
    const live = new Map<string, ModelRequest>();
    // Per worker: the weight of each block a single request decayed (the model's only state).
    const fractions = new Map<string, Map<string, number>>();
    const holders = (worker: string, key: string) => [...live.values()].filter((q) => q.worker === worker && q.keys.includes(key)).length;
    const modelActive = () => {
      const out: Record<string, number> = {};
      for (const worker of new Set([...live.values()].map((q) => q.worker))) {
        const keys = new Set([...live.values()].filter((q) => q.worker === worker).flatMap((q) => q.keys));
        let sum = 0;
        for (const k of keys) sum += holders(worker, k) === 1 ? (fractions.get(worker)?.get(k) ?? 1) : 1;
        out[worker] = Math.round(sum);
      }
      return out;
    };
    const forget = (worker: string, keys: string[]) => {
      for (const k of keys) if (holders(worker, k) === 0) fractions.get(worker)?.delete(k);
    };
    for (let step = 0; step < 400; step++) {
      const op = rng.int(10);
      const ids = [...live.keys()];
      if (op < 4 || ids.length === 0) {
        const id = `q${step}`;
        const family = rng.int(3);
        const length = 1 + rng.int(14);
        const prompt = tokens(family * 1000, length);
        const expected = rng.int(2) === 0 ? undefined : 2 ** rng.int(5);
        const d = await r.route({ requestId: id, tokens: prompt, ...(expected === undefined ? {} : { maxOutputTokens: expected }) });
        const worker = String(d.workerId);
        const keys = Array.from({ length: Math.floor(length / BS) }, (_, i) => `${family}:${i}`);
        live.set(id, { worker, prompt: length, keys, expected, generated: 0, outputs: 0 });
        // A block that now has two holders is no longer decayed.
        for (const k of keys) if (holders(worker, k) === 2) fractions.get(worker)?.delete(k);
      } else if (op < 8) {
        const id = ids[rng.int(ids.length)];
        const q = live.get(id) as ModelRequest;
        const total = rng.int(4) === 0 ? rng.int(q.generated + 1) : q.generated + 1 + rng.int(6);
        r.markOutputTokens(id, total);
        if (total > q.generated) {
          q.generated = total;
          const due = Math.ceil((q.prompt + total) / BS) - Math.ceil(q.prompt / BS);
          if (due > q.outputs) {
            for (let i = q.outputs; i < due; i++) q.keys.push(`${id}:out:${i}`);
            q.outputs = due;
            if (q.expected !== undefined) {
              const decay = Math.max(0, 1 - total / Math.max(q.expected, 1));
              const own = fractions.get(q.worker) ?? new Map<string, number>();
              fractions.set(q.worker, own);
              for (const k of q.keys) if (holders(q.worker, k) === 1) decay < 1 ? own.set(k, decay) : own.delete(k);
            }
          }
        }
      } else {
        const id = ids[rng.int(ids.length)];
        const q = live.get(id) as ModelRequest;
        r.free(id);
        live.delete(id);
        forget(q.worker, q.keys);
      }
      expect(activeBlocks(r), `step ${step}`).toEqual(modelActive());
    }
  });
});
