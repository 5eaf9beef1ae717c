/**
 * Session affinity (`sessionAffinityTtlSecs`, `req.sessionId`): a session's requests stay on the
 * rank its first booked request went to while it is active, and for the TTL after its last one
 * ends; a rank that goes or is not allowed ends the binding.
 */
import { describe, expect, test } from 'vitest';
import { blockHashes, type KvRouter } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { expectKvError } from './helpers/errors.js';
import { stored } from './helpers/events.js';
import { routerSuite } from './helpers/routers.js';

const BS = 4;
const tokens = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
/** Two prompts: worker 1 caches the first, worker 2 the second. */
const [ONE, TWO] = [tokens(1, 16), tokens(100, 16)];

describe.each(BACKENDS)('session affinity (%s)', (backend) => {
  const { clock, make } = routerSuite(backend, BS);

  async function twoWorkers(ttlSecs: number | null): Promise<KvRouter> {
    const r = make({ sessionAffinityTtlSecs: ttlSecs });
    r.addWorker(1);
    r.addWorker(2, { dataParallelSize: 2 });
    r.applyEvent(stored(1, [...blockHashes(ONE, BS, { backend })]));
    r.applyEvent(stored(2, [...blockHashes(TWO, BS, { backend })], { dpRank: 1 }));
    await r.flush();
    return r;
  }
  const where = (d: { workerId: bigint; dpRank: number }) => `${d.workerId}:${d.dpRank}`;

  test("a session's requests stay on its first request's rank while it is active, however the costs move", async () => {
    const r = await twoWorkers(60);
    expect(where(await r.route({ requestId: 'a', tokens: ONE, sessionId: 's' }))).toBe('1:0');
    // Worker 2's rank 1 holds TWO; the session goes to worker 1 anyway, a request without one does not.
    expect(where(await r.route({ requestId: 'b', tokens: TWO, sessionId: 's' }))).toBe('1:0');
    expect(where(await r.route({ requestId: 'c', tokens: TWO }))).toBe('2:1');
    // Another session binds where its own first request goes.
    expect(where(await r.route({ requestId: 'd', tokens: TWO, sessionId: 't' }))).toBe('2:1');
    expect(where(await r.route({ requestId: 'e', tokens: ONE, sessionId: 't' }))).toBe('2:1');
    expect(r.stats().sessions).toEqual({ bound: 2, hits: 2, bindings: 2, invalidated: 0, expired: 0 });
    // In flight for longer than the TTL: an active session does not expire.
    clock.now += 120_000;
    expect(where(await r.route({ requestId: 'f', tokens: TWO, sessionId: 's' }))).toBe('1:0');
  });

  test('the binding ends the TTL after the last request of the session ends, not before', async () => {
    const r = await twoWorkers(60);
    await r.route({ requestId: 'a', tokens: ONE, sessionId: 's' });
    await r.route({ requestId: 'b', tokens: ONE, sessionId: 's' });
    r.free('a');
    clock.now += 90_000; // 'b' is still in flight
    r.free('b');
    clock.now += 59_000;
    expect(where(await r.route({ requestId: 'c', tokens: TWO, sessionId: 's' }))).toBe('1:0');
    r.free('c');
    clock.now += 60_000;
    expect(where(await r.route({ requestId: 'd', tokens: TWO, sessionId: 's' }))).toBe('2:1');
    expect(r.stats().sessions).toMatchObject({ bound: 1, hits: 2, bindings: 2, expired: 1 });
    // Idle bindings are swept even without another request of theirs.
    r.free('d');
    clock.now += 61_000;
    expect(r.stats().sessions).toMatchObject({ bound: 0, expired: 2 });
  });

  test('a bound rank that is gone or not allowed ends the binding; the request binds where it goes; an explicit pin binds nothing', async () => {
    const r = await twoWorkers(60);
    await r.route({ requestId: 'a', tokens: ONE, sessionId: 's' });
    // Not allowed for this request: routed among the allowed, and the session moves with it.
    expect(where(await r.route({ requestId: 'b', tokens: ONE, sessionId: 's', allowedWorkers: [2] }))).toBe('2:0');
    expect(where(await r.route({ requestId: 'c', tokens: ONE, sessionId: 's' }))).toBe('2:0');
    expect(r.stats().sessions).toMatchObject({ bound: 1, hits: 1, bindings: 2, invalidated: 1 });
    // Its worker removed: the next request routes by cost.
    r.removeWorker(2);
    expect(where(await r.route({ requestId: 'd', tokens: TWO, sessionId: 's' }))).toBe('1:0');
    expect(r.stats().sessions).toMatchObject({ bindings: 3, invalidated: 2 });
    // An explicit pin wins over the binding and leaves it as it was.
    r.addWorker(3);
    expect(where(await r.route({ requestId: 'e', tokens: ONE, sessionId: 's', pinnedWorker: { workerId: 3 } }))).toBe('3:0');
    expect(where(await r.route({ requestId: 'f', tokens: TWO, sessionId: 's' }))).toBe('1:0');
    expect(r.stats().sessions).toMatchObject({ bound: 1, bindings: 3 });
  });

  test('without sessionAffinityTtlSecs a session id changes nothing; bad ids and TTLs are typed errors', async () => {
    const r = await twoWorkers(null);
    await r.route({ requestId: 'a', tokens: ONE, sessionId: 's' });
    expect(where(await r.route({ requestId: 'b', tokens: TWO, sessionId: 's' }))).toBe('2:1');
    expect(r.stats().sessions).toBeUndefined();
    for (const sessionId of ['', 7, 'x'.repeat(1025)]) {
      await expect(r.route({ requestId: 'bad', tokens: ONE, sessionId: sessionId as never })).rejects.toMatchObject({
        code: 'ERR_INVALID_ARG',
        message: expect.stringMatching(/req\.sessionId must be a string of 1 to 1024 characters/),
      });
    }
    for (const ttl of [0, -1, Number.NaN, 40_000_000, '60']) {
      expectKvError(
        () => make({ sessionAffinityTtlSecs: ttl as never }),
        'ERR_INVALID_ARG',
        /opts\.sessionAffinityTtlSecs must be null or a number of seconds/,
      );
    }
  });
});
