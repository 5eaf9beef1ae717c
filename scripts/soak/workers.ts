/**
 * The soak's mock workers, each behind TCP proxies (its HTTP API, its KV-event publisher, its
 * replay socket) so that a network partition can cut it off from every gateway at once while it
 * runs on; a crashed worker's successor takes the same ports, as a restarted pod behind the same
 * Service would.
 */

import { TcpProxy } from '../../test/helpers/tcp-proxy.js';
import { type GatewayWorker, type MockWorker, type MockWorkerOptions, startMockWorker, type WorkerRole } from '../../ts/index.js';

export type SoakMode = 'aggregated' | 'vllm' | 'sglang';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const portOf = (endpoint: string): number => Number(new URL(endpoint.replace(/^tcp:/, 'http:')).port);

/** One worker and the proxies in front of its HTTP port, KV-event publisher and replay socket. */
interface Slot {
  role: WorkerRole;
  worker: MockWorker;
  http: TcpProxy;
  events: TcpProxy;
  replay: TcpProxy;
}

export class SoakWorkers {
  private readonly slots: Slot[] = [];

  /** `extra`: every worker's further options (`--secure`'s TLS and API key). */
  private constructor(
    private readonly mode: SoakMode,
    private readonly extra: Partial<MockWorkerOptions>,
  ) {}

  /** Four workers: aggregated ones, or two prefill and two decode. */
  static async start(mode: SoakMode, extra: Partial<MockWorkerOptions> = {}): Promise<SoakWorkers> {
    const set = new SoakWorkers(mode, extra);
    const roles: WorkerRole[] =
      mode === 'aggregated' ? ['aggregated', 'aggregated', 'aggregated', 'aggregated'] : ['prefill', 'prefill', 'decode', 'decode'];
    for (const role of roles) {
      const worker = await set.startWorker(role);
      // They keep nothing of what passes: a soak sends hundreds of megabytes.
      const proxies = [worker.url, worker.kvEventsEndpoints[0], worker.replayEndpoints[0]].map((at) => new TcpProxy(portOf(at), false));
      for (const p of proxies) await p.open();
      const [http, events, replay] = proxies;
      set.slots.push({ role, worker, http, events, replay });
    }
    return set;
  }

  get count(): number {
    return this.slots.length;
  }

  /** The gateway's view of the workers: through their proxies. */
  gatewayWorkers(): GatewayWorker[] {
    return this.slots.map((s, i) => ({
      id: i + 1,
      url: `${new URL(s.worker.url).protocol}//127.0.0.1:${s.http.port}`,
      kvEvents: `tcp://127.0.0.1:${s.events.port}`,
      replay: `tcp://127.0.0.1:${s.replay.port}`,
      role: s.role,
      ...(this.mode === 'sglang' && s.role === 'prefill' ? { bootstrapPort: s.worker.bootstrapPort } : {}),
    }));
  }

  worker(i: number): MockWorker {
    return this.slots[i].worker;
  }

  /** Crashes worker `i` and starts its successor on its ports `downMs` later (retrying while they are still held). */
  async crash(i: number, downMs: number): Promise<void> {
    const slot = this.slots[i];
    slot.worker.fault({ kind: 'crash' });
    await sleep(downMs);
    for (let attempt = 0; ; attempt++) {
      try {
        slot.worker = await this.startWorker(slot.role, slot.worker);
        return;
      } catch (err) {
        if (attempt >= 20) throw err;
        await sleep(250);
      }
    }
  }

  /** Cuts worker `i` off from every gateway for `ms` (nothing forwarded, nothing closed), then resets what hung. */
  async partition(i: number, ms: number): Promise<void> {
    const { http, events, replay } = this.slots[i];
    for (const p of [http, events, replay]) p.stall();
    await sleep(ms);
    for (const p of [http, events, replay]) p.heal();
  }

  async close(): Promise<void> {
    for (const s of this.slots) {
      for (const p of [s.http, s.events, s.replay]) await p.cut();
      await s.worker.close();
    }
  }

  /** A mock worker of `role`; `at`: the worker it replaces after a crash, whose ports it takes again. */
  private startWorker(role: WorkerRole, at?: MockWorker): Promise<MockWorker> {
    return startMockWorker({
      port: at ? portOf(at.url) : 0,
      kvEvents: at?.kvEventsEndpoints[0] ?? 'tcp://127.0.0.1:0',
      replay: at?.replayEndpoints[0] ?? 'tcp://127.0.0.1:0',
      blockSize: 16,
      speedup: 50,
      ...this.extra,
      ...(this.mode === 'sglang'
        ? { disaggregationMode: role === 'aggregated' ? null : role, bootstrapPort: at?.bootstrapPort ?? 0, bootstrapTimeoutMs: 1500 }
        : {}),
    });
  }
}
