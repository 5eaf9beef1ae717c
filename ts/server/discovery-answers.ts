/**
 * One DNS answer turned into workers, for each way `discovery` reads them: SRV records by pod
 * (`srv`), or the addresses of one name on fixed ports (`host`). Both give a worker the id of its
 * HTTP API's address and port, so a pod found both ways, or by two Services, is one worker.
 * @internal
 * @module
 */

import { createHash } from 'node:crypto';
import type { Resolver } from 'node:dns/promises';
import type { DiscoverySource, ResolvedDiscovery } from './discovery-options.js';
import type { GatewayWorker } from './options.js';

/** Why a listed target was left out of an answer (the metric's `reason`). */
export type Skipped = 'no_address' | 'no_kv_events' | 'claimed';

/** A discovered worker's id: the address and port of its HTTP API (the engine itself), hashed to a u64. */
export function discoveredWorkerId(address: string, port: number): bigint {
  return createHash('sha256').update(`${address}:${port}`).digest().readBigUInt64BE(0);
}

/** The workers of one answer; throws when a name does not resolve (the round then keeps the workers it had). */
export function answerWorkers(resolver: Resolver, o: ResolvedDiscovery, skip: (reason: Skipped) => void): Promise<GatewayWorker[]> {
  return o.source.kind === 'srv' ? srvWorkers(resolver, o.source, o, skip) : hostWorkers(resolver, o.source, o);
}

/** What every worker of one discovery shares. */
function worker(o: ResolvedDiscovery, host: string, port: number, kvPort?: number, replayPort?: number): GatewayWorker {
  return {
    id: discoveredWorkerId(host, port),
    url: `http://${host}:${port}`,
    ...(kvPort === undefined ? {} : { kvEvents: `tcp://${host}:${kvPort}` }),
    ...(kvPort === undefined || replayPort === undefined ? {} : { replay: `tcp://${host}:${replayPort}` }),
    dpSize: o.dpSize,
    weight: o.weight,
    role: o.role,
    ...(o.bootstrapPort === undefined ? {} : { bootstrapPort: o.bootstrapPort }),
    ...(o.maxNumBatchedTokens === undefined ? {} : { maxNumBatchedTokens: o.maxNumBatchedTokens }),
  };
}

/**
 * `host`: every address of the name is a pod. IPv4 records when there are any, else IPv6 (a
 * dual-stack pod, listed in both, is one engine). A name with neither throws, as an unknown one does.
 */
async function hostWorkers(
  resolver: Resolver,
  s: Extract<DiscoverySource, { kind: 'host' }>,
  o: ResolvedDiscovery,
): Promise<GatewayWorker[]> {
  let hosts = await resolver.resolve4(s.host).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENODATA') return [] as string[];
    throw err;
  });
  if (hosts.length === 0) hosts = (await resolver.resolve6(s.host)).map((a) => `[${a}]`);
  return [...new Set(hosts)].map((h) => worker(o, h, s.port, s.kvEventsPort, s.replayPort));
}

/** `srv`: each record's target is a pod, its sockets matched by target in the other SRV names. */
async function srvWorkers(
  resolver: Resolver,
  s: Extract<DiscoverySource, { kind: 'srv' }>,
  o: ResolvedDiscovery,
  skip: (reason: Skipped) => void,
): Promise<GatewayWorker[]> {
  const [http, kv, replay] = await Promise.all([
    resolver.resolveSrv(s.srv),
    s.kvEventsSrv === undefined ? undefined : resolver.resolveSrv(s.kvEventsSrv),
    s.replaySrv === undefined ? undefined : resolver.resolveSrv(s.replaySrv),
  ]);
  const portOf = (records: typeof http | undefined) => new Map((records ?? []).map((r) => [r.name.toLowerCase(), r.port]));
  const kvPorts = portOf(kv);
  const replayPorts = portOf(replay);
  const addresses = new Map<string, string | undefined>();
  await Promise.all(
    [...new Set(http.map((r) => r.name.toLowerCase()))].map(async (target) => {
      addresses.set(target, await address(resolver, target));
    }),
  );
  const workers: GatewayWorker[] = [];
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
    if (s.kvEventsSrv !== undefined && kvPort === undefined) {
      skip('no_kv_events');
      continue;
    }
    workers.push(worker(o, host, r.port, kvPort, replayPorts.get(target)));
  }
  return workers;
}

/** A target's address (IPv4 first, as URLs and endpoints take it; IPv6 in brackets), or undefined. */
async function address(resolver: Resolver, target: string): Promise<string | undefined> {
  const v4 = await resolver.resolve4(target).catch(() => [] as string[]);
  if (v4.length > 0) return v4[0];
  const v6 = await resolver.resolve6(target).catch(() => [] as string[]);
  return v6.length > 0 ? `[${v6[0]}]` : undefined;
}
