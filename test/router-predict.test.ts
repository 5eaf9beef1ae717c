/**
 * Predict-on-route (`routerPredictedTtlSecs`): with KV events, a decision's blocks count on its
 * rank until the engine's events confirm them or the TTL passes. Both backends.
 */
import { describe, expect, test } from 'vitest';
import { blockHashes, KvRouter, type KvRouterOptions, type RouteDecision } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { removed, stored } from './helpers/events.js';
import { routerSuite } from './helpers/routers.js';

const BS = 4;
const tokens = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

describe.each(BACKENDS)('predict-on-route on the %s backend', (backend) => {
  const suite = routerSuite(backend, BS);
  const clock = suite.clock;
  const make = (opts: Partial<KvRouterOptions> = {}) => {
    const r = suite.make(opts);
    r.addWorker(1);
    r.addWorker(2);
    return r;
  };
  const overlaps = (d: RouteDecision) => d.candidates.map((c) => [Number(c.workerId), c.overlap]);
  const t = tokens(1, 12); // 3 blocks

  test("a decision's blocks count on its rank before any KV event, until the TTL passes", async () => {
    const r = make({ routerPredictedTtlSecs: 5 });
    const first = await r.route({ requestId: 'a', tokens: t });
    r.free('a');
    const chosen = Number(first.workerId);
    const second = await r.route({ requestId: 'b', tokens: t });
    expect(overlaps(second)).toEqual([
      [1, chosen === 1 ? 3 : 0],
      [2, chosen === 2 ? 3 : 0],
    ]);
    // The second request goes where the prefix is predicted and refreshes it there.
    expect(second).toMatchObject({ workerId: BigInt(chosen), cachedTokens: 12 });
    r.free('b');
    clock.now += 4_999;
    expect(r.potentialLoads({ requestId: 'c', tokens: t }).map((p) => p.overlapBlocks)).toEqual(chosen === 1 ? [3, 0] : [0, 3]);
    clock.now += 2;
    expect(r.potentialLoads({ requestId: 'c', tokens: t }).map((p) => p.overlapBlocks)).toEqual([0, 0]);
  });

  test("the engine's events confirm predicted blocks for good, and its removals take predictions with them", async () => {
    const r = make({ routerPredictedTtlSecs: 5 });
    const d = await r.route({ requestId: 'a', tokens: t, pinnedWorker: { workerId: 1 } });
    expect(d.overlapBlocks).toBe(0);
    const locals = [...blockHashes(t, BS, { backend })];
    // The engine stores the first two blocks: they never expire; the third stays a prediction.
    r.applyEvent(stored(1, locals.slice(0, 2)));
    await r.flush();
    clock.now += 10_000;
    expect(r.potentialLoads({ requestId: 'b', tokens: t })[0].overlapBlocks).toBe(2);
    // A fresh prediction over the confirmed prefix, then the engine evicts the second block:
    // everything the rank held below it goes, the prediction too.
    await r.route({ requestId: 'b', tokens: t, pinnedWorker: { workerId: 1 } });
    expect(r.potentialLoads({ requestId: 'c', tokens: t })[0].overlapBlocks).toBe(3);
    r.applyEvent(removed(1, locals.slice(0, 2), [2]));
    await r.flush();
    expect(r.potentialLoads({ requestId: 'c', tokens: t })[0].overlapBlocks).toBe(1);
  });

  test.each([
    ['predict-on-route', { routerPredictedTtlSecs: 5 }],
    ['approximate mode', { useKvEvents: false }],
  ] as const)("%s: a multimodal request's prediction has the hashes it was scored with", async (_, opts) => {
    const r = make(opts);
    // The middle block carries an image: its hash, and every one after it, differ from text's.
    const mmHashes = [null, [0xabcn], null];
    await r.route({ requestId: 'a', tokens: t, mmHashes, pinnedWorker: { workerId: 1 } });
    const overlap = (req: { mmHashes?: typeof mmHashes }) => r.potentialLoads({ requestId: 'b', tokens: t, ...req })[0].overlapBlocks;
    expect(overlap({ mmHashes }), 'the same request matches all it predicted').toBe(3);
    expect(overlap({}), 'the same text without the image shares only the first block').toBe(1);
  });

  test('off by default: without events nothing counts as cached', async () => {
    const r = make();
    const first = await r.route({ requestId: 'a', tokens: t });
    const second = await r.route({ requestId: 'b', tokens: t });
    expect(first.overlapBlocks).toBe(0);
    expect(overlaps(second)).toEqual([
      [1, 0],
      [2, 0],
    ]);
  });

  test('the TTL is validated, and needs KV events', () => {
    const cases: Array<[Partial<KvRouterOptions>, RegExp]> = [
      [{ routerPredictedTtlSecs: 0 }, /opts\.routerPredictedTtlSecs must be null or a finite number > 0, got 0/],
      [{ routerPredictedTtlSecs: -1 }, /opts\.routerPredictedTtlSecs/],
      [{ routerPredictedTtlSecs: Number.POSITIVE_INFINITY }, /opts\.routerPredictedTtlSecs/],
      [{ routerPredictedTtlSecs: '5' as never }, /opts\.routerPredictedTtlSecs/],
      [{ routerPredictedTtlSecs: 5, useKvEvents: false }, /opts\.routerPredictedTtlSecs must be unset without KV events/],
    ];
    for (const [opts, message] of cases) {
      expect(() => new KvRouter({ blockSize: BS, backend, ...opts })).toThrow(
        expect.objectContaining({ code: 'ERR_INVALID_ARG', message: expect.stringMatching(message) }),
      );
    }
    // null is "off", as the default.
    new KvRouter({ blockSize: BS, backend, routerPredictedTtlSecs: null }).close();
  });
});
