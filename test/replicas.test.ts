import { type ChildProcess, spawn } from 'node:child_process';
import { connect } from '@nats-io/transport-node';
import { afterEach, describe, expect, test } from 'vitest';
import { KvRouteError, KvRouter, type KvRouterOptions, metrics, type ReplicaOptions } from '../ts/index.js';
import { encodeMessage, type WireBody, type WireMessage } from '../ts/replicas/wire.js';
import { BACKENDS } from './helpers/backends.js';
import { DIST_ESM, requireDist } from './helpers/dist.js';
import { NatsServer, natsServerSuite } from './helpers/nats-server.js';
import { TcpProxy } from './helpers/tcp-proxy.js';
import { waitFor } from './helpers/wait.js';

const BS = 4;
const HEARTBEAT = 100;
const LEASE = 600;
const prompt = (i: number) => Array.from({ length: 16 }, (_, k) => 1000 * (i + 1) + k);

describe('router replicas over a real nats-server', () => {
  const { server, subject: nextSubject } = natsServerSuite();

  describe.each(BACKENDS)('on the %s backend', (backend) => {
    const open: KvRouter[] = [];
    let subject = '';
    afterEach(async () => {
      await Promise.all(open.splice(0).map((r) => r.closeAsync()));
    });
    const fresh = () => {
      subject = nextSubject();
    };
    const replica = (id: string, extra: Partial<ReplicaOptions> = {}, opts: Partial<KvRouterOptions> = {}) => {
      const r = new KvRouter({
        blockSize: BS,
        backend,
        replicas: { nats: { servers: server.url, subject }, replicaId: id, heartbeatMs: HEARTBEAT, leaseMs: LEASE, ...extra },
        ...opts,
      });
      for (let w = 1; w <= 4; w++) r.addWorker(w);
      open.push(r);
      return r;
    };
    const remote = (r: KvRouter) => r.stats().replicas?.remoteInFlight ?? -1;
    const requests = (r: KvRouter) => r.stats().load.reduce((n, l) => n + l.requests, 0);

    test('concurrent cold requests on three replicas spread over every worker', async () => {
      fresh();
      const rs = [replica('a'), replica('b'), replica('c')];
      await Promise.all(rs.map((r) => r.ready()));
      await waitFor(() => rs.every((r) => r.stats().replicas?.peers === 2), 'every replica to hear the others');
      const perWorker = new Map<bigint, number>();
      for (let i = 0; i < 12; i++) {
        const r = rs[i % 3];
        const d = await r.route({ requestId: `q${i}`, tokens: prompt(i) });
        perWorker.set(d.workerId, (perWorker.get(d.workerId) ?? 0) + 1);
        // Each replica must see every booking before the next routes (the sync is asynchronous).
        await waitFor(() => rs.every((x) => requests(x) === i + 1), `booking ${i} to reach every replica`);
      }
      expect([...perWorker.values()].sort()).toEqual([3, 3, 3, 3]);
      // Every replica weighs the same load: its own plus its peers'.
      const loads = rs.map((r) => JSON.stringify(r.stats().load.map((l) => [String(l.workerId), l.requests, l.activeBlocks])));
      expect(new Set(loads).size).toBe(1);
      expect(rs.map(remote)).toEqual([8, 8, 8]);
    });

    test('prefill completion and free reach the peers; closing says goodbye', async () => {
      fresh();
      const [a, b] = [replica('a'), replica('b')];
      await Promise.all([a.ready(), b.ready()]);
      const d = await a.route({ requestId: 'r', tokens: prompt(1) });
      await waitFor(() => remote(b) === 1, 'b to see the booking');
      expect(b.stats().load).toEqual([expect.objectContaining({ workerId: d.workerId, activePrefillTokens: 16, activeBlocks: 4 })]);
      a.markPrefillCompleted('r');
      await waitFor(() => b.stats().load[0]?.activePrefillTokens === 0, 'b to see the prefill completion');
      a.free('r');
      await waitFor(() => remote(b) === 0, 'b to see the free');
      expect(b.stats().load).toEqual([]);
      await a.route({ requestId: 'r2', tokens: prompt(2) });
      await waitFor(() => remote(b) === 1, 'b to see the second booking');
      await a.closeAsync();
      await waitFor(() => remote(b) === 0 && b.stats().replicas?.peers === 0, 'b to drop a at once on its goodbye');
      expect(b.stats().replicas?.leaseExpiries).toBe(0);
    });

    test('closing while partitioned from NATS does not wait for NATS; the peers drop its load when its lease runs out', async () => {
      fresh();
      const link = new TcpProxy(server.port);
      await link.open();
      try {
        const a = replica('a', { nats: { servers: `nats://127.0.0.1:${link.port}`, subject } });
        const b = replica('b');
        await Promise.all([a.ready(), b.ready()]);
        await a.route({ requestId: 'r', tokens: prompt(1) });
        await waitFor(() => remote(b) === 1, 'b to see the booking');
        // Nothing forwarded, nothing closed: the goodbye cannot get out, and no error says so.
        link.stall();
        await a.closeAsync();
        await waitFor(() => remote(b) === 0 && b.stats().replicas?.peers === 0, 'b to drop a', 10 * LEASE);
        expect(b.stats().replicas?.leaseExpiries).toBe(1);
        expect(b.stats().replicas?.expiredBookings).toBe(1);
      } finally {
        await link.cut();
      }
    });

    test("every figure of stats().replicas is a metric of metrics(router), with stats()'s value", async () => {
      fresh();
      const [a, b] = [replica('a'), replica('b')];
      await Promise.all([a.ready(), b.ready()]);
      await a.route({ requestId: 'r', tokens: prompt(1) });
      await waitFor(() => remote(b) === 1, 'b to see the booking');
      a.free('r');
      await waitFor(() => remote(b) === 0, 'b to see the free');
      const names: Record<string, string> = {
        connected: 'kvroute_replica_connected',
        peers: 'kvroute_replica_peers',
        remoteInFlight: 'kvroute_replica_remote_in_flight_requests',
        outages: 'kvroute_replica_outages_total',
        messagesPublished: 'kvroute_replica_messages_published_total',
        bytesPublished: 'kvroute_replica_published_bytes_total',
        publishErrors: 'kvroute_replica_publish_errors_total',
        messagesReceived: 'kvroute_replica_messages_received_total',
        bytesReceived: 'kvroute_replica_received_bytes_total',
        messagesRejected: 'kvroute_replica_messages_rejected_total',
        statesPublished: 'kvroute_replica_states_published_total',
        sessionUpdatesPublished: 'kvroute_replica_session_updates_published_total',
        sessionUpdatesReceived: 'kvroute_replica_session_updates_received_total',
        bookingsApplied: 'kvroute_replica_bookings_applied_total',
        duplicates: 'kvroute_replica_duplicates_total',
        reordered: 'kvroute_replica_reordered_total',
        gaps: 'kvroute_replica_gaps_total',
        statesApplied: 'kvroute_replica_states_applied_total',
        repaired: 'kvroute_replica_repaired_total',
        leaseExpiries: 'kvroute_replica_lease_expiries_total',
        expiredBookings: 'kvroute_replica_expired_bookings_total',
        refused: 'kvroute_replica_bookings_refused_total',
      };
      // Heartbeats keep the message counts moving: a metric lies between the stats read before and after it.
      const before = b.stats().replicas as unknown as Record<string, number | boolean | string>;
      const text = await metrics(b).metrics();
      const after = b.stats().replicas as unknown as Record<string, number | boolean | string>;
      const exported = new Map([...text.matchAll(/^(kvroute_replica_\w+) (\S+)$/gm)].map((m) => [m[1], Number(m[2])]));
      expect(Object.keys(before).filter((k) => k !== 'replicaId' && !(k in names))).toEqual([]);
      for (const [key, name] of Object.entries(names)) {
        const value = exported.get(name);
        expect(value, name).toBeGreaterThanOrEqual(Number(before[key]));
        expect(value, name).toBeLessThanOrEqual(Number(after[key]));
      }
      expect([...exported.keys()].filter((name) => !Object.values(names).includes(name))).toEqual([]);
      // B heard A's booking, its free and A's state on joining.
      expect([exported.get(names.bookingsApplied), exported.get(names.refused)]).toEqual([1, 0]);
      expect(exported.get(names.statesApplied)).toBeGreaterThanOrEqual(1);
      expect(exported.get(names.bytesReceived)).toBeGreaterThan(exported.get(names.messagesReceived) as number);
    });

    test("a batch's prompts reach the peers as bookings of their own, and leave with its free", async () => {
      fresh();
      const [a, b] = [replica('a'), replica('b')];
      await Promise.all([a.ready(), b.ready()]);
      const d = await a.route({ requestId: 'batch', tokens: prompt(1), batchPrompts: [prompt(2), prompt(3).slice(0, 8)] });
      await waitFor(() => remote(b) === 3, "b to see the batch's three bookings");
      expect(b.stats().load).toEqual([
        expect.objectContaining({ workerId: d.workerId, activePrefillTokens: 40, activeBlocks: 10, requests: 3 }),
      ]);
      a.markPrefillCompleted('batch');
      await waitFor(() => b.stats().load[0]?.activePrefillTokens === 0, 'b to see every prefill completed');
      a.free('batch');
      await waitFor(() => remote(b) === 0, 'b to see the frees');
      expect(b.stats().load).toEqual([]);
    });

    test('bookings too large for one NATS message go in parts, and a huge one sends its tail as a count', async () => {
      fresh();
      const [a, b] = [replica('a'), replica('b')];
      await Promise.all([a.ready(), b.ready()]);
      // 150,000 blocks (1.2 MB of identities, past NATS's 1 MiB) and two of 50,000: 2 MB in one flush.
      const long = (n: number, from: number) => Array.from({ length: n }, (_, i) => from + i);
      await a.route({ requestId: 'huge', tokens: long(600_000, 1), batchPrompts: [long(200_000, 10_000_000), long(200_000, 20_000_000)] });
      await waitFor(() => remote(b) === 3, 'b to see the three bookings');
      expect(b.stats().load.map((l) => l.activeBlocks)).toEqual([250_000]);
      expect(a.stats().replicas).toMatchObject({ publishErrors: 0 });
      expect(a.stats().replicas?.messagesPublished).toBeGreaterThanOrEqual(3);
    });

    test('clock skew between replicas changes nothing: leases are durations on the receiver', async () => {
      fresh();
      // a's clock is a day ahead, c's an hour behind: no time crosses the wire.
      const a = replica('a', {}, { now: () => Date.now() + 86_400_000 });
      const c = replica('c', {}, { now: () => Date.now() - 3_600_000 });
      await Promise.all([a.ready(), c.ready()]);
      await a.route({ requestId: 'x', tokens: prompt(0) });
      await c.route({ requestId: 'y', tokens: prompt(1) });
      await waitFor(() => remote(a) === 1 && remote(c) === 1, 'both to see the other');
      // Several leases later, both still hold the other's live booking (heartbeats renew it).
      await new Promise((r) => setTimeout(r, 3 * LEASE));
      expect([remote(a), remote(c)]).toEqual([1, 1]);
      expect(a.stats().replicas?.leaseExpiries).toBe(0);
      expect(c.stats().load).toEqual(a.stats().load);
    });

    test('a joining replica converges on the in-flight load of the others', async () => {
      fresh();
      const a = replica('a');
      await a.ready();
      for (let i = 0; i < 5; i++) await a.route({ requestId: `j${i}`, tokens: prompt(i) });
      a.markPrefillCompleted('j0');
      const late = replica('late');
      await late.ready();
      await waitFor(() => remote(late) === 5, 'the joiner to learn the five bookings');
      expect(late.stats().load).toEqual(a.stats().load);
    });

    test('duplicate, reordered and corrupt messages change nothing they should not', async () => {
      fresh();
      const b = replica('b');
      await b.ready();
      const nc = await connect({ servers: server.url });
      const send = (seq: number, body: WireBody) =>
        nc.publish(subject, encodeMessage({ replicaId: 'peer', instance: 7, seq, ...body } as WireMessage));
      const booking = (key: number, workerId: bigint) => ({
        op: 'book' as const,
        booking: { key, workerId, dpRank: 0, prefillTokens: 32, blocks: new BigUint64Array([11n, 12n, 13n]), unshared: 0 },
      });
      send(1, { kind: 'ops', ops: [booking(1, 1n), booking(1, 1n)] }); // a duplicate within one message
      send(1, { kind: 'ops', ops: [booking(1, 1n)] }); // and a duplicate message
      send(2, { kind: 'ops', ops: [{ op: 'free', key: 2 }] }); // a free that overtook its booking
      send(3, { kind: 'ops', ops: [booking(2, 2n)] }); // ...which then arrives: a no-op
      send(4, { kind: 'ops', ops: [{ op: 'prefill', key: 3 }] }); // a prefill that overtook its booking
      send(5, { kind: 'ops', ops: [booking(3, 3n)] }); // ...so it arrives prefilled
      nc.publish(subject, new Uint8Array([0xc1, 0x00, 0xff])); // not msgpack
      nc.publish(subject, new TextEncoder().encode('hello'));
      await nc.flush();
      await waitFor(() => (b.stats().replicas?.messagesReceived ?? 0) >= 8, 'b to receive all eight messages');
      const s = b.stats();
      expect(s.load.map((l) => [Number(l.workerId), l.activePrefillTokens, l.activeBlocks, l.requests])).toEqual([
        [1, 32, 3, 1],
        [3, 0, 3, 1],
      ]);
      expect(s.replicas).toMatchObject({ remoteInFlight: 2, duplicates: 2, reordered: 3, messagesRejected: 2, bookingsApplied: 2 });
      // The peer goes quiet: its load lapses within the lease.
      await waitFor(() => remote(b) === 0, 'the silent peer to lapse', 5 * LEASE);
      expect(b.stats().replicas?.leaseExpiries).toBe(1);
      expect(b.stats().load).toEqual([]);
      await nc.close();
    });

    test('a full state repairs a lost free (gap detected, state requested)', async () => {
      fresh();
      const b = replica('b');
      await b.ready();
      const nc = await connect({ servers: server.url });
      const requests: string[] = [];
      nc.subscribe(subject, {
        callback: (_e, m) => {
          requests.push(String(m.data[2]));
        },
      });
      const send = (seq: number, body: WireBody) =>
        nc.publish(subject, encodeMessage({ replicaId: 'peer', instance: 9, seq, ...body } as WireMessage));
      const book = (key: number) => ({
        key,
        workerId: 1n,
        dpRank: 0,
        prefillTokens: 8,
        blocks: new BigUint64Array([BigInt(key)]),
        unshared: 0,
      });
      send(1, {
        kind: 'ops',
        ops: [
          { op: 'book', booking: book(1) },
          { op: 'book', booking: book(2) },
        ],
      });
      await waitFor(() => remote(b) === 2, 'two bookings');
      // seq 2 (freeing key 1) is "lost"; seq 3 reveals the gap, and b asks this peer for its state.
      send(3, { kind: 'heartbeat', inFlight: 1 });
      await waitFor(() => (b.stats().replicas?.gaps ?? 0) === 1, 'the gap to be noticed');
      send(4, { kind: 'state', part: 0, parts: 1, bookings: [book(2)] });
      await waitFor(() => remote(b) === 1, 'the state to repair the lost free');
      expect(b.stats().replicas).toMatchObject({ repaired: 1, statesApplied: 1 });
      expect(requests).toContain('3'); // the third byte is the kind; 3: b's targeted join asking for the state
      await nc.close();
    });

    test('bad replica options are typed errors', () => {
      const bad = (replicas: unknown) => {
        try {
          new KvRouter({ blockSize: BS, backend, replicas: replicas as ReplicaOptions });
        } catch (err) {
          expect(err).toBeInstanceOf(KvRouteError);
          return (err as KvRouteError).code;
        }
        return 'accepted';
      };
      expect(bad({})).toBe('ERR_INVALID_ARG');
      expect(bad({ nats: { servers: [] } })).toBe('ERR_INVALID_ARG');
      expect(bad({ nats: { servers: 'nats://x', subject: 'a.*' } })).toBe('ERR_INVALID_ARG');
      expect(bad({ nats: { servers: 'nats://x', token: 't', user: 'u', pass: 'p' } })).toBe('ERR_INVALID_ARG');
      expect(bad({ nats: { servers: 'nats://x' }, heartbeatMs: 1000, leaseMs: 1500 })).toBe('ERR_INVALID_ARG');
      expect(bad({ nats: { servers: 'nats://x' }, lease: 1 })).toBe('ERR_INVALID_ARG');
      expect(bad({ nats: { servers: 'nats://x' }, heartbeatMs: 2 ** 32 })).toBe('ERR_INVALID_ARG');
      expect(bad({ nats: { servers: 'nats://x' }, batchMs: -1 })).toBe('ERR_INVALID_ARG');
      expect(bad({ nats: { servers: 'nats://x', replicaId: 'a' }, replicaId: 'b' })).toBe('ERR_INVALID_ARG');
      expect(bad({ nats: { servers: 'nats://x', credentials: '/nonexistent.creds' } })).toBe('ERR_INVALID_ARG');
    });
  });

  test('NATS restarted mid-run: replicas fall back to local load, count the outage and resync', async () => {
    const own = new NatsServer();
    await own.start();
    const mk = (id: string) => {
      const r = new KvRouter({
        blockSize: BS,
        replicas: { nats: { servers: own.url }, replicaId: id, heartbeatMs: HEARTBEAT, leaseMs: LEASE },
      });
      r.addWorker(1);
      r.addWorker(2);
      return r;
    };
    const [a, b] = [mk('a'), mk('b')];
    try {
      await Promise.all([a.ready(), b.ready()]);
      await a.route({ requestId: 'before', tokens: prompt(0) });
      await waitFor(() => b.stats().replicas?.remoteInFlight === 1, 'b to see the booking');
      await own.stop();
      await waitFor(() => b.stats().replicas?.connected === false, 'b to notice the outage');
      await waitFor(() => b.stats().replicas?.remoteInFlight === 0, "a's load to lapse on b", 5 * LEASE);
      // Routing goes on, on local load only.
      const during = await b.route({ requestId: 'during', tokens: prompt(1) });
      expect(during.workerId).toBeTypeOf('bigint');
      await own.start();
      await waitFor(() => a.stats().replicas?.connected === true && b.stats().replicas?.connected === true, 'both to reconnect', 15_000);
      await waitFor(
        () => b.stats().replicas?.remoteInFlight === 1 && a.stats().replicas?.remoteInFlight === 1,
        'both to relearn the other after the outage',
        15_000,
      );
      expect(a.stats().replicas?.outages).toBe(1);
      expect(b.stats().replicas?.outages).toBe(1);
      expect(b.stats().replicas?.leaseExpiries).toBeGreaterThanOrEqual(1);
    } finally {
      await Promise.all([a.closeAsync(), b.closeAsync()]);
      await own.dispose();
    }
  });

  test('a partition: each side drops the other within the lease, routes on, and converges on heal', async () => {
    const proxy = new TcpProxy(server.port);
    await proxy.open();
    const subject = `kvroute.partition${Date.now()}`;
    const mk = (id: string, url: string) => {
      const r = new KvRouter({
        blockSize: BS,
        replicas: { nats: { servers: url, subject }, replicaId: id, heartbeatMs: HEARTBEAT, leaseMs: LEASE },
      });
      r.addWorker(1);
      r.addWorker(2);
      return r;
    };
    const a = mk('a', `nats://127.0.0.1:${proxy.port}`);
    const b = mk('b', server.url);
    try {
      await Promise.all([a.ready(), b.ready()]);
      await a.route({ requestId: 'a1', tokens: prompt(0) });
      await b.route({ requestId: 'b1', tokens: prompt(1) });
      await waitFor(() => a.stats().replicas?.remoteInFlight === 1 && b.stats().replicas?.remoteInFlight === 1, 'both to see the other');
      await proxy.cut();
      await waitFor(
        () => a.stats().replicas?.remoteInFlight === 0 && b.stats().replicas?.remoteInFlight === 0,
        'each side to drop the other',
        10 * LEASE,
      );
      expect(b.stats().replicas?.connected).toBe(true);
      expect(a.stats().replicas?.connected).toBe(false);
      // Changes on either side during the partition reach the other after it heals.
      b.free('b1');
      await b.route({ requestId: 'b2', tokens: prompt(2) });
      await b.route({ requestId: 'b3', tokens: prompt(3) });
      await a.route({ requestId: 'a2', tokens: prompt(4) });
      await proxy.open();
      await waitFor(
        () => a.stats().replicas?.remoteInFlight === 2 && b.stats().replicas?.remoteInFlight === 2,
        'both sides to converge after the heal',
        15_000,
      );
      expect(a.stats().load).toEqual(b.stats().load);
    } finally {
      await Promise.all([a.closeAsync(), b.closeAsync()]);
      await proxy.cut();
    }
  });

  describe('replicas in separate processes', () => {
    let child: ChildProcess | undefined;
    afterEach(() => {
      child?.kill('SIGKILL');
      child = undefined;
    });

    test("a killed replica's load expires within the lease; its bookings steered the others meanwhile", async () => {
      requireDist();
      const subject = `kvroute.proc${Date.now()}`;
      const script = `
        const { KvRouter } = await import(${JSON.stringify(DIST_ESM)});
        const r = new KvRouter({ blockSize: ${BS}, replicas: { nats: { servers: ${JSON.stringify(server.url)}, subject: ${JSON.stringify(subject)} }, replicaId: 'child', heartbeatMs: ${HEARTBEAT}, leaseMs: ${LEASE} } });
        r.addWorker(1); r.addWorker(2);
        await r.ready();
        for (let i = 0; i < 3; i++) await r.route({ requestId: 'c' + i, tokens: Array.from({ length: 16 }, (_, k) => 100 * i + k), allowedWorkers: [1] });
        console.log('routed');
        setInterval(() => {}, 1000);`;
      const parent = new KvRouter({
        blockSize: BS,
        replicas: { nats: { servers: server.url, subject }, replicaId: 'parent', heartbeatMs: HEARTBEAT, leaseMs: LEASE },
      });
      parent.addWorker(1);
      parent.addWorker(2);
      try {
        await parent.ready();
        child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
        const running = child;
        await waitFor(
          () => {
            if (running.exitCode !== null) throw new Error(`the child replica exited with ${running.exitCode}`);
            return parent.stats().replicas?.remoteInFlight === 3;
          },
          "the child's three bookings",
          20_000,
        );
        // Worker 1 carries the child's load, so the parent's cold request goes to worker 2.
        expect((await parent.route({ requestId: 'p', tokens: prompt(7) })).workerId).toBe(2n);
        parent.free('p');
        child.kill('SIGKILL');
        const killedAt = Date.now();
        await waitFor(() => parent.stats().replicas?.remoteInFlight === 0, "the child's load to expire", 10 * LEASE);
        expect(Date.now() - killedAt).toBeLessThan(LEASE + 4 * HEARTBEAT + 1000);
        expect(parent.stats().replicas).toMatchObject({ leaseExpiries: 1, expiredBookings: 3, peers: 0 });
        expect(parent.stats().load).toEqual([]);
      } finally {
        await parent.closeAsync();
      }
    });
  });

  test('default seeds differ per replica, so identical replicas do not break ties identically', async () => {
    // Eight idle workers tie; with seed 0 everywhere every replica would pick the same one.
    const picks = new Set<bigint>();
    for (let i = 0; i < 8; i++) {
      const r = new KvRouter({
        blockSize: BS,
        replicas: { nats: { servers: server.url, subject: `kvroute.seed${i}` }, replicaId: `s${i}` },
      });
      for (let w = 1; w <= 8; w++) r.addWorker(w);
      picks.add((await r.route({ requestId: 'x', tokens: prompt(0) })).workerId);
      await r.closeAsync();
    }
    expect(picks.size).toBeGreaterThan(1);
    const fixed = new Set<bigint>();
    for (let i = 0; i < 4; i++) {
      const r = new KvRouter({
        blockSize: BS,
        seed: 5,
        replicas: { nats: { servers: server.url, subject: `kvroute.fixed${i}` }, replicaId: `f${i}` },
      });
      for (let w = 1; w <= 8; w++) r.addWorker(w);
      fixed.add((await r.route({ requestId: 'x', tokens: prompt(0) })).workerId);
      await r.closeAsync();
    }
    expect(fixed.size).toBe(1);
  });
});
