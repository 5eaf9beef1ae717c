/**
 * Dynamo's current cost: overlap credit, prefill scale, credit decay, active-request weight, the
 * shared-cache credit, the `lmetric` selection policy and the decode-only branch, on both
 * backends, against hand-computed figures and, seeded, against a deliberately simple model of
 * Dynamo's formula (in blocks, as Dynamo computes it), with a request's `batchPrompts` added.
 */
import { describe, expect, test } from 'vitest';
import { blockHashes, KvRouter, type KvRouterOptions, type RouteDecision, type RouteOverrides, type RouteRequest } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { stored } from './helpers/events.js';
import { Rng } from './helpers/random.js';
import { routerSuite } from './helpers/routers.js';

const BS = 4;
const tokens = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

/** The model's per-rank state: cached block keys, and the requests in flight. */
interface ModelRank {
  cached: Set<string>;
}
interface ModelRequest {
  rank: string;
  keys: string[];
  prefill: number;
  /** Its bookings: one, and one per batch prompt. */
  bookings: number;
}

/** A block's identity in the model: the prompt up to the block's end. */
const blockKeys = (t: readonly number[]) => Array.from({ length: Math.floor(t.length / BS) }, (_, i) => t.slice(0, (i + 1) * BS).join(','));

interface ModelOptions {
  credit: number;
  scale: number;
  decay: number;
  requestWeight: number;
  trackPrefill: boolean;
  trackActive: boolean;
  lmetric: boolean;
  decodeWorker: boolean;
  /** Credit per shared-cache hit past a rank's device prefix. */
  sharedMultiplier: number;
  /** The request's shared-cache hits: a flag per full block. */
  sharedHits: boolean[];
}

/** Flags per block as sorted `[start, end)` runs, the form `sharedCacheHits` takes. */
function runs(flags: readonly boolean[]): [number, number][] {
  const out: [number, number][] = [];
  flags.forEach((hit, i) => {
    if (!hit) return;
    const last = out.at(-1);
    if (last && last[1] === i) last[1] = i + 1;
    else out.push([i, i + 1]);
  });
  return out;
}

/** Leading blocks of `keys` the set holds. */
function overlapOf(keys: readonly string[], cached: Set<string>): number {
  let overlap = 0;
  while (overlap < keys.length && cached.has(keys[overlap])) overlap++;
  return overlap;
}

/**
 * Dynamo's `worker_logit` for every candidate, from the model's state; a `batch` of other prompts
 * adds each one's uncached tokens (when prefill is tracked) and the distinct blocks not active on
 * the rank nor the request's own (when blocks are), uncredited.
 */
function modelCosts(
  o: ModelOptions,
  prompt: readonly number[],
  candidates: readonly string[],
  ranks: Map<string, ModelRank>,
  inFlight: Map<string, ModelRequest>,
  batch: readonly number[][] = [],
) {
  const keys = blockKeys(prompt);
  const isl = prompt.length;
  const rows = candidates.map((rank) => {
    const cached = ranks.get(rank)?.cached ?? new Set<string>();
    const overlap = overlapOf(keys, cached);
    const mine = [...inFlight.values()].filter((r) => r.rank === rank);
    const active = mine.reduce((sum, r) => sum + r.prefill, 0);
    const activeKeys = new Set(mine.flatMap((r) => r.keys));
    const fresh = keys.filter((k) => !activeKeys.has(k)).length;
    let batchUncached = 0;
    const batchKeys = new Set<string>();
    for (const b of batch) {
      const bKeys = blockKeys(b);
      if (o.trackPrefill) batchUncached += Math.max(0, b.length - overlapOf(bKeys, cached) * BS);
      for (const k of bKeys) if (!activeKeys.has(k) && !keys.includes(k)) batchKeys.add(k);
    }
    const batchFresh = batchKeys.size;
    const requests = mine.reduce((sum, r) => sum + r.bookings, 0);
    return { rank, overlap, active, activeBlocks: activeKeys.size, fresh, requests, batchUncached, batchFresh };
  });
  const least = Math.min(...rows.map((r) => r.active));
  const requestBlocks = Math.ceil(isl / BS);
  return rows.map((r) => {
    const decay = o.trackPrefill && o.decay > 0 ? 1 / (1 + (o.decay * ((r.active - least) / BS)) / requestBlocks) : 1;
    const raw = o.trackPrefill ? (r.active + isl) / BS : 0;
    const shared = o.sharedMultiplier * o.sharedHits.filter((hit, i) => hit && i >= r.overlap).length;
    const adjusted = Math.max(0, raw - o.credit * decay * r.overlap - (o.trackPrefill ? shared : 0)) + r.batchUncached / BS;
    const decode = r.activeBlocks + (o.trackActive ? r.fresh + r.batchFresh : 0);
    const cost =
      o.decodeWorker && !o.trackPrefill && o.credit > 0
        ? Math.max(0, decode - o.credit * r.overlap - shared) + o.requestWeight * r.requests
        : o.lmetric
          ? adjusted * (decode + 1)
          : o.scale * adjusted + decode + o.requestWeight * r.requests;
    return { ...r, decode, cost };
  });
}

describe.each(BACKENDS)("Dynamo's current cost on the %s backend", (backend) => {
  const { make } = routerSuite(backend, BS);
  const cache = (r: KvRouter, w: number, t: number[], n: number, dpRank = 0) =>
    r.applyEvent(stored(w, [...blockHashes(t, BS, { backend })].slice(0, n), { dpRank }));
  const costs = (d: RouteDecision) => d.candidates.map((c) => [Number(c.workerId), c.cost]);
  /** Workers 1 and 2, worker 1 caching the first `n` blocks of `t`. */
  const twoWorkers = async (opts: Partial<KvRouterOptions>, t: number[], n: number) => {
    const r = make(opts);
    r.addWorker(1);
    r.addWorker(2);
    cache(r, 1, t, n);
    await r.flush();
    return r;
  };

  test('overlapScoreCredit: a cached block saves that fraction of a block of prefill; 0 routes on load alone', async () => {
    const t = tokens(1, 12); // 3 blocks
    const half = await twoWorkers({ overlapScoreCredit: 0.5 }, t, 2);
    // w1: (12 − 0.5·2·4) / 4 = 2 prefill blocks + 3 decode = 5; w2: 12 / 4 + 3 = 6.
    const d = await half.route({ requestId: 'a', tokens: t });
    expect(costs(d)).toEqual([
      [1, 5],
      [2, 6],
    ]);
    // The booking and the reported cache hit stay the real ones: 4 uncached tokens, 8 cached.
    expect(d).toMatchObject({ workerId: 1n, cachedTokens: 8, cost: 5 });
    expect(d.candidates[0]).toMatchObject({ overlap: 2, prefillTokens: 4 });
    expect(half.stats().load).toEqual([expect.objectContaining({ workerId: 1n, activePrefillTokens: 4 })]);

    const none = await twoWorkers({ overlapScoreCredit: 0 }, t, 3);
    // Both 12 / 4 + 3 = 6: the tie goes to the smaller cache, w2, although w1 holds the prompt.
    const n = await none.route({ requestId: 'a', tokens: t });
    expect(costs(n)).toEqual([
      [1, 6],
      [2, 6],
    ]);
    expect(n).toMatchObject({ workerId: 2n, cachedTokens: 0 });

    // Above 1 a cached block offsets the rank's backlog too, down to nothing.
    const extra = await twoWorkers({ overlapScoreCredit: 2, routerTrackActiveBlocks: false }, t, 2);
    // w1: max(0, 12 − 2·2·4) = 0; w2: 12 / 4 = 3.
    expect(costs(await extra.route({ requestId: 'a', tokens: t }))).toEqual([
      [1, 0],
      [2, 3],
    ]);
    // w1 now has 4 uncached tokens of backlog: max(0, 4 + 12 − 16) = 0 again; a third request
    // with 4 more tokens of backlog on w1: (8 + 12 − 16) / 4 = 1.
    expect(costs(await extra.route({ requestId: 'b', tokens: t }))).toEqual([
      [1, 0],
      [2, 3],
    ]);
    expect(costs(await extra.route({ requestId: 'c', tokens: t }))).toEqual([
      [1, 1],
      [2, 3],
    ]);
  });

  test('prefillLoadScale scales the credited prefill; overlapScoreWeight is its older name', async () => {
    const t = tokens(1, 12);
    const routed = [];
    for (const opts of [
      { prefillLoadScale: 2, overlapScoreCredit: 0.5 },
      { overlapScoreWeight: 2, overlapScoreCredit: 0.5 },
    ]) {
      const r = await twoWorkers(opts, t, 2);
      routed.push(costs(await r.route({ requestId: 'a', tokens: t })));
    }
    // w1: 2 · (12 − 4) / 4 + 3 = 7; w2: 2 · 12 / 4 + 3 = 9.
    expect(routed).toEqual([
      [
        [1, 7],
        [2, 9],
      ],
      [
        [1, 7],
        [2, 9],
      ],
    ]);
  });

  test('overlapScoreCreditDecay: a cache-rich rank with a prefill backlog loses part of its credit', async () => {
    const t = tokens(1, 12); // 3 blocks, requestBlocks 3
    const other = tokens(100, 24); // 6 blocks, booked uncached on w1: 24 tokens = 6 blocks of backlog
    const run = async (decay: number) => {
      const r = await twoWorkers({ overlapScoreCreditDecay: decay, routerTrackActiveBlocks: false }, t, 3);
      await r.route({ requestId: 'backlog', tokens: other, pinnedWorker: { workerId: 1 } });
      return r.route({ requestId: 'a', tokens: t });
    };
    // No decay: w1 (24 + 12 − 3·4) / 4 = 6, w2 12 / 4 = 3 → w2 wins anyway; both without decode.
    expect(costs(await run(0))).toEqual([
      [1, 6],
      [2, 3],
    ]);
    // Decay 1: w1's excess is 6 blocks = 2 requests of 3 blocks, so its credit is 1 / (1 + 2):
    // (24 + 12 − 4) / 4 = 8.
    expect(costs(await run(1))).toEqual([
      [1, 8],
      [2, 3],
    ]);
  });

  test('decodeActiveRequestWeight: a cost per request in flight on the rank', async () => {
    const t = tokens(1, 8);
    const r = make({ decodeActiveRequestWeight: 1.5, routerTrackActiveBlocks: false });
    r.addWorker(1);
    r.addWorker(2, { dataParallelSize: 2 });
    for (const id of ['x', 'y']) {
      await r.route({ requestId: id, tokens: tokens(50, 8), pinnedWorker: { workerId: 1 } });
      r.markPrefillCompleted(id);
    }
    await r.route({ requestId: 'z', tokens: tokens(90, 8), pinnedWorker: { workerId: 2, dpRank: 1 } });
    r.markPrefillCompleted('z');
    // Prefill 8 / 4 = 2 everywhere (no cache, first tokens in); requests 2, 0 and 1.
    expect(r.potentialLoads({ requestId: 'q', tokens: t }).map((p) => [Number(p.workerId), p.dpRank, p.activeRequests])).toEqual([
      [1, 0, 2],
      [2, 0, 0],
      [2, 1, 1],
    ]);
    const d = await r.route({ requestId: 'a', tokens: t });
    expect(d.candidates.map((c) => [c.activeRequests, c.cost])).toEqual([
      [2, 5],
      [0, 2],
      [1, 3.5],
    ]);
    expect([d.workerId, d.dpRank]).toEqual([2n, 0]);
    r.free('x');
    expect(r.potentialLoads({ requestId: 'q', tokens: t })[0].activeRequests).toBe(1);
  });

  test("selectionPolicy 'lmetric': credited prefill blocks × (decode blocks + 1); a busy rank holding most of the prompt wins where the sum goes elsewhere", async () => {
    const t = tokens(1, 16); // 4 blocks
    const build = async (selectionPolicy: 'linear' | 'lmetric') => {
      const r = make({ selectionPolicy });
      r.addWorker(1);
      r.addWorker(2);
      cache(r, 1, t, 3);
      await r.flush();
      // Worker 1 also decodes a 6-block request (its prefill done).
      await r.route({ requestId: 'busy', tokens: tokens(500, 24), pinnedWorker: { workerId: 1 } });
      r.markPrefillCompleted('busy');
      return r.route({ requestId: 'a', tokens: t });
    };
    // Worker 1: 1 uncached block of prefill, 6 + 4 decode blocks; worker 2: 4 and 4.
    const linear = await build('linear');
    expect(costs(linear)).toEqual([
      [1, 1 + 10],
      [2, 4 + 4],
    ]);
    expect(linear.workerId).toBe(2n);
    const lmetric = await build('lmetric');
    expect(costs(lmetric)).toEqual([
      [1, 1 * (10 + 1)],
      [2, 4 * (4 + 1)],
    ]);
    expect(lmetric).toMatchObject({ workerId: 1n, cost: 11, cachedTokens: 12 });
    // A rank that holds the whole prompt costs nothing, whatever its decode load.
    const r = make({ selectionPolicy: 'lmetric', routerTrackPrefillTokens: true });
    r.addWorker(1);
    r.addWorker(2);
    cache(r, 1, t, 4);
    await r.flush();
    expect(costs(await r.route({ requestId: 'b', tokens: t }))).toEqual([
      [1, 0],
      [2, 20],
    ]);
  });

  test("workerType 'decode' without prefill tracking: cached blocks offset decode load (Dynamo's decode-only branch)", async () => {
    const t = tokens(1, 16); // 4 blocks
    const build = async (opts: Partial<KvRouterOptions>, cached: number, busy: boolean) => {
      const r = make({ routerTrackPrefillTokens: false, ...opts });
      r.addWorker(1);
      r.addWorker(2);
      cache(r, 1, t, cached);
      await r.flush();
      if (busy) await r.route({ requestId: 'busy', tokens: tokens(500, 24), pinnedWorker: { workerId: 1 } });
      return r;
    };
    // Aggregated without prefill tracking: decode load alone, so the cache is not seen (a tie).
    const aggregated = await build({}, 3, false);
    expect(costs(await aggregated.route({ requestId: 'a', tokens: t }))).toEqual([
      [1, 4],
      [2, 4],
    ]);
    // Decode: worker 1's 3 cached blocks offset its 4 decode blocks.
    const decode = await build({ workerType: 'decode' }, 3, false);
    const d = await decode.route({ requestId: 'a', tokens: t });
    expect(costs(d)).toEqual([
      [1, 1],
      [2, 4],
    ]);
    expect(d.workerId).toBe(1n);
    // A credit of 0 (Dynamo's usual decode router) is the usual cost again: decode load alone.
    decode.free('a');
    expect(costs(await decode.route({ requestId: 'b', tokens: t, overrides: { overlapScoreCredit: 0 } }))).toEqual([
      [1, 4],
      [2, 4],
    ]);
    // Its decode backlog still counts: 6 + 4 − 3 against 4; and the cost stops at 0.
    const busy = await build({ workerType: 'decode', decodeActiveRequestWeight: 0.5 }, 3, true);
    expect(costs(await busy.route({ requestId: 'a', tokens: t }))).toEqual([
      [1, 7 + 0.5],
      [2, 4],
    ]);
    const whole = await build({ workerType: 'decode', overlapScoreCredit: 2 }, 4, false);
    expect(costs(await whole.route({ requestId: 'a', tokens: t }))).toEqual([
      [1, 0],
      [2, 4],
    ]);
    // With prefill tracked, 'decode' costs as 'aggregated' does (and 'prefill' always does).
    const tracked = await build({ workerType: 'decode', routerTrackPrefillTokens: true }, 3, false);
    expect(costs(await tracked.route({ requestId: 'a', tokens: t }))).toEqual([
      [1, 1 + 4],
      [2, 4 + 4],
    ]);
  });

  test('sharedCacheHits: each rank is credited sharedCacheMultiplier per shared block at or past its device prefix', async () => {
    const t = tokens(1, 18); // 4 full blocks and 2 tokens
    const r = await twoWorkers({ sharedCacheMultiplier: 0.5 }, t, 1);
    const route = (id: string, extra: Partial<RouteRequest>) => r.route({ requestId: id, tokens: t, ...extra });
    // The shared store holds all 4 blocks: worker 1 loads 3 past its device block, worker 2 all 4.
    // w1: 18/4 − 1 − 0.5·3 = 2 prefill blocks + 4 decode; w2: 18/4 − 0.5·4 = 2.5 + 4.
    const d = await route('a', { sharedCacheHits: [[0, 4]] });
    expect(costs(d)).toEqual([
      [1, 2 + 4],
      [2, 2.5 + 4],
    ]);
    expect(d.candidates.map((c) => [c.sharedBlocks, c.cachedTokens, c.prefillTokens])).toEqual([
      [3, 4, 14],
      [4, 0, 18],
    ]);
    r.free('a');
    // Hits with a hole count only at or past the device prefix: [0, 1) is worker 1's already.
    const gap = await route('b', {
      sharedCacheHits: [
        [0, 1],
        [2, 4],
      ],
    });
    expect(gap.candidates.map((c) => [c.sharedBlocks, c.cost])).toEqual([
      [2, 18 / 4 - 1 - 1 + 4],
      [3, 18 / 4 - 1.5 + 4],
    ]);
    r.free('b');
    // The multiplier is a request override too; 0 (or no hits) is the cost without the store.
    const off = await route('c', { sharedCacheHits: [[0, 4]], overrides: { sharedCacheMultiplier: 0 } });
    expect(costs(off)).toEqual([
      [1, 18 / 4 - 1 + 4],
      [2, 18 / 4 + 4],
    ]);
    expect(off.candidates.map((c) => c.sharedBlocks)).toEqual([3, 4]);
    r.free('c');
    const none = await route('d', {});
    expect(costs(none)).toEqual(costs(off));
    expect(none.candidates.map((c) => c.sharedBlocks)).toEqual([0, 0]);
  });

  test("a request's overrides replace the credit and the scale", async () => {
    const t = tokens(1, 12);
    const r = await twoWorkers({}, t, 2);
    const with_ = async (overrides: RouteOverrides) => {
      const d = await r.route({ requestId: 'o', tokens: t, overrides });
      r.free('o');
      return costs(d);
    };
    expect(await with_({})).toEqual([
      [1, 4],
      [2, 6],
    ]);
    expect(await with_({ overlapScoreCredit: 0 })).toEqual([
      [1, 6],
      [2, 6],
    ]);
    expect(await with_({ prefillLoadScale: 0.5, overlapScoreCredit: 0.5 })).toEqual([
      [1, 4],
      [2, 4.5],
    ]);
    expect(await with_({ overlapScoreWeight: 0 })).toEqual([
      [1, 3],
      [2, 3],
    ]);
  });

  test('bad weights are refused with the option named, and change nothing', async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ overlapScoreCredit: -0.1 }, /opts\.overlapScoreCredit must be a finite number >= 0, got -0\.1/],
      [{ overlapScoreCredit: Number.NaN }, /opts\.overlapScoreCredit/],
      [{ overlapScoreCredit: '1' }, /opts\.overlapScoreCredit/],
      [{ prefillLoadScale: -1 }, /opts\.prefillLoadScale must be a finite number >= 0/],
      [{ prefillLoadScale: Number.POSITIVE_INFINITY }, /opts\.prefillLoadScale/],
      [{ overlapScoreWeight: -1 }, /opts\.overlapScoreWeight must be a finite number >= 0/],
      [{ overlapScoreWeight: 1, prefillLoadScale: 1 }, /opts\.overlapScoreWeight is the older name of prefillLoadScale/],
      [{ overlapScoreCreditDecay: -1 }, /opts\.overlapScoreCreditDecay/],
      [{ overlapScoreCreditDecay: null }, /opts\.overlapScoreCreditDecay/],
      [{ decodeActiveRequestWeight: Number.NaN }, /opts\.decodeActiveRequestWeight/],
      [{ selectionPolicy: 'blitz' }, /opts\.selectionPolicy must be 'linear' or 'lmetric', got "blitz"/],
      [{ selectionPolicy: 'lmetric', prefillLoadScale: 2 }, /opts\.prefillLoadScale is a term of the linear cost .* 'lmetric'/],
      [{ selectionPolicy: 'lmetric', overlapScoreWeight: 1 }, /opts\.overlapScoreWeight is a term of the linear cost/],
      [{ selectionPolicy: 'lmetric', decodeActiveRequestWeight: 0 }, /opts\.decodeActiveRequestWeight is a term of the linear cost/],
      [{ workerType: 'encode' }, /opts\.workerType must be 'aggregated', 'prefill' or 'decode', got "encode"/],
      [{ sharedCacheMultiplier: -0.5 }, /opts\.sharedCacheMultiplier must be a finite number >= 0/],
      [{ workerType: 'decode', selectionPolicy: 'lmetric' }, /opts\.workerType must be other than 'decode' with selectionPolicy 'lmetric'/],
      // Dynamo's snake_case names get a hint.
      [{ overlap_score_credit_decay: 1 }, /unknown option "overlap_score_credit_decay": did you mean "overlapScoreCreditDecay"\?/],
      [{ router_track_active_blocks: false }, /did you mean "routerTrackActiveBlocks"\?/],
    ];
    for (const [opts, message] of cases) {
      expect(() => new KvRouter({ blockSize: BS, backend, ...opts })).toThrow(
        expect.objectContaining({ code: 'ERR_INVALID_ARG', message: expect.stringMatching(message) }),
      );
    }
    const r = make();
    r.addWorker(1);
    const overrides: Array<[Record<string, unknown>, RegExp]> = [
      [{ overlapScoreCredit: -2 }, /req\.overrides\.overlapScoreCredit must be a finite number >= 0/],
      [{ prefillLoadScale: -2 }, /req\.overrides\.prefillLoadScale/],
      [{ overlapScoreWeight: 1, prefillLoadScale: 2 }, /req\.overrides\.overlapScoreWeight is the older name/],
      [{ overlapScoreCreditDecay: 1 }, /unknown option "overlapScoreCreditDecay"/],
      [{ sharedCacheMultiplier: Number.NaN }, /req\.overrides\.sharedCacheMultiplier must be a finite number >= 0/],
    ];
    for (const [ov, message] of overrides) {
      await expect(r.route({ requestId: 'bad', tokens: tokens(1, 8), overrides: ov as RouteOverrides })).rejects.toMatchObject({
        code: 'ERR_INVALID_ARG',
        message: expect.stringMatching(message),
      });
    }
    const hits: Array<[unknown, RegExp]> = [
      [
        [0, 2],
        /req\.sharedCacheHits must be sorted, non-overlapping \[start, end\) pairs of block positions: req\.sharedCacheHits\[0\] is not a pair but 0/,
      ],
      ['0-2', /got "0-2"/],
      [[[0, 1, 2]], /\[0\] is not a pair but an array of 3/],
      [[[-1, 1]], /\[0\] is \[-1, 1\]/],
      [[[0.5, 1]], /\[0\] is \[0\.5, 1\]/],
      [[[1, 1]], /\[1, 1\) is empty/],
      [
        [
          [0, 2],
          [1, 2],
        ],
        /\[1\] starts at 1, before the previous pair's end 2/,
      ],
      [[[0, 3]], /\[0\] ends at 3, past the prompt's 2 full blocks/],
    ];
    for (const [sharedCacheHits, message] of hits) {
      await expect(r.route({ requestId: 'bad', tokens: tokens(1, 8), sharedCacheHits: sharedCacheHits as never })).rejects.toMatchObject({
        code: 'ERR_INVALID_ARG',
        message: expect.stringMatching(message),
      });
    }
    expect(r.stats()).toMatchObject({ load: [], inFlight: 0 });
    const lmetric = make({ selectionPolicy: 'lmetric' });
    lmetric.addWorker(1);
    for (const ov of [{ prefillLoadScale: 2 }, { overlapScoreWeight: 1 }]) {
      await expect(lmetric.route({ requestId: 'bad', tokens: tokens(1, 8), overrides: ov })).rejects.toMatchObject({
        code: 'ERR_INVALID_ARG',
        message: expect.stringMatching(/req\.overrides\.(prefillLoadScale|overlapScoreWeight) is a term of the linear cost/),
      });
    }
    expect(lmetric.stats()).toMatchObject({ load: [], inFlight: 0 });
  });

  test('seeded: every figure and cost matches a simple model of the formula, batches too; the defaults are the classic cost to the bit', async () => {
    for (let seed = 1; seed <= 12; seed++) {
      const rng = new Rng(seed);
      const o: ModelOptions = {
        credit: rng.pick([0, 0.25, 0.5, 1, 1, 1, 1.5, 3]),
        scale: rng.pick([0, 0.5, 1, 1, 2]),
        decay: rng.pick([0, 0, 0.5, 1, 3]),
        requestWeight: rng.pick([0, 0, 0.5, 2]),
        trackPrefill: rng.chance(0.8),
        trackActive: rng.chance(0.8),
        lmetric: rng.chance(0.35),
        decodeWorker: false,
        sharedMultiplier: rng.pick([0, 0.5, 1, 1.5]),
        sharedHits: [],
      };
      o.decodeWorker = !o.lmetric && rng.chance(0.4);
      // Its own branch needs prefill untracked: make that common among decode routers.
      if (o.decodeWorker) o.trackPrefill = rng.chance(0.3);
      const scaleOption = rng.chance(0.5) ? { prefillLoadScale: o.scale } : { overlapScoreWeight: o.scale };
      const r = make({
        ...(o.lmetric ? { selectionPolicy: 'lmetric' as const } : scaleOption),
        ...(o.sharedMultiplier === 0 && rng.chance(0.5) ? {} : { sharedCacheMultiplier: o.sharedMultiplier }),
        ...(o.decodeWorker
          ? { workerType: 'decode' as const }
          : rng.chance(0.2)
            ? { workerType: rng.pick(['aggregated', 'prefill'] as const) }
            : {}),
        ...(o.credit === 1 && rng.chance(0.5) ? {} : { overlapScoreCredit: o.credit }),
        ...(o.decay === 0 && rng.chance(0.5) ? {} : { overlapScoreCreditDecay: o.decay }),
        ...(o.requestWeight === 0 && rng.chance(0.5) ? {} : o.lmetric ? {} : { decodeActiveRequestWeight: o.requestWeight }),
        routerTrackPrefillTokens: o.trackPrefill,
        routerTrackActiveBlocks: o.trackActive,
        seed,
      });
      r.addWorker(1);
      r.addWorker(2, { dataParallelSize: 2 });
      r.addWorker(3);
      const rankNames = ['1:0', '2:0', '2:1', '3:0'];
      const ranks = new Map(rankNames.map((k) => [k, { cached: new Set<string>() }]));
      const inFlight = new Map<string, ModelRequest>();
      const families = [tokens(1000, 12), tokens(2000, 8), tokens(3000, 16)];
      const prompt = () => [...rng.pick(families).slice(0, 4 * rng.int(5)), ...tokens(10_000 + rng.int(50) * 40, 1 + rng.int(14))];
      let next = 0;
      for (let step = 0; step < 120; step++) {
        const action = rng.int(10);
        if (action < 3) {
          const t = prompt();
          const rank = rng.pick(rankNames);
          const [w, dp] = rank.split(':').map(Number);
          const n = rng.int(blockKeys(t).length + 1);
          if (n === 0) continue;
          cache(r, w, t, n, dp);
          for (const k of blockKeys(t).slice(0, n)) ranks.get(rank)?.cached.add(k);
          await r.flush();
        } else if (action < 7) {
          const t = prompt();
          const overrides: RouteOverrides = {};
          const req = { ...o, sharedHits: rng.chance(0.5) ? blockKeys(t).map(() => rng.chance(0.6)) : [] };
          if (rng.chance(0.2)) req.sharedMultiplier = overrides.sharedCacheMultiplier = rng.pick([0, 0.5, 2]);
          if (rng.chance(0.2)) req.credit = overrides.overlapScoreCredit = rng.pick([0, 0.5, 1, 2]);
          if (!o.lmetric && rng.chance(0.2)) req.scale = overrides.prefillLoadScale = rng.pick([0, 1, 3]);
          const id = `r${next++}`;
          // Some requests carry a batch of other prompts (an SGLang batch).
          const batch = rng.chance(0.3) ? Array.from({ length: 1 + rng.int(3) }, prompt) : [];
          const d = await r.route({
            requestId: id,
            tokens: t,
            overrides,
            ...(req.sharedHits.length > 0 ? { sharedCacheHits: runs(req.sharedHits) } : {}),
            ...(batch.length > 0 ? { batchPrompts: batch } : {}),
          });
          const model = modelCosts(req, t, rankNames, ranks, inFlight, batch);
          const seen = d.candidates.map((c) => ({
            rank: `${c.workerId}:${c.dpRank}`,
            overlap: c.overlap,
            decode: c.decodeBlocks,
            requests: c.activeRequests,
            prefill: c.prefillTokens,
          }));
          const uncached = (m: (typeof model)[number]) => (o.trackPrefill ? Math.max(0, t.length - m.overlap * BS) : 0);
          expect(seen, `seed ${seed} step ${step}`).toEqual(
            model.map((m) => ({
              rank: m.rank,
              overlap: m.overlap,
              decode: m.decode,
              requests: m.requests,
              prefill: m.active + uncached(m) + m.batchUncached,
            })),
          );
          d.candidates.forEach((c, i) => {
            expect(c.cost, `seed ${seed} step ${step} ${seen[i].rank}`).toBeCloseTo(model[i].cost, 9);
            const classic = !o.lmetric && !(o.decodeWorker && !o.trackPrefill) && req.sharedMultiplier * c.sharedBlocks === 0;
            if (classic && req.credit === 1 && o.decay === 0 && o.requestWeight === 0)
              expect(c.cost).toBe((req.scale * c.prefillTokens) / BS + c.decodeBlocks);
          });
          expect(d.cost).toBe(Math.min(...d.candidates.map((c) => c.cost)));
          const chosen = model.find((m) => m.rank === `${d.workerId}:${d.dpRank}`);
          if (!chosen) throw new Error('chose a rank the model does not know');
          const keys = [t, ...batch].flatMap(blockKeys);
          inFlight.set(id, {
            rank: chosen.rank,
            keys: o.trackActive ? keys : [],
            prefill: uncached(chosen) + chosen.batchUncached,
            bookings: 1 + batch.length,
          });
        } else if (action < 9 && inFlight.size > 0) {
          const id = rng.pick([...inFlight.keys()]);
          r.markPrefillCompleted(id);
          const req = inFlight.get(id);
          if (req) req.prefill = 0;
        } else if (inFlight.size > 0) {
          const id = rng.pick([...inFlight.keys()]);
          r.free(id);
          inFlight.delete(id);
        }
      }
    }
  });
});
