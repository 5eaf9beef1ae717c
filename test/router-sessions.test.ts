/**
 * Session affinity (`sessionAffinityTtlSecs`, `req.sessionId`): a session's requests stay on the
 * rank its first booked request went to while it is active, and for the TTL after its last one
 * ends; a rank that goes or is not allowed ends the binding.
 */
import { describe, expect, test } from 'vitest';
import { blockHashes, type KvRouter, type KvRouterOptions } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { expectKvError } from './helpers/errors.js';
import { stored } from './helpers/events.js';
import { Rng } from './helpers/random.js';
import { routerSuite } from './helpers/routers.js';

const BS = 4;
const tokens = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
/** Two prompts: worker 1 caches the first, worker 2 the second. */
const [ONE, TWO] = [tokens(1, 16), tokens(100, 16)];
/** Every counter of `stats().sessions` at 0 (a router of one replica never counts the peer ones). */
const NO_COUNTS = {
  hits: 0,
  bindings: 0,
  invalidated: 0,
  expired: 0,
  peerUpdates: 0,
  adopted: 0,
  superseded: 0,
  stalePeerUpdates: 0,
  evicted: 0,
  overflow: 0,
};

describe.each(BACKENDS)('session affinity (%s)', (backend) => {
  const { clock, make } = routerSuite(backend, BS);

  async function twoWorkers(ttlSecs: number | null, opts: Partial<KvRouterOptions> = {}): Promise<KvRouter> {
    const r = make({ sessionAffinityTtlSecs: ttlSecs, ...opts });
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
    expect(r.stats().sessions).toEqual({ ...NO_COUNTS, bound: 2, hits: 2, bindings: 2 });
    // In flight for longer than the TTL: an active session does not expire.
    clock.now += 120_000;
    expect(where(await r.route({ requestId: 'f', tokens: TWO, sessionId: 's' }))).toBe('1:0');
  });

  test('session() reports a binding: its rank, requests in flight, idle time and origin', async () => {
    const r = await twoWorkers(60);
    expect(r.session('s')).toBeUndefined();
    await r.route({ requestId: 'a', tokens: ONE, sessionId: 's' });
    expect(r.session('s')).toEqual({ workerId: 1n, dpRank: 0, inFlight: 1, idleMs: 0, origin: '' });
    r.free('a');
    clock.now += 10_000;
    expect(r.session('s')).toEqual({ workerId: 1n, dpRank: 0, inFlight: 0, idleMs: 10_000, origin: '' });
    // JSON-safe, as the router's other results: the worker id as an exact decimal string.
    expect(JSON.parse(JSON.stringify(r.session('s')))).toMatchObject({ workerId: '1', dpRank: 0 });
    clock.now += 50_000;
    expect(r.session('s')).toBeUndefined();
    for (const bad of ['', 7, 'x'.repeat(1025), undefined]) {
      expectKvError(() => r.session(bad as never), 'ERR_INVALID_ARG', /sessionId must be a string of 1 to 1024 characters/);
    }
    const off = await twoWorkers(null);
    await off.route({ requestId: 'a', tokens: ONE, sessionId: 's' });
    expect(off.session('s')).toBeUndefined();
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
    // Its rank gone while the worker stays (ranks 0-1 become 2-3): the binding ends too.
    r.addWorker(4, { dataParallelSize: 2 });
    expect(where(await r.route({ requestId: 'g', tokens: TWO, sessionId: 't', allowedWorkers: [4] }))).toMatch(/^4:[01]$/);
    const bound = (r.session('t') as { dpRank: number }).dpRank;
    r.updateWorker(4, { dataParallelSize: 2, dataParallelStartRank: 2 });
    expect(where(await r.route({ requestId: 'h', tokens: TWO, sessionId: 't', allowedWorkers: [4] }))).toMatch(/^4:[23]$/);
    expect(r.session('t')?.dpRank).not.toBe(bound);
    expect(r.stats().sessions).toMatchObject({ invalidated: 3 });
  });

  test('seeded: every decision and counter matches a simple model of bindings, activity and idle time', async () => {
    for (let seed = 1; seed <= 8; seed++) {
      const rng = new Rng(seed);
      const ttl = 1000 * (1 + rng.int(30));
      // Requests never expire here: the model frees them only when the test does.
      const r = make({ sessionAffinityTtlSecs: ttl / 1000, requestExpirySecs: 1e9 });
      const workers = new Map<number, number>([
        [1, 1],
        [2, 2],
        [3, 1],
      ]);
      for (const [w, dp] of workers) r.addWorker(w, { dataParallelSize: dp });
      // The model: a session's rank, its requests in flight and since when it has been idle.
      const bound = new Map<string, { at: string; active: Set<string>; idleSince: number }>();
      const inFlight = new Map<string, { session: string | undefined; worker: number }>();
      const counts = { ...NO_COUNTS };
      const live = (s: string) => {
        const b = bound.get(s);
        if (b && b.active.size === 0 && clock.now - b.idleSince >= ttl) {
          bound.delete(s);
          counts.expired++;
          return undefined;
        }
        return b;
      };
      const release = (id: string) => {
        const session = inFlight.get(id)?.session;
        inFlight.delete(id);
        const b = session === undefined ? undefined : bound.get(session);
        if (b?.active.delete(id) && b.active.size === 0) b.idleSince = clock.now;
      };
      let next = 0;
      for (let step = 0; step < 300; step++) {
        const action = rng.int(10);
        clock.now += rng.int(3) === 0 ? rng.int(2 * ttl) : rng.int(200);
        if (action < 5) {
          const id = `r${next++}`;
          const session = rng.int(4) === 0 ? undefined : `s${rng.int(6)}`;
          const allowed = rng.int(4) === 0 ? [rng.pick([...workers.keys()])] : undefined;
          const b = session === undefined ? undefined : live(session);
          let expected: string | undefined;
          if (b) {
            const [w, dp] = b.at.split(':').map(Number);
            if ((workers.get(w) ?? 0) > dp && (!allowed || allowed.includes(w))) {
              expected = b.at;
              counts.hits++;
            } else {
              bound.delete(session as string);
              counts.invalidated++;
            }
          }
          const d = await r.route({
            requestId: id,
            tokens: tokens(rng.int(40) * 4, 8),
            ...(session ? { sessionId: session } : {}),
            ...(allowed ? { allowedWorkers: allowed } : {}),
          });
          const at = where(d);
          if (expected !== undefined) expect(at, `seed ${seed} step ${step}`).toBe(expected);
          if (allowed) expect(allowed).toContain(Number(d.workerId));
          inFlight.set(id, { session, worker: Number(d.workerId) });
          if (session !== undefined) {
            if (!bound.has(session)) {
              bound.set(session, { at, active: new Set(), idleSince: clock.now });
              counts.bindings++;
            }
            bound.get(session)?.active.add(id);
          }
        } else if (action < 8 && inFlight.size > 0) {
          const id = rng.pick([...inFlight.keys()]);
          r.free(id);
          release(id);
        } else if (action === 8) {
          // A worker leaves (its requests go with it) or comes back.
          const w = rng.pick([1, 2, 3]);
          if (workers.has(w) && workers.size > 1) {
            r.removeWorker(w);
            workers.delete(w);
            for (const [s, b] of bound) {
              if (b.at.startsWith(`${w}:`) && live(s)) {
                bound.delete(s);
                counts.invalidated++;
              }
            }
            for (const [id, f] of [...inFlight]) if (f.worker === w) release(id);
          } else if (!workers.has(w)) {
            const dp = 1 + rng.int(2);
            r.addWorker(w, { dataParallelSize: dp });
            workers.set(w, dp);
          }
        } else {
          const stats = r.stats().sessions;
          for (const s of [...bound.keys()]) live(s);
          expect(stats, `seed ${seed} step ${step}`).toEqual({ bound: bound.size, ...counts });
        }
      }
    }
  });

  test('requests of a session that waited in the queue go where the first of them to leave it bound the session', async () => {
    // Threshold 0: a rank is busy while a request on it has not had its first token.
    const r = make({ sessionAffinityTtlSecs: 60, routerQueueThreshold: 0 });
    r.addWorker(1, { maxNumBatchedTokens: 100 });
    r.addWorker(2, { maxNumBatchedTokens: 100 });
    await r.route({ requestId: 'x', tokens: ONE, allowedWorkers: [1] });
    await r.route({ requestId: 'y', tokens: TWO, allowedWorkers: [2] });
    // Both workers busy: two requests of one session wait, neither bound yet.
    const first = r.route({ requestId: 's1', tokens: ONE, sessionId: 's' });
    const second = r.route({ requestId: 's2', tokens: TWO, sessionId: 's' });
    expect(r.stats().queued).toBe(2);
    r.markPrefillCompleted('x');
    expect(where(await first)).toBe('1:0');
    // Worker 2 gets room and worker 1 is busy with s1: by cost s2 would go to 2, but s1 bound the session.
    r.markPrefillCompleted('y');
    expect(where(await second)).toBe('1:0');
    expect(r.stats().sessions).toMatchObject({ bound: 1, bindings: 1, hits: 1 });
    expect(r.stats().queued).toBe(0);
  });

  test('at sessionAffinityMaxSessions a new binding evicts the one idle the longest; with all in use a session stays unbound', async () => {
    const r = await twoWorkers(60, { sessionAffinityMaxSessions: 2 });
    await r.route({ requestId: 'a', tokens: ONE, sessionId: 's1' });
    await r.route({ requestId: 'b', tokens: TWO, sessionId: 's2' });
    // s2 goes idle first, then s1: s2 is the one idle the longest, although bound after s1.
    r.free('b');
    clock.now += 1000;
    r.free('a');
    await r.route({ requestId: 'c', tokens: ONE, sessionId: 's3' });
    expect(r.stats().sessions).toMatchObject({ bound: 2, evicted: 1, overflow: 0 });
    // s1 is still bound (to 1:0), s2 is not: each goes where its binding, or its cost, says.
    expect(where(await r.route({ requestId: 'd', tokens: TWO, sessionId: 's1' }))).toBe('1:0');
    expect(where(await r.route({ requestId: 'e', tokens: TWO, sessionId: 's2' }))).toBe('2:1');
    // s1 and s3 are in use, so s2 could not be bound to 2:1: its next request goes by cost again,
    // to the idle rank 2:0.
    expect(r.stats().sessions).toMatchObject({ bound: 2, evicted: 1, overflow: 1, bindings: 3 });
    expect(where(await r.route({ requestId: 'f', tokens: ONE, sessionId: 's2' }))).toBe('2:0');
    expect(r.stats().sessions).toMatchObject({ overflow: 2, hits: 1 });
    for (const max of [0, 1.5, 16_000_001, '5']) {
      expectKvError(
        () => make({ sessionAffinityTtlSecs: 60, sessionAffinityMaxSessions: max as never }),
        'ERR_INVALID_ARG',
        /opts\.sessionAffinityMaxSessions must be/,
      );
    }
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
