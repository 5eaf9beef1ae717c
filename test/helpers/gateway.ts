/** A fleet of real mock workers (HTTP + ZeroMQ on 127.0.0.1) behind a real gateway, for the gateway suites. */

import { afterEach } from 'vitest';
import {
  type BackendName,
  createGateway,
  type Gateway,
  type GatewayOptions,
  type MockWorker,
  type MockWorkerOptions,
  startMockWorker,
} from '../../ts/index.js';
import { scrape } from './prometheus.js';
import { TcpProxy } from './tcp-proxy.js';
import { sleep, waitFor } from './wait.js';

export interface TestFleet {
  workers: MockWorker[];
  gateway: Gateway;
  url: string;
  adminUrl: string;
}

const open: (() => Promise<void>)[] = [];

/** Closes everything the test started, even when it failed. */
export function closeFleetsAfterEach(): void {
  afterEach(async () => {
    for (const close of open.splice(0).reverse()) await close().catch(() => undefined);
  });
}

export async function startWorker(opts: MockWorkerOptions = {}): Promise<MockWorker> {
  const w = await startMockWorker({
    port: 0,
    kvEvents: 'tcp://127.0.0.1:0',
    replay: 'tcp://127.0.0.1:0',
    blockSize: 16,
    speedup: 50,
    ...opts,
  });
  open.push(() => w.close());
  return w;
}

/**
 * A worker whose ranks publish on consecutive ports (rank r: port + r), as engines do, so that
 * a gateway can be given rank 0's endpoints alone. Port 0 would give each rank any free port, so
 * a random base is tried, and another if it is taken.
 */
export async function startWorkerOnConsecutivePorts(opts: MockWorkerOptions & { dpSize: number }): Promise<MockWorker> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 8; attempt++) {
    const base = 20000 + Math.floor(Math.random() * 30000);
    try {
      return await startWorker({ ...opts, kvEvents: `tcp://127.0.0.1:${base}`, replay: `tcp://127.0.0.1:${base + opts.dpSize}` });
    } catch (err) {
      lastError = err;
    }
  }
  throw lastError;
}

export function workerEntry(w: MockWorker, id: number): NonNullable<GatewayOptions['workers']>[number] {
  return { id, url: w.url, kvEvents: w.kvEventsEndpoints, replay: w.replayEndpoints, dpSize: w.kvEventsEndpoints.length };
}

/** `n` mock workers (ids 1..n) and a listening gateway over them, subscribed to their KV events. */
export async function startFleet(
  backend: BackendName,
  n: number,
  opts: Partial<GatewayOptions> = {},
  workerOpts: MockWorkerOptions = {},
): Promise<TestFleet> {
  const workers = await Promise.all(Array.from({ length: n }, () => startWorker(workerOpts)));
  const gateway = createGateway({
    blockSize: 16,
    backend,
    logLevel: false,
    health: { intervalMs: 200, timeoutMs: 200 },
    ...opts,
    workers: opts.workers ?? workers.map((w, i) => workerEntry(w, i + 1)),
  });
  open.push(() => gateway.close({ now: true }));
  const { url, adminUrl } = await gateway.listen();
  // The subscriptions reach the publishers (a first batch missed meanwhile is replayed anyway).
  await sleep(300);
  return { workers, gateway, url, adminUrl };
}

/** A TCP proxy in front of a worker's HTTP API that keeps what was sent to it (`wire.sent`); the caller cuts it. */
export async function wireTo(worker: MockWorker): Promise<TcpProxy> {
  const wire = new TcpProxy(Number(new URL(worker.url).port));
  await wire.open();
  return wire;
}

/** A worker's entry with its HTTP API reached through `wire` (its KV events direct). */
export function wiredEntry(w: MockWorker, id: number, wire: TcpProxy): NonNullable<GatewayOptions['workers']>[number] {
  return { ...workerEntry(w, id), url: `http://127.0.0.1:${wire.port}` };
}

/** A gateway over `workers` for the suites that read what it sent: no health probes (their requests would be on the wires too), no log. */
export function quietGateway(
  backend: BackendName,
  opts: Partial<GatewayOptions>,
  workers: NonNullable<GatewayOptions['workers']>,
): Gateway {
  return createGateway({ blockSize: 16, backend, logLevel: false, health: { intervalMs: 0 }, ...opts, workers });
}

/**
 * One gateway over one real worker whose HTTP API sits behind a TCP proxy that keeps what the
 * gateway sent (`wire.sent`); its KV events go direct. `close()` closes both.
 */
export async function gatewayBehindWire(backend: BackendName, opts: Partial<GatewayOptions> = {}) {
  const worker = await startWorker();
  const wire = await wireTo(worker);
  const gateway = quietGateway(backend, opts, [wiredEntry(worker, 1, wire)]);
  const { url } = await gateway.listen();
  return {
    url,
    wire,
    close: async () => {
      await gateway.close();
      await wire.cut();
    },
  };
}

/** Waits until no request is in flight in the gateway at `url` and none is booked in its router (a leak fails it). */
export async function nothingInFlight(url: string): Promise<void> {
  await waitFor(async () => {
    const m = await scrape(`${url}/metrics`);
    return m.sum('kvroute_gateway_in_flight_requests') === 0 && m.sum('kvroute_router_in_flight_requests') === 0;
  }, 'no request in flight');
}
