/**
 * Router replicas sharing load over a real nats-server on 127.0.0.1:
 * 1. cost: replica A serves a steady stream (32 requests in flight; each event-loop turn routes 4,
 *    completes 4 prefills and frees 4) while B listens. Sync messages and bytes A publishes per
 *    request (heartbeats apart), and whether B's view matches A's at the end.
 * 2. latency: the same stream on a router without replicas, on a replica whose peer is elsewhere
 *    (the sender's cost only) and on one whose peer shares this process (both sides' cost),
 *    alternating rounds in one run: `route()` p50/p99 (publishing is queued, not done in the call)
 *    and requests/s of the whole loop (which includes the batched publishing).
 * 3. throughput: 4 replicas in one process sharing the server, requests spread round robin:
 *    requests/s over all of them, then the time until every replica holds the same load.
 * Phases 1 and 2 run again with session affinity, each session 4 consecutive requests: the
 * session bindings' share of the sync.
 * 4. propagation: one booking at a time on A, timed until B has applied it (B polled every
 *    event-loop turn): the sync delay to give `kvroute replay --replica-sync-delay-ms`.
 * Requests are 4,096 tokens at block size 64 (64 block ids per booking) over 16 workers.
 */

import { setImmediate as turn } from 'node:timers/promises';
import { NATS_BINARY, NatsServer } from '../test/helpers/nats-server.js';
import { KvRouter, type KvRouterOptions, type ReplicaStats } from '../ts/index.js';
import { fmt, percentile, printTable, QUICK, sortedCopy, writeResult } from './common.js';

const WORKERS = 16;
const BS = 64;
const IN_FLIGHT = 32;
const PER_TURN = 4;
const REQUESTS = QUICK ? 800 : 20_000;
/** Session affinity for the session rows: sessions of 4 consecutive requests. */
const AFFINITY: Partial<KvRouterOptions> = { sessionAffinityTtlSecs: 600 };
const SESSION = (i: number) => `s${Math.floor(i / 4)}`;

/** 256 prompts, made before timing: one of 50 system prompts (2,048 tokens), then a distinct tail. */
const PROMPTS = Array.from({ length: 256 }, (_, i) =>
  Uint32Array.from({ length: 4096 }, (_, k) => (k < 2048 ? (i % 50) * 7919 + k : i * 131 + k) % 150_000),
);
const prompt = (i: number) => PROMPTS[i % PROMPTS.length];

function router(opts: Partial<KvRouterOptions> = {}): KvRouter {
  const r = new KvRouter({ blockSize: BS, seed: 1, ...opts });
  for (let w = 0; w < WORKERS; w++) r.addWorker(w);
  return r;
}

function replica(server: NatsServer, id: string, subject: string, batchMs = 0, extra: Partial<KvRouterOptions> = {}): KvRouter {
  // Heartbeats every second, as by default; they are reported apart.
  return router({ replicas: { nats: { servers: server.url, subject }, replicaId: id, batchMs }, ...extra });
}

/** Runs the steady stream over `routers` (request i on routers[i % n]); returns route() latencies (ns) and wall ms. */
async function stream(
  routers: KvRouter[],
  requests: number,
  tag: string,
  session?: (i: number) => string,
): Promise<{ latencies: number[]; wallMs: number }> {
  const latencies: number[] = [];
  const open: { id: string; owner: KvRouter; prefilled: boolean }[] = [];
  const start = performance.now();
  let next = 0;
  while (next < requests || open.length > 0) {
    for (let k = 0; k < PER_TURN && next < requests && open.length < IN_FLIGHT; k++, next++) {
      const owner = routers[next % routers.length];
      const id = `${tag}-${next}`;
      const tokens = prompt(next);
      const t0 = process.hrtime.bigint();
      await owner.route({ requestId: id, tokens, ...(session ? { sessionId: `${tag}-${session(next)}` } : {}) });
      latencies.push(Number(process.hrtime.bigint() - t0));
      open.push({ id, owner, prefilled: false });
    }
    let prefills = 0;
    for (const r of open) {
      if (prefills === PER_TURN) break;
      if (!r.prefilled) {
        r.owner.markPrefillCompleted(r.id);
        r.prefilled = true;
        prefills++;
      }
    }
    if (open.length >= IN_FLIGHT || next >= requests) {
      for (const r of open.splice(0, PER_TURN)) r.owner.free(r.id);
    }
    // The end of an event-loop turn: queued sync changes are published here.
    await turn();
  }
  return { latencies, wallMs: performance.now() - start };
}

async function waitUntil(cond: () => boolean, timeoutMs: number): Promise<number> {
  const start = performance.now();
  while (!cond()) {
    if (performance.now() - start > timeoutMs) return Number.NaN;
    await new Promise((r) => setTimeout(r, 2));
  }
  return performance.now() - start;
}

/** A replica router's sync stats (every router here has `replicas`). */
function sync(r: KvRouter): ReplicaStats {
  const s = r.stats().replicas;
  if (!s) throw new Error('this router has no replicas');
  return s;
}

async function cost(server: NatsServer, sessions: boolean) {
  const subject = sessions ? 'bench.cost-sessions' : 'bench.cost';
  const a = replica(server, 'a', subject, 0, sessions ? AFFINITY : {});
  const b = replica(server, 'b', subject, 0, sessions ? AFFINITY : {});
  await Promise.all([a.ready(), b.ready()]);
  await waitUntil(() => b.stats().replicas?.peers === 1, 5000);
  const before = sync(a);
  const heartbeatsBefore = before.messagesPublished;
  const { wallMs } = await stream([a], REQUESTS, 'cost', sessions ? SESSION : undefined);
  const after = sync(a);
  const bound = (r: KvRouter) => r.stats().sessions?.bound ?? 0;
  const converged = await waitUntil(() => b.stats().replicas?.remoteInFlight === 0 && bound(b) === bound(a), 5000);
  // Heartbeats during the run: one a second.
  const heartbeats = Math.floor(wallMs / 1000);
  const messages = after.messagesPublished - heartbeatsBefore - heartbeats;
  const bytes = after.bytesPublished - before.bytesPublished;
  const bApplied = sync(b).bookingsApplied;
  await Promise.all([a.closeAsync(), b.closeAsync()]);
  return {
    requests: REQUESTS,
    sessions: sessions ? REQUESTS / 4 : 0,
    messagesPerRequest: messages / REQUESTS,
    bytesPerRequest: bytes / REQUESTS,
    sessionUpdatesPerRequest: after.sessionUpdatesPublished / REQUESTS,
    peerAppliedEveryBooking: bApplied === REQUESTS,
    peerConvergedMs: converged,
  };
}

async function latency(server: NatsServer) {
  const a = replica(server, 'la', 'bench.latency');
  const b = replica(server, 'lb', 'bench.latency');
  const plain = router();
  // A replica whose peer runs elsewhere: only the sending side's cost lands in this process.
  const solo = replica(server, 'solo', 'bench.latency-solo');
  const batched = replica(server, 'batched', 'bench.latency-batched', 2);
  const sessions = replica(server, 'sessions', 'bench.latency-sessions', 0, AFFINITY);
  await Promise.all([a.ready(), b.ready(), solo.ready(), batched.ready(), sessions.ready()]);
  const rounds = QUICK ? 1 : 3;
  const rows: Record<string, { latencies: number[]; wallMs: number; requests: number }> = {
    'no replicas': { latencies: [], wallMs: 0, requests: 0 },
    'replica, peer in another process': { latencies: [], wallMs: 0, requests: 0 },
    'the same, batchMs 2': { latencies: [], wallMs: 0, requests: 0 },
    'the same (batchMs 0), session affinity, sessions of 4': { latencies: [], wallMs: 0, requests: 0 },
    'replica + its peer in this process': { latencies: [], wallMs: 0, requests: 0 },
  };
  for (let round = 0; round < rounds; round++) {
    for (const [name, r] of [
      ['no replicas', plain],
      ['replica, peer in another process', solo],
      ['the same, batchMs 2', batched],
      ['the same (batchMs 0), session affinity, sessions of 4', sessions],
      ['replica + its peer in this process', a],
    ] as const) {
      const run = await stream([r], REQUESTS / 2, `lat${round}`, r === sessions ? SESSION : undefined);
      rows[name].latencies.push(...run.latencies);
      rows[name].wallMs += run.wallMs;
      rows[name].requests += REQUESTS / 2;
    }
  }
  await Promise.all([a, b, plain, solo, batched, sessions].map((r) => r.closeAsync()));
  return Object.fromEntries(
    Object.entries(rows).map(([name, r]) => {
      const sorted = sortedCopy(r.latencies);
      return [
        name,
        {
          routeP50us: percentile(sorted, 50) / 1000,
          routeP99us: percentile(sorted, 99) / 1000,
          requestsPerSec: r.requests / (r.wallMs / 1000),
        },
      ];
    }),
  );
}

async function propagation(server: NatsServer) {
  const a = replica(server, 'pa', 'bench.propagation');
  const b = replica(server, 'pb', 'bench.propagation');
  await Promise.all([a.ready(), b.ready()]);
  await waitUntil(() => b.stats().replicas?.peers === 1, 5000);
  const samples: number[] = [];
  const rounds = QUICK ? 50 : 500;
  for (let i = 0; i < rounds; i++) {
    const applied = sync(b).bookingsApplied;
    const t0 = performance.now();
    await a.route({ requestId: `p${i}`, tokens: prompt(i) });
    while (sync(b).bookingsApplied === applied) await turn();
    samples.push(performance.now() - t0);
    a.free(`p${i}`);
    await waitUntil(() => sync(b).remoteInFlight === 0, 5000);
  }
  await Promise.all([a.closeAsync(), b.closeAsync()]);
  const sorted = sortedCopy(samples);
  return { rounds, p50Ms: percentile(sorted, 50), p99Ms: percentile(sorted, 99) };
}

async function throughput(server: NatsServer) {
  const replicas = ['t0', 't1', 't2', 't3'].map((id) => replica(server, id, 'bench.throughput'));
  await Promise.all(replicas.map((r) => r.ready()));
  await waitUntil(() => replicas.every((r) => r.stats().replicas?.peers === 3), 5000);
  const { wallMs } = await stream(replicas, REQUESTS, 'tp');
  const settled = await waitUntil(() => replicas.every((r) => r.stats().replicas?.remoteInFlight === 0), 10_000);
  const received = replicas.reduce((n, r) => n + (r.stats().replicas?.messagesReceived ?? 0), 0);
  await Promise.all(replicas.map((r) => r.closeAsync()));
  return {
    replicas: 4,
    requests: REQUESTS,
    requestsPerSec: REQUESTS / (wallMs / 1000),
    settledAfterMs: settled,
    messagesReceived: received,
  };
}

async function main() {
  if (!NATS_BINARY) {
    console.log('bench:replicas skipped: nats-server is not installed (apt-get install nats-server)');
    return;
  }
  const server = new NatsServer();
  await server.start();
  try {
    // Warm-up (JIT, connections), untimed.
    const warm = router();
    await stream([warm], 500, 'warm');
    await warm.closeAsync();
    const c = await cost(server, false);
    const cs = await cost(server, true);
    printTable(
      'sync cost (replica A routes, B listens)',
      [c, cs].map((x) => ({
        requests: x.requests,
        sessions: x.sessions,
        'messages/request': fmt(x.messagesPerRequest, 2),
        'bytes/request': fmt(x.bytesPerRequest, 0),
        'session updates/request': fmt(x.sessionUpdatesPerRequest, 2),
        'peer applied all': String(x.peerAppliedEveryBooking),
        'peer settled ms': fmt(x.peerConvergedMs, 1),
      })),
    );
    const l = await latency(server);
    printTable(
      'route() latency and loop throughput, side by side',
      Object.entries(l).map(([name, r]) => ({
        router: name,
        'route p50 µs': fmt(r.routeP50us, 1),
        'route p99 µs': fmt(r.routeP99us, 1),
        'requests/s': fmt(r.requestsPerSec, 0),
      })),
    );
    const pr = await propagation(server);
    printTable('a booking from A applied on B (one at a time)', [
      { rounds: pr.rounds, 'p50 ms': fmt(pr.p50Ms, 2), 'p99 ms': fmt(pr.p99Ms, 2) },
    ]);
    const t = await throughput(server);
    printTable('4 replicas, one NATS server, one process', [
      {
        requests: t.requests,
        'requests/s': fmt(t.requestsPerSec, 0),
        'settled ms': fmt(t.settledAfterMs, 1),
        'messages received': t.messagesReceived,
      },
    ]);
    writeResult('replicas', { natsServer: NATS_BINARY, cost: c, costWithSessions: cs, latency: l, propagation: pr, throughput: t });
  } finally {
    await server.dispose();
  }
}

await main();
