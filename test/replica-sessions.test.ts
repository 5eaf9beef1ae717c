/**
 * Session affinity across router replicas: a session bound on one replica is routed to the same
 * rank by every other, concurrent bindings of one session settle on the same one everywhere, a
 * joining replica learns the live bindings, and bad binding messages change nothing.
 */
import { connect } from '@nats-io/transport-node';
import { afterEach, describe, expect, test } from 'vitest';
import { blockHashes, KvRouter, type KvRouterOptions, ReplicaBus } from '../ts/index.js';
import { encodeMessage, type WireMessage } from '../ts/replicas/wire.js';
import { BACKENDS } from './helpers/backends.js';
import { stored } from './helpers/events.js';
import { JitterBus } from './helpers/jitter-bus.js';
import { NatsServer, natsServerSuite } from './helpers/nats-server.js';
import { Rng } from './helpers/random.js';
import { waitFor } from './helpers/wait.js';

const BS = 4;
const TTL_SECS = 60;
const tokens = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
/** Two prompts: worker 1 caches the first, worker 2 the second (on every replica). */
const [ONE, TWO] = [tokens(1, 16), tokens(100, 16)];
const where = (d: { workerId: bigint; dpRank: number }) => `${d.workerId}:${d.dpRank}`;

/** Registers workers 1 and 2 and stores ONE on worker 1, TWO on worker 2. */
async function fleet(r: KvRouter, backend: KvRouterOptions['backend']): Promise<KvRouter> {
  r.addWorker(1);
  r.addWorker(2);
  r.applyEvent(stored(1, [...blockHashes(ONE, BS, { backend })]));
  r.applyEvent(stored(2, [...blockHashes(TWO, BS, { backend })]));
  await r.flush();
  return r;
}

describe.each(BACKENDS)('session bindings shared by replicas on one bus (%s)', (backend) => {
  // Every replica of a test on one clock the test moves, and on one fresh bus.
  const clock = { now: 1_000_000 };
  const open: KvRouter[] = [];
  let bus = new ReplicaBus();
  afterEach(() => {
    for (const r of open.splice(0)) r.close();
    bus = new ReplicaBus();
    clock.now = 1_000_000;
  });
  const replica = (id: string, opts: Partial<KvRouterOptions> = { sessionAffinityTtlSecs: TTL_SECS }, heartbeatMs = 1000) => {
    const r = new KvRouter({
      blockSize: BS,
      backend,
      now: () => clock.now,
      replicas: { transport: bus.transport(), replicaId: id, heartbeatMs },
      ...opts,
    });
    open.push(r);
    return fleet(r, backend);
  };

  test("a session bound on one replica goes to its rank from every other, whatever that replica's costs say", async () => {
    const [a, b] = [await replica('a'), await replica('b')];
    expect(where(await a.route({ requestId: 'a1', tokens: ONE, sessionId: 's' }))).toBe('1:0');
    // TWO is cached on worker 2; b sends the session to worker 1 anyway, and a request without one to 2.
    expect(where(await b.route({ requestId: 'b1', tokens: TWO, sessionId: 's' }))).toBe('1:0');
    expect(where(await b.route({ requestId: 'b2', tokens: TWO }))).toBe('2:0');
    expect(b.stats().sessions).toMatchObject({ bound: 1, hits: 1, bindings: 0, adopted: 1 });
    expect(a.stats().sessions).toMatchObject({ bound: 1, bindings: 1, adopted: 0 });
    expect(a.stats().replicas?.sessionUpdatesPublished).toBeGreaterThan(0);
    expect(b.session('s')).toEqual({ workerId: 1n, dpRank: 0, inFlight: 1, idleMs: 0, origin: 'a' });
    expect(b.stats().replicas?.sessionUpdatesReceived).toBeGreaterThan(0);
  });

  test('a replica joining late gets a state and a session table too large for one message, in parts', async () => {
    const a = await replica('a');
    const n = 6000;
    for (let i = 0; i < n; i++)
      await a.route({ requestId: `request-${i}`, tokens: ONE, sessionId: `a-session-id-long-enough-to-weigh-${i}` });
    const before = a.stats().replicas?.messagesPublished ?? 0;
    const b = await replica('b');
    // The state and the table went out in several parts (whole, they would be two messages), and all arrived.
    expect((a.stats().replicas?.messagesPublished ?? 0) - before).toBeGreaterThanOrEqual(4);
    expect(b.stats().replicas?.remoteInFlight).toBe(n);
    expect(b.stats().sessions).toMatchObject({ bound: n, adopted: n });
  });

  test('a binding lives the TTL after the last request of the session ends on any replica', async () => {
    const [a, b] = [await replica('a'), await replica('b')];
    await a.route({ requestId: 'a1', tokens: ONE, sessionId: 's' });
    clock.now += 90_000; // in flight on a for longer than the TTL
    a.free('a1');
    clock.now += 59_000;
    expect(where(await b.route({ requestId: 'b1', tokens: TWO, sessionId: 's' }))).toBe('1:0');
    b.free('b1');
    clock.now += 59_000; // b's request ended 59 s ago: a still holds the binding
    expect(where(await a.route({ requestId: 'a2', tokens: TWO, sessionId: 's' }))).toBe('1:0');
    a.free('a2');
    clock.now += 60_000;
    // Idle for the TTL everywhere: each replica routes the session by cost again.
    expect(where(await b.route({ requestId: 'b3', tokens: TWO, sessionId: 's' }))).toBe('2:0');
    expect(where(await a.route({ requestId: 'a3', tokens: ONE, sessionId: 's' }))).toBe('2:0');
    expect(a.stats().sessions).toMatchObject({ expired: 1, adopted: 1, hits: 2 });
  });

  test('every start and end of a request of the session restarts its TTL on the other replicas', async () => {
    const [a, b] = [await replica('a'), await replica('b')];
    // Two requests on a; the first ends while the second still runs.
    await a.route({ requestId: 'a1', tokens: ONE, sessionId: 's' });
    await a.route({ requestId: 'a2', tokens: ONE, sessionId: 's' });
    clock.now += 90_000;
    a.free('a1');
    clock.now += 59_000;
    expect(where(await b.route({ requestId: 'b1', tokens: TWO, sessionId: 's' }))).toBe('1:0');
    b.free('b1');
    // A request that starts on a (and runs on) is heard by b as well.
    clock.now += 59_000;
    await a.route({ requestId: 'a3', tokens: ONE, sessionId: 's' });
    clock.now += 59_000;
    expect(where(await b.route({ requestId: 'b2', tokens: TWO, sessionId: 's' }))).toBe('1:0');
  });

  test('a binding in use on one replica stays alive on the others however long its request runs', async () => {
    const affinity = { sessionAffinityTtlSecs: TTL_SECS };
    // Heartbeats every 10 ms of real time: each republishes bindings in use unheard of for half the TTL.
    const [a, b] = [await replica('a', affinity, 10), await replica('b', affinity, 10)];
    await a.route({ requestId: 'a1', tokens: ONE, sessionId: 's' });
    for (let i = 0; i < 4; i++) {
      const heard = b.stats().sessions?.peerUpdates ?? 0;
      clock.now += 40_000;
      await waitFor(() => (b.stats().sessions?.peerUpdates ?? 0) > heard, 'a heartbeat to republish the binding');
    }
    // 160 s in flight on a, with no other request of the session: b still holds the binding.
    expect(where(await b.route({ requestId: 'b1', tokens: TWO, sessionId: 's' }))).toBe('1:0');
  });

  test('a rebinding after an invalidation wins on every replica', async () => {
    const [a, b] = [await replica('a'), await replica('b')];
    await a.route({ requestId: 'a1', tokens: ONE, sessionId: 's' });
    // Worker 1 is not allowed for this request: a drops the binding and binds the session to 2.
    expect(where(await a.route({ requestId: 'a2', tokens: ONE, sessionId: 's', allowedWorkers: [2] }))).toBe('2:0');
    expect(where(await b.route({ requestId: 'b1', tokens: ONE, sessionId: 's' }))).toBe('2:0');
    expect(a.stats().sessions).toMatchObject({ invalidated: 1, bindings: 2 });
    expect(b.stats().sessions).toMatchObject({ adopted: 2, superseded: 1, stalePeerUpdates: 0 });
    // a's first request, still bound to worker 1, ends: that binding is gone and nothing is published for it.
    a.free('a1');
    expect(where(await b.route({ requestId: 'b2', tokens: ONE, sessionId: 's' }))).toBe('2:0');
  });

  test('a replica that joins learns the live bindings, and not the expired ones', async () => {
    const a = await replica('a');
    await a.route({ requestId: 'a1', tokens: ONE, sessionId: 'live' });
    await a.route({ requestId: 'a2', tokens: ONE, sessionId: 'old' });
    a.free('a2');
    clock.now += 61_000;
    const late = await replica('late');
    expect(late.stats().sessions).toMatchObject({ bound: 1, adopted: 1 });
    expect(where(await late.route({ requestId: 'l1', tokens: TWO, sessionId: 'live' }))).toBe('1:0');
    expect(where(await late.route({ requestId: 'l2', tokens: TWO, sessionId: 'old' }))).toBe('2:0');
  });

  test('a replica without session affinity counts the bindings it receives and routes by cost', async () => {
    const a = await replica('a');
    const plain = await replica('plain', {});
    await a.route({ requestId: 'a1', tokens: ONE, sessionId: 's' });
    expect(where(await plain.route({ requestId: 'p1', tokens: TWO, sessionId: 's' }))).toBe('2:0');
    expect(plain.stats().sessions).toBeUndefined();
    expect(plain.stats().replicas).toMatchObject({ sessionUpdatesReceived: 1, messagesRejected: 0 });
  });

  // A deliberately simple model of the fleet's promise: as long as a session's binding was
  // active (a request of the session started, or one routed on that binding ended) less than the
  // TTL ago on any replica, and its rank can take the request, every replica sends the session
  // where its previous request went. Where the model cannot tell (idle past the TTL, the rank
  // gone or not allowed), it asserts nothing and counts the request as a new binding, so the
  // requests routed before it no longer keep the session alive.
  test('seeded: three replicas keep each session where the fleet last sent it', async () => {
    const seeds = Number(process.env.KVROUTE_SESSION_SEEDS ?? 8);
    for (let seed = 1; seed <= seeds; seed++) {
      bus = new ReplicaBus();
      clock.now = 1_000_000;
      const rng = new Rng(seed);
      const rs = [await replica('a'), await replica('b'), await replica('c')];
      const workers = new Set([1, 2, 3]);
      for (const r of rs) r.addWorker(3);
      const sessions = new Map<string, { at: string; lastActive: number; binding: number }>();
      type Request = { r: KvRouter; session: string | undefined; binding: number; worker: number };
      const inFlight = new Map<string, Request>();
      const ended = (f: Request) => {
        const s = f.session === undefined ? undefined : sessions.get(f.session);
        if (s?.binding === f.binding) s.lastActive = clock.now;
      };
      let bindings = 0;
      let next = 0;
      for (let step = 0; step < 300; step++) {
        clock.now += rng.int(4) === 0 ? rng.int(2 * TTL_SECS * 1000) : rng.int(20_000);
        const action = rng.int(10);
        if (action < 5) {
          const r = rng.pick(rs);
          const id = `q${next++}`;
          const session = rng.int(5) === 0 ? undefined : `s${rng.int(3)}`;
          const allowed = rng.int(5) === 0 ? [rng.pick([...workers])] : undefined;
          const known = session === undefined ? undefined : sessions.get(session);
          const d = await r.route({
            requestId: id,
            tokens: rng.int(2) === 0 ? ONE : TWO,
            ...(session ? { sessionId: session } : {}),
            ...(allowed ? { allowedWorkers: allowed } : {}),
          });
          const at = where(d);
          const usable = known && workers.has(Number(known.at.split(':')[0])) && (!allowed || known.at.startsWith(`${allowed[0]}:`));
          const stays = known && usable && clock.now - known.lastActive < TTL_SECS * 1000;
          if (stays) expect(at, `seed ${seed} step ${step} session ${session}`).toBe(known.at);
          const binding = stays ? known.binding : ++bindings;
          if (session !== undefined) sessions.set(session, { at, lastActive: clock.now, binding });
          inFlight.set(id, { r, session, binding, worker: Number(d.workerId) });
        } else if (action < 9 && inFlight.size > 0) {
          const id = rng.pick([...inFlight.keys()]);
          const f = inFlight.get(id) as Request;
          f.r.free(id);
          inFlight.delete(id);
          ended(f);
        } else if (workers.size > 1) {
          // A worker leaves the fleet (every replica sees it go): its requests end with it.
          const w = rng.pick([...workers]);
          workers.delete(w);
          for (const r of rs) r.removeWorker(w);
          for (const [id, f] of [...inFlight]) {
            if (f.worker !== w) continue;
            inFlight.delete(id);
            ended(f);
          }
        }
      }
      // Once every request has ended, every replica holds the same bindings.
      for (const [id, f] of inFlight) f.r.free(id);
      const bound = rs.map((r) => r.stats().sessions?.bound);
      expect(new Set(bound).size, `seed ${seed}: ${bound}`).toBe(1);
      for (const r of open.splice(0)) r.close();
    }
  });
});

describe.each(BACKENDS)('session bindings shared over a bus that delays and reorders (%s)', (backend) => {
  // Each message reaches each other replica 1 to 10 ms after it is sent, on the test's clock.
  const DELAY = 10;
  const clock = { now: 1_000_000 };
  const open: KvRouter[] = [];
  afterEach(() => {
    for (const r of open.splice(0)) r.close();
  });

  // Replicas route a session's requests while their peers' bindings are still on the way, so
  // they bind one session to different ranks at once (a first request, or a rebinding when the
  // bound rank is not allowed). Once every message has arrived, however the bus ordered them,
  // all of them must hold the same binding of every session: the one with the highest stamp.
  test('seeded: replicas that bind a session at once all settle on the same binding', async () => {
    const seeds = Number(process.env.KVROUTE_SESSION_SEEDS ?? 8);
    let superseded = 0;
    for (let seed = 1; seed <= seeds; seed++) {
      clock.now = 1_000_000;
      const rng = new Rng(seed);
      const bus = new JitterBus(() => clock.now, rng, 1, DELAY - 1);
      const rs = await Promise.all(
        ['a', 'b', 'c'].map((id) => {
          const r = new KvRouter({
            blockSize: BS,
            backend,
            now: () => clock.now,
            sessionAffinityTtlSecs: TTL_SECS,
            replicas: { transport: bus.transport(), replicaId: id },
          });
          open.push(r);
          return fleet(r, backend);
        }),
      );
      const inFlight = new Map<string, KvRouter>();
      const settle = () =>
        bus.settle(() => {
          clock.now += DELAY;
        });
      settle();
      let next = 0;
      for (let round = 0; round < 40; round++) {
        // A burst: requests of one session at several replicas, closer together than the bus's delay.
        const session = `s${rng.int(6)}`;
        for (let k = 1 + rng.int(3); k > 0; k--) {
          clock.now += rng.int(3);
          bus.deliverDue();
          const r = rng.pick(rs);
          const id = `q${next++}`;
          await r.route({
            requestId: id,
            tokens: rng.int(2) === 0 ? ONE : TWO,
            sessionId: session,
            ...(rng.int(4) === 0 ? { allowedWorkers: [rng.pick([1, 2])] } : {}),
          });
          inFlight.set(id, r);
        }
        while (inFlight.size > 0 && rng.int(2) === 0) {
          const id = rng.pick([...inFlight.keys()]);
          inFlight.get(id)?.free(id);
          inFlight.delete(id);
        }
        settle();
        for (let s = 0; s < 6; s++) {
          const views = rs.map((r) => {
            const b = r.session(`s${s}`);
            return b && `${b.workerId}:${b.dpRank} ${b.origin}`;
          });
          expect(new Set(views).size, `seed ${seed} round ${round} session s${s}: ${views}`).toBe(1);
        }
      }
      superseded += rs.reduce((n, r) => n + (r.stats().sessions?.superseded ?? 0), 0);
      for (const r of open.splice(0)) r.close();
    }
    // The races this test is about did happen.
    expect(superseded).toBeGreaterThan(0);
  });
});

describe('session bindings over a real nats-server', () => {
  const { server, subject } = natsServerSuite('kvroute.sessions');

  describe.each(BACKENDS)('on the %s backend', (backend) => {
    const open: KvRouter[] = [];
    afterEach(async () => {
      await Promise.all(open.splice(0).map((r) => r.closeAsync()));
    });
    const replica = async (id: string, on: string) => {
      const r = new KvRouter({
        blockSize: BS,
        backend,
        sessionAffinityTtlSecs: TTL_SECS,
        replicas: { nats: { servers: server.url, subject: on }, replicaId: id, heartbeatMs: 100, leaseMs: 600 },
      });
      open.push(r);
      await fleet(r, backend);
      await r.ready();
      return r;
    };

    test('two replicas that bind one session at once settle on the same binding', async () => {
      const on = subject();
      const [a, b] = [await replica('a', on), await replica('b', on)];
      await waitFor(() => a.stats().replicas?.peers === 1 && b.stats().replicas?.peers === 1, 'the replicas to hear each other');
      // Routed in one event-loop turn: neither has heard of the other's binding yet.
      const [da, db] = await Promise.all([
        a.route({ requestId: 'a1', tokens: ONE, sessionId: 's' }),
        b.route({ requestId: 'b1', tokens: TWO, sessionId: 's' }),
      ]);
      expect([where(da), where(db)]).toEqual(['1:0', '2:0']);
      await waitFor(
        () => (a.stats().sessions?.peerUpdates ?? 0) > 0 && (b.stats().sessions?.peerUpdates ?? 0) > 0,
        'each to hear the other',
      );
      const next = [
        where(await a.route({ requestId: 'a2', tokens: TWO, sessionId: 's' })),
        where(await b.route({ requestId: 'b2', tokens: ONE, sessionId: 's' })),
      ];
      expect(next[0]).toBe(next[1]);
      // b's binding wins: equal stamps, and 'b' sorts after 'a'.
      expect(next[0]).toBe('2:0');
      expect(a.stats().sessions).toMatchObject({ superseded: 1 });
      expect(b.stats().sessions).toMatchObject({ superseded: 0 });
    });

    test('a replica that joins later routes a live session to its rank', async () => {
      const on = subject();
      const a = await replica('a', on);
      await a.route({ requestId: 'a1', tokens: ONE, sessionId: 's' });
      const late = await replica('late', on);
      await waitFor(() => late.stats().sessions?.bound === 1, 'the joiner to learn the binding');
      expect(where(await late.route({ requestId: 'l1', tokens: TWO, sessionId: 's' }))).toBe('1:0');
    });

    test('a bad binding message is rejected whole and changes nothing', async () => {
      const on = subject();
      const a = await replica('a', on);
      const nc = await connect({ servers: server.url });
      const good = { sessionId: 'ok', workerId: 2n, dpRank: 0, stamp: 5, origin: 'peer', idleMs: 0 };
      const send = (sessions: unknown[]) =>
        nc.publish(on, encodeMessage({ replicaId: 'peer', instance: 1, seq: 1, kind: 'sessions', sessions } as WireMessage));
      send([good, { ...good, sessionId: '' }]);
      send([good, { ...good, sessionId: 'x'.repeat(1025) }]);
      send([good, { ...good, workerId: 'one' }]);
      send([good, { ...good, stamp: -1 }]);
      send([good, { ...good, origin: 'o'.repeat(129) }]);
      await nc.flush();
      await waitFor(() => (a.stats().replicas?.messagesRejected ?? 0) === 5, 'the five bad messages to be rejected');
      expect(a.stats().sessions).toMatchObject({ bound: 0, peerUpdates: 0 });
      // The same binding, well formed, is adopted.
      send([good]);
      await nc.flush();
      await waitFor(() => a.stats().sessions?.bound === 1, 'the good binding to be adopted');
      expect(where(await a.route({ requestId: 'a1', tokens: ONE, sessionId: 'ok' }))).toBe('2:0');
      await nc.close();
    });
  });

  test.each(BACKENDS)('a binding made while NATS was down reaches the peers when it is back (%s)', async (backend) => {
    const own = new NatsServer();
    await own.start();
    const mk = (id: string) =>
      fleet(
        new KvRouter({
          blockSize: BS,
          backend,
          sessionAffinityTtlSecs: TTL_SECS,
          replicas: { nats: { servers: own.url }, replicaId: id, heartbeatMs: 100, leaseMs: 600 },
        }),
        backend,
      );
    const [a, b] = [await mk('a'), await mk('b')];
    try {
      await Promise.all([a.ready(), b.ready()]);
      await own.stop();
      await waitFor(() => a.stats().replicas?.connected === false, 'a to notice the outage');
      // Bound while nothing could be published: counted as a lost publish.
      await a.route({ requestId: 'a1', tokens: ONE, sessionId: 's' });
      a.free('a1');
      await waitFor(() => (a.stats().replicas?.publishErrors ?? 0) > 0, "the turn's publish to fail");
      expect(b.session('s')).toBeUndefined();
      await own.start();
      // On reconnect a publishes its table of live bindings: b learns the binding made meanwhile.
      await waitFor(() => b.session('s') !== undefined, 'b to learn the binding after the outage', 15_000);
      expect(b.session('s')).toMatchObject({ workerId: 1n, dpRank: 0, origin: 'a' });
      expect(where(await b.route({ requestId: 'b1', tokens: TWO, sessionId: 's' }))).toBe('1:0');
    } finally {
      await Promise.all([a.closeAsync(), b.closeAsync()]);
      await own.dispose();
    }
  });
});
