/**
 * Workers found in DNS (`discovery` in the gateway's options). A Kubernetes headless Service
 * publishes an SRV record per ready pod for each named port (`_http._tcp.vllm.ns.svc.cluster.local`:
 * the pod's own name as target, and the port), so pods that come and go, with new addresses each
 * time, are followed without a config edit:
 * - the SRV records of `srv` give each worker's HTTP API; those of `kvEventsSrv` and `replaySrv`
 *   give its KV-event and replay sockets, matched by target name;
 * - each target is resolved to an address with the same resolver (the engine sources connect to
 *   addresses, and the DNS servers given here need not be the system's);
 * - or, for a Service without port names, the address records of its own name (`host`) list
 *   the pods, all serving on the same `port`, `kvEventsPort` and `replayPort`
 *   (discovery-answers.ts reads both forms);
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

import { Resolver } from 'node:dns/promises';
import type { FastifyBaseLogger } from 'fastify';
import { Counter, Gauge, type Registry } from 'prom-client';
import { answerWorkers } from './discovery-answers.js';
import type { ResolvedDiscovery } from './discovery-options.js';
import type { Fleet } from './fleet.js';
import type { GatewayWorker } from './options.js';
import { setFleetWorkers, type WorkerSetChanges } from './worker-set.js';

/** The discovery metrics, by the name asked (`srv` or `host`; one gateway may discover from several Services). */
export class DiscoveryMetrics {
  readonly resolutions: Counter<'srv' | 'result'>;
  readonly skipped: Counter<'srv' | 'reason'>;
  readonly found: Gauge<'srv'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.resolutions = new Counter({
      name: 'kvroute_gateway_discovery_resolutions_total',
      help: 'DNS discovery rounds, by the name asked (SRV name or host): ok (its discovered workers set to the answer) or failed (kept as they were).',
      labelNames: ['srv', 'result'],
      registers,
    });
    this.skipped = new Counter({
      name: 'kvroute_gateway_discovery_skipped_total',
      help: 'Listed targets left out of a round, by the name asked (SRV name or host): no address, no KV-event record, or claimed (another Service or way in holds that worker).',
      labelNames: ['srv', 'reason'],
      registers,
    });
    this.found = new Gauge({
      name: 'kvroute_gateway_discovered_workers',
      help: 'Workers the last successful round found, by the name asked (SRV name or host).',
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
    const srv = opts.name;
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
      workers = await answerWorkers(this.resolver, this.opts, (reason) => this.metrics.skipped.inc({ srv: this.opts.name, reason }));
    } catch (err) {
      if (this.stopped) return;
      this.metrics.resolutions.inc({ srv: this.opts.name, result: 'failed' });
      this.log.warn({ srv: this.opts.name, err: (err as Error).message }, 'DNS discovery failed; the discovered workers are kept');
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
        if (claimed) this.metrics.skipped.inc({ srv: this.opts.name, reason: 'claimed' });
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
      this.metrics.resolutions.inc({ srv: this.opts.name, result: 'ok' });
      this.metrics.found.set({ srv: this.opts.name }, workers.length);
      if (changes.added.length + changes.removed.length + changes.replaced.length + changes.updated.length > 0)
        this.log.info(
          { srv: this.opts.name, ...Object.fromEntries(Object.entries(changes).map(([k, ids]) => [k, (ids as bigint[]).map(String)])) },
          'DNS discovery changed the workers',
        );
    } catch (err) {
      this.metrics.resolutions.inc({ srv: this.opts.name, result: 'failed' });
      this.log.error({ srv: this.opts.name, err: (err as Error).message }, 'DNS discovery found workers the gateway cannot take');
    }
  }
}
