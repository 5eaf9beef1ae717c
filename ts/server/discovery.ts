/**
 * Workers found in DNS (`discovery` in the gateway's options). A Kubernetes headless Service
 * publishes an SRV record per ready pod for each named port (`_http._tcp.vllm.ns.svc.cluster.local`:
 * the pod's own name as target, and the port), so pods that come and go, with new addresses each
 * time, are followed without a config edit:
 * - the SRV records of `srv` give each worker's HTTP API; those of `kvEventsSrv` and `replaySrv`
 *   give its KV-event and replay sockets, matched by target name;
 * - each target is resolved to an address with the same resolver (the engine sources connect to
 *   addresses, and the DNS servers given here need not be the system's);
 * - a worker's id is a hash of its HTTP API's address and port, the engine's own identity: a pod
 *   that restarts at a new address is a new worker, whose replay socket fills its index from
 *   empty, and a pod that two Services list is one worker, which the first to find it owns;
 * - every `intervalMs` the answer is resolved again and the discovered workers set to it as
 *   `Gateway.setWorkers` would (a worker at the same addresses keeps its index and load). The
 *   workers of the config, the admin API and the indexer API are left alone.
 *
 * A failed resolution (a timeout, a server failure, a name that does not resolve) keeps the
 * workers as they are: a DNS fault must not empty the fleet. A worker leaves when a successful
 * answer no longer lists it. A target listed without its KV-event record (when `kvEventsSrv` is
 * given) or without an address waits for the next answer; one that another Service's discovery
 * (or the config) holds already stays theirs. All of it is counted.
 * @internal
 * @module
 */

import { createHash } from 'node:crypto';
import { Resolver } from 'node:dns/promises';
import type { FastifyBaseLogger } from 'fastify';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ResolvedDiscovery } from './discovery-options.js';
import type { Fleet } from './fleet.js';
import type { GatewayWorker } from './options.js';
import { setFleetWorkers, type WorkerSetChanges } from './worker-set.js';

/** A discovered worker's id: the address and port of its HTTP API (the engine itself), hashed to a u64. */
export function discoveredWorkerId(address: string, port: number): bigint {
  return createHash('sha256').update(`${address}:${port}`).digest().readBigUInt64BE(0);
}

/** Why a listed target was left out of an answer (the metric's `reason`). */
type Skipped = 'no_address' | 'no_kv_events' | 'claimed';

/** The discovery metrics, by `srv` (one gateway may discover from several Services). */
export class DiscoveryMetrics {
  readonly resolutions: Counter<'srv' | 'result'>;
  readonly skipped: Counter<'srv' | 'reason'>;
  readonly found: Gauge<'srv'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.resolutions = new Counter({
      name: 'kvroute_gateway_discovery_resolutions_total',
      help: 'DNS discovery rounds, by SRV name: ok (its discovered workers set to the answer) or failed (kept as they were).',
      labelNames: ['srv', 'result'],
      registers,
    });
    this.skipped = new Counter({
      name: 'kvroute_gateway_discovery_skipped_total',
      help: 'Listed targets left out of a round, by SRV name: no address, no KV-event record, or claimed (another Service or way in holds that worker).',
      labelNames: ['srv', 'reason'],
      registers,
    });
    this.found = new Gauge({
      name: 'kvroute_gateway_discovered_workers',
      help: 'Workers the last successful round found, by SRV name.',
      labelNames: ['srv'],
      registers,
    });
  }
}

/** Resolves one Service's names now and again; `stop()` ends it. */
export class Discovery {
  private readonly resolver: Resolver;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  /** The workers this Service's answers added (another Service's are not this one's to remove). */
  private mine = new Set<bigint>();

  constructor(
    private readonly opts: ResolvedDiscovery,
    private readonly fleet: Fleet,
    private readonly log: FastifyBaseLogger,
    private readonly metrics: DiscoveryMetrics,
  ) {
    this.resolver = new Resolver({ timeout: opts.timeoutMs, tries: 1 });
    if (opts.servers) this.resolver.setServers(opts.servers);
    const srv = opts.srv;
    for (const result of ['ok', 'failed']) metrics.resolutions.inc({ srv, result }, 0);
    for (const reason of ['no_address', 'no_kv_events', 'claimed']) metrics.skipped.inc({ srv, reason }, 0);
  }

  /** Resolves now, then every `intervalMs`. */
  start(): void {
    if (this.timer || this.stopped) return;
    void this.round();
    this.timer = setInterval(() => void this.round(), this.opts.intervalMs);
    this.timer.unref();
  }

  /** One round now (a round under way is not doubled); resolves when it ends. */
  round(): Promise<void> {
    this.running ??= this.resolveAndSet().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.resolver.cancel();
    await this.running;
  }

  private async resolveAndSet(): Promise<void> {
    let workers: GatewayWorker[];
    try {
      workers = await this.resolve();
    } catch (err) {
      if (this.stopped) return;
      this.metrics.resolutions.inc({ srv: this.opts.srv, result: 'failed' });
      this.log.warn({ srv: this.opts.srv, err: (err as Error).message }, 'DNS discovery failed; the discovered workers are kept');
      return;
    }
    if (this.stopped || this.fleet.isClosed) return;
    try {
      const mine = this.mine;
      const before = new Set(this.fleet.list().map((m) => m.spec.id));
      // A pod another Service (or another way in) holds already stays theirs: left out, counted.
      workers = workers.filter((w) => {
        const held = this.fleet.get(w.id as bigint);
        const claimed = held !== undefined && !(held.origin === 'discovery' && mine.has(held.spec.id));
        if (claimed) this.metrics.skipped.inc({ srv: this.opts.srv, reason: 'claimed' });
        return !claimed;
      });
      let changes: WorkerSetChanges;
      try {
        changes = setFleetWorkers(this.fleet, workers, 'discovery', 'discovery', (m) => m.origin === 'discovery' && mine.has(m.spec.id));
      } finally {
        // Ours now: what we held or added and is still in the fleet (also after a failure part way).
        const candidates = new Set([...mine, ...workers.map((w) => w.id as bigint)]);
        this.mine = new Set(
          [...candidates].filter((id) => this.fleet.get(id)?.origin === 'discovery' && (mine.has(id) || !before.has(id))),
        );
      }
      this.metrics.resolutions.inc({ srv: this.opts.srv, result: 'ok' });
      this.metrics.found.set({ srv: this.opts.srv }, workers.length);
      if (changes.added.length + changes.removed.length + changes.replaced.length + changes.updated.length > 0)
        this.log.info(
          { srv: this.opts.srv, ...Object.fromEntries(Object.entries(changes).map(([k, ids]) => [k, (ids as bigint[]).map(String)])) },
          'DNS discovery changed the workers',
        );
    } catch (err) {
      this.metrics.resolutions.inc({ srv: this.opts.srv, result: 'failed' });
      this.log.error({ srv: this.opts.srv, err: (err as Error).message }, 'DNS discovery found workers the gateway cannot take');
    }
  }

  /** The workers of one answer; throws when a name does not resolve. */
  private async resolve(): Promise<GatewayWorker[]> {
    const o = this.opts;
    const [http, kv, replay] = await Promise.all([
      this.resolver.resolveSrv(o.srv),
      o.kvEventsSrv === undefined ? undefined : this.resolver.resolveSrv(o.kvEventsSrv),
      o.replaySrv === undefined ? undefined : this.resolver.resolveSrv(o.replaySrv),
    ]);
    const portOf = (records: typeof http | undefined) => new Map((records ?? []).map((r) => [r.name.toLowerCase(), r.port]));
    const kvPorts = portOf(kv);
    const replayPorts = portOf(replay);
    const addresses = new Map<string, string | undefined>();
    await Promise.all(
      [...new Set(http.map((r) => r.name.toLowerCase()))].map(async (target) => {
        addresses.set(target, await this.address(target));
      }),
    );
    const workers: GatewayWorker[] = [];
    const skip = (reason: Skipped) => this.metrics.skipped.inc({ srv: o.srv, reason });
    const seen = new Set<bigint>();
    for (const r of http) {
      const target = r.name.toLowerCase();
      const host = addresses.get(target);
      if (host === undefined) {
        skip('no_address');
        continue;
      }
      // An engine listed twice (one record twice, or under two names) is one worker.
      const id = discoveredWorkerId(host, r.port);
      if (seen.has(id)) continue;
      seen.add(id);
      const kvPort = kvPorts.get(target);
      if (o.kvEventsSrv !== undefined && kvPort === undefined) {
        skip('no_kv_events');
        continue;
      }
      const replayPort = replayPorts.get(target);
      workers.push({
        id,
        url: `http://${host}:${r.port}`,
        ...(kvPort === undefined ? {} : { kvEvents: `tcp://${host}:${kvPort}` }),
        ...(kvPort === undefined || replayPort === undefined ? {} : { replay: `tcp://${host}:${replayPort}` }),
        dpSize: o.dpSize,
        weight: o.weight,
        ...(o.maxNumBatchedTokens === undefined ? {} : { maxNumBatchedTokens: o.maxNumBatchedTokens }),
      });
    }
    return workers;
  }

  /** A target's address (IPv4 first, as URLs and endpoints take it; IPv6 in brackets), or undefined. */
  private async address(target: string): Promise<string | undefined> {
    const v4 = await this.resolver.resolve4(target).catch(() => [] as string[]);
    if (v4.length > 0) return v4[0];
    const v6 = await this.resolver.resolve6(target).catch(() => [] as string[]);
    return v6.length > 0 ? `[${v6[0]}]` : undefined;
  }
}
