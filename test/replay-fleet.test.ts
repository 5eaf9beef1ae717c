/**
 * The replay fleet (the engine ranks and the clock of one simulated run), on both backends:
 * the Rust core's `Fleet` and its TypeScript twin. The fleet is internal; these tests drive it
 * through the backend interface the simulation uses, with pass timings computed by hand from
 * Dynamo's polynomials. Whole replays are compared across backends in replay.test.ts.
 */
import { describe, expect, test } from 'vitest';
import { resolveBackend } from '../ts/backend.js';
import type { IndexBackend, ReplayFleetSpec } from '../ts/backend-types.js';
import { KvRouteError } from '../ts/errors.js';
import { generateTrace, type ReplayReport, replay } from '../ts/index.js';
import { decodeMs, prefillMs } from '../ts/replay/timing.js';
import { BACKENDS } from './helpers/backends.js';
import { drive, fleetSpec, type Req } from './helpers/replay-fleet.js';
import { withoutWallClock } from './helpers/replay-report.js';

describe.each(BACKENDS)('replay fleet (%s)', (backend) => {
  const make = (over: Partial<ReplayFleetSpec> = {}) => resolveBackend(backend).createReplayFleet(fleetSpec(over));

  test('rules 1, 2 and 4 (Dynamo timing): same-instant arrivals share one pass, one prefill polynomial on its total, no decode step', () => {
    const { outcomes } = drive(make(), [
      { at: 0, blocks: [1, 2], input: 8, output: 1 },
      { at: 0, blocks: [3, 4], input: 8, output: 1 },
    ]);
    // One pass of 16 new tokens; nothing was decoding, so no decode step.
    expect(outcomes[0].firstToken).toBe(prefillMs(16));
    expect(outcomes[1].firstToken).toBe(prefillMs(16));
    expect(outcomes[1].lastToken).toBe(prefillMs(16));
  });

  test('classic timing: the pass starts at the first arrival, one polynomial per chunk, a decode step in every pass', () => {
    const { outcomes } = drive(make({ timing: 'classic' }), [
      { at: 0, blocks: [1, 2], input: 8, output: 1 },
      { at: 0, blocks: [3, 4], input: 8, output: 1 },
    ]);
    // Pass 1: request 0 alone (8 tokens) plus a decode step at 2 blocks in use of 64 (the
    // finished request's blocks are released after the occupancy is read).
    const first = prefillMs(8) + decodeMs(2 / 64);
    expect(outcomes[0].firstToken).toBe(first);
    // Pass 2, right after: request 1 (8 tokens), decode at 2 blocks in use (request 0's are
    // cached now, not in use).
    expect(outcomes[1].firstToken).toBe(first + prefillMs(8) + decodeMs(2 / 64));
  });

  test('rule 3 (Dynamo timing): decode occupancy sums the decoding sequences, a shared prefix once per sequence', () => {
    const { outcomes } = drive(make(), [
      { at: 0, blocks: [1, 2], input: 9, output: 2 },
      { at: 0, blocks: [1, 2], input: 9, output: 2 },
    ]);
    // Pass 1: request 0 prefills 9 tokens; request 1 finds 8 cached and computes its last one.
    expect(outcomes[1].reused).toBe(8);
    expect(outcomes[0].firstToken).toBe(prefillMs(10));
    // Pass 2: both decode at 10 tokens = 3 blocks each, summed: 6 of 64 (not the 4 unique ones).
    const end = prefillMs(10) + decodeMs(6 / 64);
    expect(outcomes[0].lastToken).toBe(end);
    expect(outcomes[1].lastToken).toBe(end);
  });

  test("decodeSpeedup divides a pass's decode time on top of the speedup, its prefill time not (Dynamo's decode_speedup_ratio)", () => {
    // Classic timing: every pass has both parts. Request 0's only pass, then request 1's.
    const classic = drive(make({ timing: 'classic', speedup: 2, decodeSpeedup: 4 }), [
      { at: 0, blocks: [1, 2], input: 8, output: 1 },
      { at: 0, blocks: [3, 4], input: 8, output: 1 },
    ]).outcomes;
    const pass = prefillMs(8) / 2 + decodeMs(2 / 64) / (2 * 4);
    expect(classic[0].firstToken).toBe(pass);
    expect(classic[1].firstToken).toBe(pass + pass);
    // Dynamo timing: the first token's pass is prefill alone; the three decode passes after it run 4 times faster.
    const { wakes } = drive(make({ decodeSpeedup: 4 }), [{ at: 5, blocks: [1, 2], input: 8, output: 4 }]);
    const first = 5 + prefillMs(8);
    expect(wakes[1][1]).toBe(first);
    expect(wakes[2][1]).toBeCloseTo(first + (3 * decodeMs(3 / 64)) / 4, 9);
  });

  test('wakes its caller only for arrivals and passes with first tokens or completions', () => {
    const { wakes } = drive(make(), [{ at: 5, blocks: [1, 2], input: 8, output: 4 }]);
    // The arrival, the first-token pass, the completing pass: the two quiet decode passes in
    // between never reach the caller.
    expect(wakes.map(([kind]) => kind)).toEqual([1, 2, 2]);
    expect(wakes[0][1]).toBe(5);
    const first = 5 + prefillMs(8);
    expect(wakes[1][1]).toBe(first);
    // Decode passes at 9, 10 and 11 tokens: 3 blocks each.
    expect(wakes[2][1]).toBeCloseTo(first + 3 * decodeMs(3 / 64), 9);
  });

  test('CPU offload: a prompt the GPU evicted loads back from host memory at the load time per block, and the index hears the host tier', () => {
    const reqs: Req[] = [
      { at: 0, blocks: [1, 2, 3], input: 12, output: 1 },
      // Four blocks of its own: the GPU (4 blocks) evicts the first prompt's three.
      { at: 100, blocks: [5, 6, 7, 8], input: 16, output: 1 },
      // The first prompt again, and one token more.
      { at: 200, blocks: [1, 2, 3], input: 13, output: 1 },
    ];
    const without = drive(make({ numGpuBlocks: 4, requests: 3 }), reqs).outcomes[2];
    expect(without).toMatchObject({ reused: 0, firstToken: 200 + prefillMs(13) });
    const indexes: IndexBackend[] = [resolveBackend(backend).createIndex(1)];
    try {
      const { outcomes } = drive(make({ numGpuBlocks: 4, hostBlocks: 16, hostLoadMsPerBlock: 0.5, indexes, requests: 3 }), reqs);
      // Three blocks loaded back (0.5 ms each; the request waits for them, the engine idle), one token prefilled.
      expect(outcomes[2]).toMatchObject({ reused: 12, firstToken: 200 + (prefillMs(1) + 3 * 0.5) });
      // Host memory holds both prompts' blocks; the GPU the first prompt's again.
      expect(indexes[0].stats().lowerTiers.slice(0, 6)).toEqual([7, 7, 0, 0, 0, 0]);
      expect(indexes[0].findMatches(BigUint64Array.of(1n, 2n, 3n), 0)[0]).toMatchObject({ blocks: 3 });
    } finally {
      for (const index of indexes) index.close();
    }
    expect(() => make({ hostBlocks: -1 })).toThrow(KvRouteError);
    expect(() => make({ hostLoadMsPerBlock: Number.NaN })).toThrow(KvRouteError);
  });

  test('CPU offload copies prompt blocks to host memory, not output blocks', () => {
    const indexes: IndexBackend[] = [resolveBackend(backend).createIndex(1)];
    try {
      // Three prompt blocks, then nine output tokens: two more full blocks on the GPU.
      drive(make({ hostBlocks: 16, hostLoadMsPerBlock: 0.5, indexes, requests: 1 }), [{ at: 0, blocks: [1, 2, 3], input: 12, output: 9 }]);
      expect(indexes[0].stats().blocks).toBe(5);
      expect(indexes[0].stats().lowerTiers.slice(0, 2)).toEqual([3, 3]);
    } finally {
      for (const index of indexes) index.close();
    }
  });

  test("delivers each pass's KV events to the routers' indexes", () => {
    const indexes: IndexBackend[] = [resolveBackend(backend).createIndex(1), resolveBackend(backend).createIndex(1)];
    try {
      drive(make({ indexes, workers: [7] }), [{ at: 0, blocks: [1, 2, 3], input: 12, output: 1 }]);
      for (const index of indexes) {
        const [score] = index.findMatches(BigUint64Array.of(1n, 2n, 3n), 0);
        expect(score).toMatchObject({ workerId: 7n, dpRank: 0, blocks: 3 });
      }
    } finally {
      for (const index of indexes) index.close();
    }
  });

  test('a full pool evicts the least recently used cached blocks, tails first, and announces the removals', () => {
    const index = resolveBackend(backend).createIndex(1);
    try {
      // 4 blocks: the second request's prompt needs two of the first's cached blocks, which
      // were released tail first (3, then 2, then 1), so 3 and 2 go and 1 stays.
      drive(make({ indexes: [index], numGpuBlocks: 4 }), [
        { at: 0, blocks: [1, 2, 3], input: 12, output: 1 },
        { at: 100, blocks: [4, 5, 6], input: 12, output: 1 },
      ]);
      expect(index.findMatches(BigUint64Array.of(1n, 2n, 3n), 0)[0]?.blocks).toBe(1);
      expect(index.findMatches(BigUint64Array.of(4n, 5n, 6n), 0)[0]?.blocks).toBe(3);
    } finally {
      index.close();
    }
  });

  test('bad arguments are typed errors that change nothing', () => {
    const fleet = make();
    const bad = [
      () => fleet.enqueue(3, 0),
      () => fleet.load(Float64Array.of(0), Uint32Array.of(9)),
      () => fleet.load(Float64Array.of(Number.NaN), Uint32Array.of(0)),
      () => fleet.setNextTurn(0, 1, -1),
      () => fleet.addRequest(0, 8, 1, BigUint64Array.of(1n), new BigUint64Array(0)),
    ];
    for (const call of bad) {
      expect(call).toThrow(KvRouteError);
      try {
        call();
      } catch (err) {
        expect((err as KvRouteError).code).toBe('ERR_INVALID_ARG');
      }
    }
    expect(() => make({ blockSize: 0 })).toThrow(KvRouteError);
    for (const decodeSpeedup of [0, -1, Number.NaN, Number.POSITIVE_INFINITY])
      expect(() => make({ decodeSpeedup }), String(decodeSpeedup)).toThrow(/decodeSpeedup must be a positive number/);
    // A request is added once, and enqueued once, after it is added.
    expect(() => fleet.enqueue(0, 1)).toThrow(/not added/);
    fleet.addRequest(1, 8, 1, BigUint64Array.of(1n, 2n), BigUint64Array.of(1n, 2n));
    expect(() => fleet.addRequest(1, 8, 1, BigUint64Array.of(1n, 2n), BigUint64Array.of(1n, 2n))).toThrow(/added already/);
    // Nothing was queued by the rejected calls.
    expect(fleet.run(new Float64Array(2))).toBe(0);
  });

  test('a request is enqueued once, and runs once', () => {
    const fleet = make();
    fleet.addRequest(0, 8, 1, BigUint64Array.of(1n, 2n), BigUint64Array.of(1n, 2n));
    fleet.enqueue(0, 0);
    expect(() => fleet.enqueue(0, 0)).toThrow(/enqueued already/);
    const header = new Float64Array(2);
    expect(fleet.run(header)).toBe(2);
    expect(Array.from(fleet.finished(0))).toEqual([0]);
    expect(fleet.run(header)).toBe(0);
  });
});

describe('native and JS fleets agree on random workloads', () => {
  const shapes = [
    { workers: 3, dpSize: 2, numGpuBlocks: 700, maxNumSeqs: 16, maxNumBatchedTokens: 2048 },
    { workers: 2, numGpuBlocks: 400, maxNumSeqs: 64, maxNumBatchedTokens: 4096, routerConfig: { routerQueueThreshold: 0.5 } },
    { workers: 5, numGpuBlocks: 2000, maxNumSeqs: 4, maxNumBatchedTokens: 1024, arrivalSpeedup: 4 },
  ];
  test.each([1, 2, 3, 4, 5, 6])('seed %i', async (seed) => {
    const shape = shapes[seed % shapes.length];
    const trace = generateTrace({
      requests: 150,
      rate: 20,
      prefixGroups: 1 + (seed % 4),
      sharedPrefixBlocks: 2 + seed,
      turns: 1 + (seed % 3),
      seed,
    });
    const timing = seed % 2 === 0 ? ('classic' as const) : ('dynamo' as const);
    const opts = { trace, policies: ['kv' as const, 'round-robin' as const], timing, ...shape, seed };
    const strip = (r: ReplayReport) => withoutWallClock({ ...r, config: { ...r.config, backend: undefined } });
    const native = strip(await replay({ ...opts, backend: 'native' }));
    const js = strip(await replay({ ...opts, backend: 'js' }));
    expect(js).toEqual(native);
    // And the native run repeats exactly (its index applies on writer threads).
    expect(strip(await replay({ ...opts, backend: 'native' }))).toEqual(native);
  });
});
