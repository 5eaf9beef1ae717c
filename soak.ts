// One-off soak of the gateway under rolling faults and client aborts (not committed).
import { createGateway, type MockFault, startMockWorker } from './ts/index.js';
import { scrape } from './test/helpers/prometheus.js';
import { Rng } from './test/helpers/random.js';

const MINUTES = Number(process.argv[2] ?? 3);
const BACKEND = (process.argv[3] ?? 'native') as 'native' | 'js';
const SEED = Number(process.argv[4] ?? 1);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const workers = await Promise.all(
  Array.from({ length: 4 }, () =>
    startMockWorker({ port: 0, kvEvents: 'tcp://127.0.0.1:0', replay: 'tcp://127.0.0.1:0', blockSize: 16, speedup: 50 }),
  ),
);
const gateway = createGateway({
  blockSize: 16,
  backend: BACKEND,
  logLevel: false,
  upstream: { retries: 2, headersTimeoutMs: 1500, bodyTimeoutMs: 1500 },
  health: { intervalMs: 200, timeoutMs: 200, failureThreshold: 2 },
  workers: workers.map((w, i) => ({ id: i + 1, url: w.url, kvEvents: w.kvEventsEndpoints, replay: w.replayEndpoints })),
});
const { url } = await gateway.listen();
await sleep(300);
const rng = new Rng(SEED);
const outcomes = new Map<string, number>();
const note = (k: string) => outcomes.set(k, (outcomes.get(k) ?? 0) + 1);
const odd: string[] = [];
let stop = false;

async function one(i: number): Promise<void> {
  const prefix = rng.int(12);
  const shared = `${'shared system prompt '.repeat(8)}${prefix} `.repeat(4);
  const kind = rng.int(100);
  const stream = kind >= 40;
  const chat = kind >= 70 && kind < 85;
  const abortAfter = kind >= 85 ? rng.int(400) : undefined;
  const max = 4 + rng.int(40);
  const body = chat
    ? { model: 'mock-model', messages: [{ role: 'user', content: `${shared} q${i}` }], max_tokens: max, stream }
    : { model: 'mock-model', prompt: `${shared} q${i}`, max_tokens: max, stream };
  const ac = new AbortController();
  const timer = abortAfter !== undefined ? setTimeout(() => ac.abort(), abortAfter) : undefined;
  try {
    const r = await fetch(`${url}/v1/${chat ? 'chat/completions' : 'completions'}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: ac.signal,
    });
    const text = await r.text();
    if (r.status !== 200) {
      note(`status ${r.status}`);
      if (r.status < 500) odd.push(`${r.status} ${text.slice(0, 200)}`);
      return;
    }
    if (stream) {
      if (text.includes('"error"')) note('stream error event');
      else if (text.trimEnd().endsWith('data: [DONE]')) note('stream whole');
      else {
        note('stream cut unclean');
        odd.push(`unclean stream: ${text.slice(-200)}`);
      }
    } else note('whole');
  } catch (err) {
    if (ac.signal.aborted) note('client aborted');
    else {
      note('gateway conn failure');
      odd.push(`conn: ${(err as Error).message} ${(err as { cause?: Error }).cause?.message}`);
    }
  } finally {
    clearTimeout(timer);
  }
}

let n = 0;
const clients = Array.from({ length: 24 }, async () => {
  while (!stop) await one(n++);
});
const faults = (async () => {
  const kinds: MockFault[] = [{ kind: 'hang' }, { kind: 'slow', factor: 30 }, { kind: 'restart' }, { kind: 'drop-events', count: 3 }];
  while (!stop) {
    await sleep(2000 + rng.int(2000));
    if (stop) break;
    const w = workers[rng.int(4)];
    const f = kinds[rng.int(kinds.length)];
    w.fault(f);
    if (f.kind === 'hang' || f.kind === 'slow') {
      await sleep(1000 + rng.int(2500));
      w.fault({ kind: 'recover' });
    }
  }
})();
const started = Date.now();
const gc = (globalThis as { gc?: () => void }).gc;
while (Date.now() - started < MINUTES * 60_000) {
  await sleep(30_000);
  gc?.();
  const m = await scrape(`${url}/metrics`);
  console.log(
    `${Math.round((Date.now() - started) / 1000)}s heap ${(process.memoryUsage().heapUsed / 2 ** 20).toFixed(1)} MB rss ${(process.memoryUsage().rss / 2 ** 20).toFixed(0)} MB requests ${n} in-flight(router) ${m.sum('kvroute_router_in_flight_requests')}`,
    JSON.stringify(Object.fromEntries(outcomes)),
  );
}
stop = true;
await Promise.all([...clients, faults]);
for (const w of workers) w.fault({ kind: 'recover' });
await sleep(3000);
const m = await scrape(`${url}/metrics`);
console.log('after: router in-flight', m.sum('kvroute_router_in_flight_requests'), 'gateway in-flight', m.sum('kvroute_gateway_in_flight_requests'));
console.log('workers', JSON.stringify(gateway.workers().map((w) => [String(w.id), w.health, w.routable])));
console.log('load', JSON.stringify(gateway.router.stats().load, (_k, v) => (typeof v === 'bigint' ? String(v) : v)));
console.log('odd', odd.length, odd.slice(0, 20));
await gateway.close({ now: true });
for (const w of workers) await w.close();
