/**
 * A soak of the gateway: four mock workers (aggregated, or two prefill and two decode over vLLM's
 * two steps or SGLang's bootstrap protocol) behind one in-process gateway, 24 clients sending
 * completions (one prompt or a batch), chats, Anthropic messages and Responses API turns,
 * streamed and not, one in seven left by its client at a random moment, while a worker at a time
 * hangs, slows down, restarts its engine, drops event batches, or crashes and comes back.
 * Every 30 s it prints the heap (after a collection), the requests so far by how they ended, and
 * the bookings in the router; at the end, with the faults over, no request may be left in flight
 * in the gateway or booked in its router, every answer must have been whole or a clean error, and
 * every worker must be back in routing. Not part of the test suite (it runs for minutes); the
 * chaos suite (`test/gateway-chaos.test.ts`) holds what it found. It exits 1 when one of these fails.
 *
 *   node --expose-gc --import tsx scripts/soak-gateway.ts [--minutes 3] [--backend native|js] [--mode aggregated|vllm|sglang] [--seed 1]
 */

import { parseArgs } from 'node:util';
import { scrape } from '../test/helpers/prometheus.js';
import { Rng } from '../test/helpers/random.js';
import { type BackendName, createGateway, type MockFault, type MockWorker, startMockWorker, type WorkerRole } from '../ts/index.js';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '3' },
    backend: { type: 'string', default: 'native' },
    mode: { type: 'string', default: 'aggregated' },
    seed: { type: 'string', default: '1' },
  },
});
const minutes = Number(values.minutes);
const backend = values.backend as BackendName;
const mode = values.mode as 'aggregated' | 'vllm' | 'sglang';
if (!['aggregated', 'vllm', 'sglang'].includes(mode)) throw new Error(`--mode: aggregated, vllm or sglang, not ${mode}`);
const rng = new Rng(Number(values.seed));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const roles: WorkerRole[] =
  mode === 'aggregated' ? ['aggregated', 'aggregated', 'aggregated', 'aggregated'] : ['prefill', 'prefill', 'decode', 'decode'];
/** A mock worker of `role`; `at`: the worker it replaces after a crash, whose ports it takes again. */
function startWorker(role: WorkerRole, at?: MockWorker): Promise<MockWorker> {
  return startMockWorker({
    port: at ? Number(new URL(at.url).port) : 0,
    kvEvents: at?.kvEventsEndpoints[0] ?? 'tcp://127.0.0.1:0',
    replay: at?.replayEndpoints[0] ?? 'tcp://127.0.0.1:0',
    blockSize: 16,
    speedup: 50,
    ...(mode === 'sglang'
      ? { disaggregationMode: role === 'aggregated' ? null : role, bootstrapPort: at?.bootstrapPort ?? 0, bootstrapTimeoutMs: 1500 }
      : {}),
  });
}
const workers = await Promise.all(roles.map((role) => startWorker(role)));
const gateway = createGateway({
  blockSize: 16,
  backend,
  logLevel: false,
  upstream: { retries: 2, headersTimeoutMs: 1500, bodyTimeoutMs: 1500 },
  health: { intervalMs: 200, timeoutMs: 200, failureThreshold: 2 },
  ...(mode === 'sglang' ? { disaggregation: { protocol: 'sglang' as const } } : {}),
  workers: workers.map((w, i) => ({
    id: i + 1,
    url: w.url,
    kvEvents: w.kvEventsEndpoints,
    replay: w.replayEndpoints,
    role: roles[i],
    ...(mode === 'sglang' && roles[i] === 'prefill' ? { bootstrapPort: w.bootstrapPort } : {}),
  })),
});
const { url } = await gateway.listen();
await sleep(300);

/** How the requests ended, by kind of ending; and what ended uncleanly, in words. */
const endings = new Map<string, number>();
const unclean: string[] = [];
const ended = (how: string, why?: string) => {
  endings.set(how, (endings.get(how) ?? 0) + 1);
  if (why !== undefined) unclean.push(why);
};

/** The body and path of one request: a completion (one prompt or a batch), a chat, an Anthropic message or a Responses API turn. */
function requestOf(n: number, prefix: string, stream: boolean): { path: string; body: Record<string, unknown> } {
  const kind = rng.int(100);
  const maxTokens = 4 + rng.int(40);
  const prompt = `${prefix} q${n}`;
  if (kind < 50) return { path: 'completions', body: { model: 'mock-model', prompt, max_tokens: maxTokens, stream } };
  if (kind < 62) {
    const prompts = Array.from({ length: 2 + rng.int(2) }, (_, i) => `${prompt} part ${i}`);
    return { path: 'completions', body: { model: 'mock-model', prompt: prompts, max_tokens: maxTokens, stream } };
  }
  const messages = [{ role: 'user', content: prompt }];
  if (kind < 80) return { path: 'chat/completions', body: { model: 'mock-model', messages, max_tokens: maxTokens, stream } };
  if (kind < 90) return { path: 'messages', body: { model: 'mock-model', messages, max_tokens: maxTokens, stream } };
  return { path: 'responses', body: { model: 'mock-model', input: prompt, max_output_tokens: maxTokens, stream } };
}

/** One request on one of 12 shared prefixes, streamed or not, perhaps left by its client. */
async function oneRequest(n: number): Promise<void> {
  const prefix = `${'shared system prompt '.repeat(8)}${rng.int(12)} `.repeat(4);
  const stream = rng.chance(0.6);
  const { path, body } = requestOf(n, prefix, stream);
  const leaveAfterMs = rng.chance(0.15) ? rng.int(400) : undefined;
  const client = new AbortController();
  const leave = leaveAfterMs === undefined ? undefined : setTimeout(() => client.abort(), leaveAfterMs);
  try {
    const res = await fetch(`${url}/v1/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: client.signal,
    });
    const text = await res.text();
    if (res.status !== 200) ended(`status ${res.status}`, res.status < 500 ? `${res.status} ${text.slice(0, 200)}` : undefined);
    else if (!stream) ended('whole');
    else if (/"error":\{|event: error|event: response\.failed/.test(text)) ended('stream ended by an error event');
    else if (/data: \[DONE\]\s*$|event: message_stop|event: response\.completed/.test(text)) ended('stream whole');
    else ended('stream cut without an error event', text.slice(-200));
  } catch (err) {
    if (client.signal.aborted) ended('left by its client');
    else ended('gateway connection failed', `${(err as Error).message} ${(err as { cause?: Error }).cause?.message ?? ''}`);
  } finally {
    clearTimeout(leave);
  }
}

/** The faults injected since the last report (`hang 2`: worker 2 hung). */
const faultsSoFar: string[] = [];

/** Starts a crashed worker's successor on its ports, retrying while they are still held. */
async function restartCrashed(i: number): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      workers[i] = await startWorker(roles[i], workers[i]);
      return;
    } catch (err) {
      if (attempt >= 20) throw err;
      await sleep(250);
    }
  }
}

/**
 * A fault on a random worker every 2-4 s; a hang or a slowdown lasts 1-3.5 s, and a crashed
 * worker's process comes back on the same ports 1-3 s later (as a restarted pod would).
 */
async function faults(until: () => boolean): Promise<void> {
  const kinds: MockFault[] = [
    { kind: 'hang' },
    { kind: 'slow', factor: 30 },
    { kind: 'restart' },
    { kind: 'drop-events', count: 3 },
    { kind: 'crash' },
  ];
  while (!until()) {
    await sleep(2000 + rng.int(2000));
    if (until()) return;
    const i = rng.int(workers.length);
    const fault = kinds[rng.int(kinds.length)];
    workers[i].fault(fault);
    faultsSoFar.push(`${fault.kind} ${i + 1}`);
    if (fault.kind === 'hang' || fault.kind === 'slow') {
      await sleep(1000 + rng.int(2500));
      workers[i].fault({ kind: 'recover' });
    } else if (fault.kind === 'crash') {
      await sleep(1000 + rng.int(2000));
      await restartCrashed(i);
    }
  }
}

const started = Date.now();
const over = () => Date.now() - started >= minutes * 60_000;
let sent = 0;
const clients = Array.from({ length: 24 }, async () => {
  while (!over()) await oneRequest(sent++);
});
const faulting = faults(over);
const gc = (globalThis as { gc?: () => void }).gc;
while (!over()) {
  await sleep(Math.min(30_000, Math.max(0, minutes * 60_000 - (Date.now() - started))));
  gc?.();
  const m = await scrape(`${url}/metrics`);
  const heap = (process.memoryUsage().heapUsed / 2 ** 20).toFixed(1);
  const seconds = Math.round((Date.now() - started) / 1000);
  console.log(
    `${seconds}s: heap ${heap} MB, ${sent} requests, ${m.sum('kvroute_router_in_flight_requests')} booked`,
    Object.fromEntries(endings),
  );
  console.log(`  faults: ${faultsSoFar.splice(0).join(', ') || 'none'}`);
}
await Promise.all([...clients, faulting]);
for (const w of workers) w.fault({ kind: 'recover' });
await sleep(3000);
const m = await scrape(`${url}/metrics`);
const inFlight = m.sum('kvroute_gateway_in_flight_requests');
const booked = m.sum('kvroute_router_in_flight_requests');
console.log(`after the faults: ${inFlight} requests in flight in the gateway, ${booked} booked in its router`);
const out = gateway.workers().filter((w) => !w.routable);
console.log(
  'workers:',
  gateway.workers().map((w) => `${w.id} ${w.health}${w.routable ? '' : ' (out of routing)'}`),
);
if (unclean.length > 0) console.log(`${unclean.length} ended uncleanly:`, unclean.slice(0, 20));
await gateway.close({ now: true });
for (const w of workers) await w.close();
process.exitCode = inFlight === 0 && booked === 0 && unclean.length === 0 && out.length === 0 ? 0 : 1;
