/**
 * A soak of the gateway: four mock workers (aggregated, or two prefill and two decode over vLLM's
 * two steps or SGLang's bootstrap protocol), each behind TCP proxies, and one gateway or several
 * router replicas sharing their load over a real nats-server, in this process or, with
 * `--serve`, as `kvroute serve` processes reading config files (`soak/serve-replicas.ts`); 24
 * clients (`soak/clients.ts`) while faults (`soak/faults.ts`) hit the workers, the network and
 * the replicas one at a time. Every 30 s it prints the memory, the requests so far by how they
 * ended, and the bookings in the routers. At the end, with the faults over, no request may be
 * left in flight in a gateway or booked in a router (its own or a peer's), no session bound past
 * its TTL, every answer must have been whole or a clean error, every worker must be back in
 * every replica's routing, every replica must hear all the others and hold the same index
 * (unless one resynced a stream), and nothing may have gone wrong outside the requests (a
 * replica that did not stop cleanly, a reload not applied, an error logged). Each replica is
 * read over HTTP (`/metrics`, `/admin/workers`), either way; a replica's successor warm-starts
 * from a live peer's `/dump` or the replicas' latest index snapshot. Not part of the test suite
 * (it runs for minutes); the suite holds what it found (`test/gateway-chaos.test.ts`, the
 * close() test of `test/gateway-shutdown.test.ts`). It exits 1 when one of these fails. With
 * `--secure`, every connection that can be guarded is: TLS (mutual to the workers and NATS) and
 * keys (`soak/secure.ts`).
 *
 *   node --expose-gc --import tsx scripts/soak-gateway.ts [--minutes 3] [--backend native|js]
 *     [--mode aggregated|vllm|sglang] [--replicas 1] [--serve] [--secure] [--seed 1]
 */

import { parseArgs } from 'node:util';
import { requireDist } from '../test/helpers/dist.js';
import { Rng } from '../test/helpers/random.js';
import type { BackendName } from '../ts/index.js';
import { SoakClients } from './soak/clients.js';
import { SoakFaults } from './soak/faults.js';
import { indexDigest, type ReplicaState, replicaState, type SoakReplicaSet, SYNC } from './soak/replica-set.js';
import { Replicas } from './soak/replicas.js';
import { SoakSecurity } from './soak/secure.js';
import { ServeReplicas } from './soak/serve-replicas.js';
import { type SoakMode, SoakWorkers } from './soak/workers.js';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '3' },
    backend: { type: 'string', default: 'native' },
    mode: { type: 'string', default: 'aggregated' },
    replicas: { type: 'string', default: '1' },
    serve: { type: 'boolean', default: false },
    secure: { type: 'boolean', default: false },
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

if (values.serve) requireDist();
const security = values.secure ? SoakSecurity.make() : undefined;
security?.trustInThisProcess();
const workers = await SoakWorkers.start(mode, security?.workerOptions());
const plain = {
  blockSize: 16,
  backend,
  logLevel: false as const,
  upstream: { retries: 2, headersTimeoutMs: 1500, bodyTimeoutMs: 1500 },
  health: { intervalMs: 200, timeoutMs: 200, failureThreshold: 2 },
  // A binding lives while a request of its session is in flight, then 2 s: at the end none may be left.
  router: { sessionAffinityTtlSecs: 2 },
  ...(mode === 'sglang' ? { disaggregation: { protocol: 'sglang' as const } } : {}),
  workers: workers.gatewayWorkers(),
};
const options = security ? security.gatewayOptions(plain) : plain;
const serving = values.serve ? new ServeReplicas(replicaCount, options, security) : undefined;
const replicas: SoakReplicaSet = serving ?? new Replicas(replicaCount, options, security);
await replicas.start();
await sleep(300);

const clients = new SoakClients(rng, () => replicas.pick((n) => rng.int(n)).url, serving?.crashed);
const faults = new SoakFaults(rng, workers, replicas);

const started = Date.now();
const over = () => Date.now() - started >= minutes * 60_000;
const sending = clients.run(24, over);
const faulting = faults.run(over);
while (!over()) {
  await sleep(Math.min(30_000, Math.max(0, minutes * 60_000 - (Date.now() - started))));
  // First: a scrape reads the event-loop delay since the one before, and the state's scrape follows.
  const memory = await replicas.memory();
  const states = await Promise.all(replicas.live.map((r) => replicaState(r.url)));
  // The gateways' caches of tokenized prompts fill up to their bound (every prompt here differs).
  const cached = states.reduce((n, s) => n + s.tokenizeCacheBytes, 0);
  const seconds = Math.round((Date.now() - started) / 1000);
  const booked = states.map((s) => s.booked).join('/');
  const hits = states.map((s) => s.sessionHits).join('/');
  console.log(
    `${seconds}s: ${memory}; tokenize caches ${(cached / 2 ** 20).toFixed(1)} MB; ${clients.sent} requests, ${booked} booked, ${hits} sent to their session's worker`,
    Object.fromEntries(clients.endings),
  );
  console.log(`  faults: ${faults.take().join(', ') || 'none'}`);
}
await Promise.all([sending, faulting]);
for (let i = 0; i < workers.count; i++) workers.worker(i).fault({ kind: 'recover' });

// The faults are over: leases run out, states repair, workers come back. Wait for all of it.
const settled = (l: ReplicaState) =>
  l.inFlight === 0 &&
  l.booked === 0 &&
  l.remote === 0 &&
  l.sessions === 0 &&
  l.peers === replicaCount - 1 &&
  l.workers.length === workers.count &&
  l.workers.every((w) => w.routable);
const deadline = Date.now() + 3000 + 4 * SYNC.leaseMs;
/**
 * The replicas hear the same engines, so their indexes must agree, warm-started ones too; unless
 * one cleared a stream to resync (it then lacks what the engine stored before, until evicted).
 */
const resynced = (all: ReplicaState[]) => all.some((l) => l.resyncs > 0);
const agree = (all: ReplicaState[]) => resynced(all) || new Set(all.map((l) => l.blocks)).size === 1;
const done = (all: ReplicaState[]) => all.every(settled) && agree(all);
let last = await Promise.all(replicas.live.map((r) => replicaState(r.url)));
while (!done(last) && Date.now() < deadline) {
  await sleep(250);
  last = await Promise.all(replicas.live.map((r) => replicaState(r.url)));
}
for (const [i, r] of replicas.live.entries()) {
  const l = last[i];
  console.log(
    `${r.id}: ${l.inFlight} requests in flight, ${l.booked} booked, ${l.remote} peers' bookings, ${l.sessions} sessions bound, ${l.peers} peers heard, ${l.blocks} blocks indexed;`,
    'workers:',
    l.workers.map((w) => `${w.id} ${w.health}${w.routable ? '' : ' (out of routing)'}`),
  );
  console.log(`  repaired: ${l.repairs}`);
}
if (clients.unclean.length > 0) console.log(`${clients.unclean.length} ended uncleanly:`, clients.unclean.slice(0, 20));
// As many blocks is not the same blocks: their dumps must match too.
const digests = await Promise.all(replicas.live.map((r) => indexDigest(r.url)));
const sameIndex = resynced(last) || new Set(digests).size === 1;
console.log(`each replica's index (its /dump's blocks): ${digests.join('; ')}`);
if (!agree(last) || !sameIndex) console.log('the replicas do not agree on the index, and none resynced');
await replicas.close();
await workers.close();
security?.dispose();
for (const from of ['peer', 'snapshot'] as const) {
  const blocks = replicas.warmStarts
    .filter((w) => w.from === from)
    .map((w) => w.blocks)
    .sort((a, b) => a - b);
  if (blocks.length > 0)
    console.log(`${blocks.length} replicas warm-started from a ${from}, with ${blocks[0]}-${blocks.at(-1)} blocks as they began to listen`);
}
if (serving) {
  const ms = serving.stopMs.sort((a, b) => a - b);
  console.log(`${ms.length} SIGTERMs ended their process, in ${ms[0]}-${ms.at(-1)} ms (median ${ms[Math.floor(ms.length / 2)]})`);
  if (serving.logged.size > 0) console.log('logged at warn or above:', Object.fromEntries(serving.logged));
}
if (replicas.problems.length > 0) console.log(`${replicas.problems.length} problems:`, replicas.problems.slice(0, 20));
const clean = done(last) && sameIndex && clients.unclean.length === 0 && replicas.problems.length === 0;
process.exitCode = clean ? 0 : 1;
