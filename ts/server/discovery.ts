/**
 * Workers found in DNS (`discovery` in the gateway's options). A Kubernetes headless Service
 * publishes an SRV record per ready pod for each named port (`_http._tcp.vllm.ns.svc.cluster.local`:
 * the pod's own name as target, and the port), so pods that come and go, with new addresses each
 * time, are followed without a config edit:
 * - the SRV records of `srv` give each worker's HTTP API; those of `kvEventsSrv` and `replaySrv`
 *   give its KV-event and replay sockets, matched by target name;
 * - each target is resolved to an address with the same resolver (the engine sources connect to
 *   addresses, and the DNS servers given here need not be the system's);
 * - a worker's id is a hash of its target name and HTTP port: a pod that restarts at a new
 *   address is a new worker (or, keeping its name as a StatefulSet's pods do, the same id at a
 *   new URL, which replaces it), whose engine's replay socket fills its index from empty;
 * - every `intervalMs` the answer is resolved again and the discovered workers set to it as
 *   `Gateway.setWorkers` would (a worker at the same addresses keeps its index and load). The
 *   workers of the config, the admin API and the indexer API are left alone.
 *
 * A failed resolution (a timeout, a server failure, a name that does not resolve) keeps the
 * workers as they are: a DNS fault must not empty the fleet. A worker leaves when a successful
 * answer no longer lists it. A target listed without its KV-event record (when `kvEventsSrv` is
 * given) or without an address waits for the next answer. All of it is counted.
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
import { setFleetWorkers } from './worker-set.js';

/** A discovered worker's id: its target and HTTP port, hashed to a u64. */
export function discoveredWorkerId(target: string, port: number): bigint {
  return createHash('sha256').update(`${target.toLowerCase()}:${port}`).digest().readBigUInt64BE(0);
}

/** Why a listed target was left out of an answer (the metric's `reason`). */
type Skipped = 'no_address' | 'no_kv_events';

/** Resolves the names now and again; `stop()` ends it. */
export class Discovery {
  private readonly resolver: Resolver;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private readonly resolutions: Counter<'result'>;
  private readonly skipped: Counter<'reason'>;
  private readonly found: Gauge;

  constructor(
    private readonly opts: ResolvedDiscovery,
    private readonly fleet: Fleet,
    private readonly log: FastifyBaseLogger,
    registry: Registry,
  ) {
    this.resolver = new Resolver({ timeout: opts.timeoutMs, tries: 1 });
    if (opts.servers) this.resolver.setServers(opts.servers);
    const registers = [registry];
    this.resolutions = new Counter({
      name: 'kvroute_gateway_discovery_resolutions_total',
      help: 'DNS discovery rounds: ok (the discovered workers set to the answer) or failed (kept as they were).',
      labelNames: ['result'],
      registers,
    });
    this.skipped = new Counter({
      name: 'kvroute_gateway_discovery_skipped_total',
      help: 'Listed targets left out of a round: no address, or no KV-event record.',
      labelNames: ['reason'],
      registers,
    });
    this.found = new Gauge({ name: 'kvroute_gateway_discovered_workers', help: 'Workers the last successful round found.', registers });
    for (const result of ['ok', 'failed']) this.resolutions.inc({ result }, 0);
    for (const reason of ['no_address', 'no_kv_events']) this.skipped.inc({ reason }, 0);
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
      this.resolutions.inc({ result: 'failed' });
      this.log.warn({ srv: this.opts.srv, err: (err as Error).message }, 'DNS discovery failed; the discovered workers are kept');
      return;
    }
    if (this.stopped || this.fleet.isClosed) return;
    try {
      const changes = setFleetWorkers(this.fleet, workers, 'discovery', 'discovery', (m) => m.origin === 'discovery');
      this.resolutions.inc({ result: 'ok' });
      this.found.set(workers.length);
      if (changes.added.length + changes.removed.length + changes.replaced.length + changes.updated.length > 0)
        this.log.info(
          { srv: this.opts.srv, ...Object.fromEntries(Object.entries(changes).map(([k, ids]) => [k, (ids as bigint[]).map(String)])) },
          'DNS discovery changed the workers',
        );
    } catch (err) {
      this.resolutions.inc({ result: 'failed' });
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
    const skip = (reason: Skipped) => this.skipped.inc({ reason });
    const seen = new Set<bigint>();
    for (const r of http) {
      const target = r.name.toLowerCase();
      // A record listed twice is one worker.
      const id = discoveredWorkerId(target, r.port);
      if (seen.has(id)) continue;
      seen.add(id);
      const host = addresses.get(target);
      if (host === undefined) {
        skip('no_address');
        continue;
      }
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
