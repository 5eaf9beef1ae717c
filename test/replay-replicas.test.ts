import { describe, expect, test } from 'vitest';
import { generateTrace, KvRouteError, KvRouter, parseTrace, ReplicaBus, replay } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { simulatedPolicies } from './helpers/replay-report.js';

/** `n` cold requests with distinct prompts, arriving `gapMs` apart (0: all at once, the herd case). */
const burst = (n: number, gapMs = 0) =>
  parseTrace(
    Array.from({ length: n }, (_, i) =>
      JSON.stringify({ timestamp: i * gapMs, input_length: 512, output_length: 64, hash_ids: [1000 + i] }),
    ).join('\n'),
  );
const spread = (r: Awaited<ReturnType<typeof replay>>) => r.policies[0].workers.map((w) => w.requests);

const small = () => generateTrace({ requests: 200, rate: 8, prefixGroups: 5, sharedPrefixBlocks: 6, turns: 3, seed: 3 });
const fleet = { workers: 4, numGpuBlocks: 4096 };

describe.each(BACKENDS)('replay with router replicas (%s)', (backend) => {
  test('a burst of cold requests: synced replicas spread it over every worker, unsynced ones herd', async () => {
    const opts = { trace: burst(8), workers: 8, replicas: 8, replicaBalancer: 'round-robin' as const, backend };
    const synced = await replay({ ...opts, replicaSync: true });
    expect(synced.policies[0].workers.map((w) => w.requests)).toEqual([1, 1, 1, 1, 1, 1, 1, 1]);
    const unsynced = await replay({ ...opts, replicaSync: false });
    // Each replica sees an idle fleet and breaks the tie on its own: some workers get two or more.
    expect(Math.max(...unsynced.policies[0].workers.map((w) => w.requests))).toBeGreaterThan(1);
    expect(unsynced.policies[0].ttftMs.max).toBeGreaterThan(synced.policies[0].ttftMs.max);
  });

  test('a sync delay: replicas hear of a booking only once it has passed', async () => {
    const opts = { workers: 8, replicas: 8, replicaBalancer: 'round-robin' as const, backend };
    // Requests 10 ms apart: a 5 ms hop reaches every replica before the next request, a 50 ms one does not.
    const quick = await replay({ ...opts, trace: burst(8, 10), replicaSyncDelayMs: 5 });
    expect(spread(quick)).toEqual([1, 1, 1, 1, 1, 1, 1, 1]);
    const slow = await replay({ ...opts, trace: burst(8, 10), replicaSyncDelayMs: 50 });
    expect(Math.max(...spread(slow))).toBeGreaterThan(1);
    expect(slow.config).toMatchObject({ replicaSyncDelayMs: 50 });
    // All at once, any delay is as good as no sync.
    const delayed = await replay({ ...opts, trace: burst(8), replicaSyncDelayMs: 1 });
    const unsynced = await replay({ ...opts, trace: burst(8), replicaSync: false });
    expect(spread(delayed)).toEqual(spread(unsynced));
  });

  test('arrivalSpreadMs spreads the requests of one timestamp, so a delayed sync sees each of them', async () => {
    const opts = { workers: 8, replicas: 8, replicaBalancer: 'round-robin' as const, backend, replicaSyncDelayMs: 1 };
    // All eight at one timestamp: with any delay the replicas are blind to each other.
    expect(Math.max(...spread(await replay({ ...opts, trace: burst(8) })))).toBeGreaterThan(1);
    // Spread over the second the timestamp stands for, each is routed after the others' bookings arrived.
    const spreadOut = await replay({ ...opts, trace: burst(8), arrivalSpreadMs: 1000 });
    expect(spread(spreadOut)).toEqual([1, 1, 1, 1, 1, 1, 1, 1]);
    expect(spreadOut.config).toMatchObject({ arrivalSpreadMs: 1000 });
    // Seeded: the same offsets every run.
    const again = await replay({ ...opts, trace: burst(8), arrivalSpreadMs: 1000 });
    expect(simulatedPolicies(again)).toEqual(simulatedPolicies(spreadOut));
  });

  test("the session balancer sends a session's requests to one replica: without sync its binding still holds", async () => {
    const t = small();
    const sessions = new Set(t.requests.map((r) => r.sessionId)).size;
    const run = (replicaBalancer: 'session' | 'random') =>
      replay({
        trace: t,
        ...fleet,
        backend,
        replicas: 4,
        replicaSync: false,
        replicaBalancer,
        routerConfig: { sessionAffinityTtlSecs: 600 },
      });
    const bySession = await run('session');
    // Every later turn reaches the replica that bound its session, and goes where it bound it.
    expect(bySession.policies[0].sessions).toMatchObject({ hits: t.requests.length - sessions, bindings: sessions });
    expect(bySession.config).toMatchObject({ replicaBalancer: 'session' });
    // At random, most later turns reach a replica that never saw their session.
    const random = await run('random');
    expect(random.policies[0].sessions?.hits).toBeLessThan((t.requests.length - sessions) / 2);
  });

  test('a delayed bus delivers each message once its delay has passed, in order', async () => {
    const clock = { now: 0 };
    const bus = new ReplicaBus({ delayMs: 10, now: () => clock.now });
    const [a, b] = ['a', 'b'].map(
      (id) => new KvRouter({ blockSize: 4, backend, now: () => clock.now, replicas: { transport: bus.transport(), replicaId: id } }),
    );
    try {
      for (const r of [a, b]) r.addWorker(1);
      // The joins and states of the two replicas' starts are on their way.
      expect(bus.pending()).toBeGreaterThan(0);
      clock.now = 10;
      bus.deliverDue();
      await a.route({ requestId: 'r1', tokens: [1, 2, 3, 4, 5, 6, 7, 8] });
      clock.now = 15;
      await a.route({ requestId: 'r2', tokens: [9, 10, 11, 12] });
      a.free('r1');
      clock.now = 19;
      expect(bus.deliverDue()).toBe(0);
      expect(b.stats().replicas?.remoteInFlight).toBe(0);
      clock.now = 20;
      // The booking, and the states each replica published on hearing the other's join at 10.
      expect(bus.deliverDue()).toBe(3);
      expect(b.stats().load).toEqual([expect.objectContaining({ requests: 1, activeBlocks: 2 })]);
      clock.now = 25;
      bus.deliverDue();
      // r2 booked, r1 freed, in that order.
      expect(b.stats().load).toEqual([expect.objectContaining({ requests: 1, activeBlocks: 1 })]);
      expect(bus.pending()).toBe(0);
    } finally {
      a.close();
      b.close();
    }
  });

  test('one replica is the single router; replicas are deterministic and reported', async () => {
    const single = await replay({ trace: small(), ...fleet, backend });
    const one = await replay({ trace: small(), ...fleet, backend, replicas: 1, replicaSync: false });
    expect(simulatedPolicies(one)).toEqual(simulatedPolicies(single));
    const a = await replay({ trace: small(), ...fleet, backend, replicas: 4 });
    const b = await replay({ trace: small(), ...fleet, backend, replicas: 4 });
    expect(simulatedPolicies(b)).toEqual(simulatedPolicies(a));
    expect(a.config).toMatchObject({ replicas: 4, replicaSync: true, replicaBalancer: 'random' });
    expect(a.policies[0].requests).toBe(200);
  });
});

test('native and pure-JS replicas simulate identically', async () => {
  const opts = { trace: small(), ...fleet, replicas: 3, replicaBalancer: 'round-robin' as const };
  const native = await replay({ ...opts, backend: 'native' });
  const js = await replay({ ...opts, backend: 'js' });
  expect(simulatedPolicies(js)).toEqual(simulatedPolicies(native));
});

test('bad replica options are rejected before simulating', async () => {
  for (const bad of [
    { replicas: 0 },
    { replicas: 65 },
    { replicaSync: 'yes' },
    { replicaBalancer: 'hash' },
    { replicaSyncDelayMs: -1 },
    { replicaSyncDelayMs: 60_001 },
    { replicaSyncDelayMs: '5' },
    { arrivalSpreadMs: -1 },
    { arrivalSpreadMs: 3_600_001 },
  ]) {
    await expect(replay({ trace: burst(2), ...(bad as object) })).rejects.toMatchObject({ code: 'ERR_INVALID_ARG' });
  }
  await expect(replay({ trace: burst(2), replicas: 2, replicaSync: false, replicaSyncDelayMs: 5 })).rejects.toThrow(
    /replicaSyncDelayMs needs replicaSync/,
  );
});

test('a bad ReplicaBus delay is a typed error', () => {
  for (const bad of [{ delayMs: -1 }, { delayMs: Number.NaN }, { delayMs: '1' }, { delayMs: 5 }, { delay: 5 }, null, { now: 5 }]) {
    expect(() => new ReplicaBus(bad as never)).toThrow(KvRouteError);
  }
  expect(new ReplicaBus({ delayMs: 0 }).pending()).toBe(0);
});
