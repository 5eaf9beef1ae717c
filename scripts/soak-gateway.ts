/**
 * A soak of the gateway: four mock workers (aggregated, or two prefill and two decode over vLLM's
 * two steps or SGLang's bootstrap protocol), each behind TCP proxies, and one gateway or several
 * router replicas sharing their load over a real nats-server; 24 clients (`soak/clients.ts`)
 * while faults (`soak/faults.ts`) hit the workers, the network and the replicas one at a time.
 * Every 30 s it prints the heap (after a collection; the gateways' tokenize caches, bounded, fill
 * it), the requests so far by how they ended, and the bookings in the routers. At the end, with
 * the faults over, no request may be left in flight in a gateway or booked in a router (its own
 * or a peer's), no session bound past its TTL, every answer must have been whole or a clean error, every worker must be back in
 * every replica's routing and every replica must hear all the others. Not part of the test suite
 * (it runs for minutes); the suite holds what it found (`test/gateway-chaos.test.ts`, and the
 * close() test of `test/gateway-shutdown.test.ts`). It exits 1 when one of these fails.
 *
 *   node --expose-gc --import tsx scripts/soak-gateway.ts [--minutes 3] [--backend native|js]
 *     [--mode aggregated|vllm|sglang] [--replicas 1] [--seed 1]
 */

import { parseArgs } from 'node:util';
import { scrape } from '../test/helpers/prometheus.js';
import { Rng } from '../test/helpers/random.js';
import type { BackendName } from '../ts/index.js';
import { SoakClients } from './soak/clients.js';
import { SoakFaults } from './soak/faults.js';
import { type Replica, Replicas } from './soak/replicas.js';
import { type SoakMode, SoakWorkers } from './soak/workers.js';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '3' },
    backend: { type: 'string', default: 'native' },
    mode: { type: 'string', default: 'aggregated' },
    replicas: { type: 'string', default: '1' },
    seed: { type: 'string', default: '1' },
  },
});
const minutes = Number(values.minutes);
const backend = values.backend as BackendName;
const mode = values.mode as SoakMode;
if (!['aggregated', 'vllm', 'sglang'].includes(mode)) throw new Error(`--mode: aggregated, vllm or sglang, not ${mode}`);
const replicaCount = Number(values.replicas);
if (!Number.isInteger(replicaCount) || replicaCount < 1) throw new Error(`--replicas: a positive integer, not ${values.replicas}`);
const rng = new Rng(Number(values.seed));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const workers = await SoakWorkers.start(mode);
const replicas = new Replicas(replicaCount, {
  blockSize: 16,
  backend,
  logLevel: false,
  upstream: { retries: 2, headersTimeoutMs: 1500, bodyTimeoutMs: 1500 },
  health: { intervalMs: 200, timeoutMs: 200, failureThreshold: 2 },
  // A binding lives while a request of its session is in flight, then 2 s: at the end none may be left.
  router: { sessionAffinityTtlSecs: 2 },
  ...(mode === 'sglang' ? { disaggregation: { protocol: 'sglang' as const } } : {}),
  workers: workers.gatewayWorkers(),
});
await replicas.start();
await sleep(300);

const clients = new SoakClients(rng, () => replicas.pick((n) => rng.int(n)).url);
const faults = new SoakFaults(rng, workers, replicas);

/** One replica's leftovers: requests in flight in its gateway, bookings (its own, its peers') and session bindings in its router, peers heard. */
async function leftovers(r: Replica): Promise<{ inFlight: number; booked: number; remote: number; sessions: number; peers: number }> {
  const m = await scrape(`${r.url}/metrics`);
  const s = r.gateway.router.stats();
  return {
    inFlight: m.sum('kvroute_gateway_in_flight_requests'),
    booked: s.inFlight,
    remote: s.replicas?.remoteInFlight ?? 0,
    sessions: s.sessions?.bound ?? 0,
    peers: s.replicas?.peers ?? 0,
  };
}

const started = Date.now();
const over = () => Date.now() - started >= minutes * 60_000;
const sending = clients.run(24, over);
const faulting = faults.run(over);
const gc = (globalThis as { gc?: () => void }).gc;
while (!over()) {
  await sleep(Math.min(30_000, Math.max(0, minutes * 60_000 - (Date.now() - started))));
  gc?.();
  const heap = (process.memoryUsage().heapUsed / 2 ** 20).toFixed(1);
  // The gateways' caches of tokenized prompts fill up to their bound (every prompt here differs).
  const cached = (
    await Promise.all(replicas.live.map(async (r) => (await scrape(`${r.url}/metrics`)).sum('kvroute_gateway_tokenize_cache_bytes')))
  ).reduce((a, b) => a + b, 0);
  const seconds = Math.round((Date.now() - started) / 1000);
  const stats = replicas.live.map((r) => r.gateway.router.stats());
  const booked = stats.map((s) => s.inFlight).join('/');
  const hits = stats.map((s) => s.sessions?.hits ?? 0).join('/');
  console.log(
    `${seconds}s: heap ${heap} MB (tokenize caches ${(cached / 2 ** 20).toFixed(1)} MB), ${clients.sent} requests, ${booked} booked, ${hits} sent to their session's worker`,
    Object.fromEntries(clients.endings),
  );
  console.log(`  faults: ${faults.take().join(', ') || 'none'}`);
}
await Promise.all([sending, faulting]);
for (let i = 0; i < workers.count; i++) workers.worker(i).fault({ kind: 'recover' });

// The faults are over: leases run out, states repair, workers come back. Wait for all of it.
const settled = (l: Awaited<ReturnType<typeof leftovers>>, r: Replica) =>
  l.inFlight === 0 &&
  l.booked === 0 &&
  l.remote === 0 &&
  l.sessions === 0 &&
  l.peers === replicaCount - 1 &&
  r.gateway.workers().every((w) => w.routable);
const deadline = Date.now() + 3000 + 4 * replicas.leaseMs;
let last = await Promise.all(replicas.live.map(leftovers));
while (!replicas.live.every((r, i) => settled(last[i], r)) && Date.now() < deadline) {
  await sleep(250);
  last = await Promise.all(replicas.live.map(leftovers));
}
for (const [i, r] of replicas.live.entries()) {
  const l = last[i];
  console.log(
    `${r.id}: ${l.inFlight} requests in flight, ${l.booked} booked, ${l.remote} peers' bookings, ${l.sessions} sessions bound, ${l.peers} peers heard;`,
    'workers:',
    r.gateway.workers().map((w) => `${w.id} ${w.health}${w.routable ? '' : ' (out of routing)'}`),
  );
  // What the faults made the replica repair since it started: event gaps and replays, peers' leases and states.
  const m = await scrape(`${r.url}/metrics`);
  const sync = r.gateway.router.stats().replicas;
  console.log(
    `  repaired: ${m.sum('kvroute_event_source_gaps_total')} event gaps, ${m.sum('kvroute_event_source_replays_total')} replays,`,
    `${m.sum('kvroute_event_source_resyncs_total')} resyncs`,
    sync
      ? `; ${sync.leaseExpiries} peers' leases ran out, ${sync.statesApplied} peer states applied, ${sync.repaired} bookings repaired`
      : '',
  );
}
if (clients.unclean.length > 0) console.log(`${clients.unclean.length} ended uncleanly:`, clients.unclean.slice(0, 20));
const clean = replicas.live.every((r, i) => settled(last[i], r)) && clients.unclean.length === 0;
await replicas.close();
await workers.close();
process.exitCode = clean ? 0 : 1;
