/**
 * The `discovery` option of the gateway (DNS discovery, discovery.ts): its shape and checks.
 * @internal
 * @module
 */

import { Resolver } from 'node:dns/promises';
import { describe, positiveNumber } from '../validate.js';
import { int, invalid, record } from './option-checks.js';
import { bootstrapPort, type WorkerRole, workerRole } from './worker-role.js';

/**
 * Workers found in DNS (see the README's "Changing the fleet"), one of two ways:
 * - `srv`: the SRV records a Kubernetes headless Service publishes for a named port, each
 *   naming a pod and its port (`kvEventsSrv` and `replaySrv` give the sockets, by pod);
 * - `host`: the address records of a headless Service's own name, one per ready pod, every pod
 *   serving on the same ports (`port`, `kvEventsPort`, `replayPort`). This is what a Service
 *   without port names publishes.
 * @group Gateway
 */
export interface DiscoveryOptions {
  /** The SRV name of the workers' HTTP API, e.g. `_http._tcp.vllm.default.svc.cluster.local`. Either this or `host`. */
  srv?: string;
  /** With `srv`: the SRV name of their KV-event PUB sockets (rank 0's), matched by target. Omitted: workers without KV events. */
  kvEventsSrv?: string;
  /** With `srv`: the SRV name of their replay sockets (rank 0's), matched by target. */
  replaySrv?: string;
  /**
   * A name whose address records (A, else AAAA) list the workers, e.g.
   * `vllm.default.svc.cluster.local` for a headless Service: each address is one worker. Either this or `srv`.
   */
  host?: string;
  /** With `host`: the port of every worker's HTTP API. Default 8000 (vLLM's). */
  port?: number;
  /** With `host`: the port of every worker's KV-event PUB socket (rank 0's; vLLM's default is 5557). Omitted: workers without KV events. */
  kvEventsPort?: number;
  /** With `host` and `kvEventsPort`: the port of every worker's replay socket (rank 0's). */
  replayPort?: number;
  /** How often the names are resolved again, ms. Default 10000. */
  intervalMs?: number;
  /** How long one resolution may take, ms. Default 2000. */
  timeoutMs?: number;
  /** DNS servers to ask, as addresses (`10.0.0.10`, `10.0.0.10:53`, `[::1]:53`). Default: the system's. */
  servers?: string[];
  /** Data-parallel ranks of every discovered worker. Default 1. */
  dpSize?: number;
  /** `maxNumBatchedTokens` of every discovered worker. */
  maxNumBatchedTokens?: number;
  /** Weight of every discovered worker. Default 1. */
  weight?: number;
  /** Role of every discovered worker (a Service per pool: one for prefill, one for decode). Default `'aggregated'`. */
  role?: WorkerRole;
  /** SGLang's bootstrap port of every discovered prefill worker (see {@link GatewayWorker.bootstrapPort}). Default 8998. */
  bootstrapPort?: number;
}

/** Where one discovery reads its workers: SRV records by pod, or one name's addresses on fixed ports. @internal */
export type DiscoverySource =
  | { kind: 'srv'; srv: string; kvEventsSrv?: string; replaySrv?: string }
  | { kind: 'host'; host: string; port: number; kvEventsPort?: number; replayPort?: number };

/** @internal */
export interface ResolvedDiscovery {
  /** The name asked (`srv` or `host`): the discovery's label in metrics and logs. */
  name: string;
  source: DiscoverySource;
  intervalMs: number;
  timeoutMs: number;
  servers?: string[];
  dpSize: number;
  maxNumBatchedTokens?: number;
  weight: number;
  role: WorkerRole;
  bootstrapPort: number | undefined;
}

const SRV_KEYS = ['srv', 'kvEventsSrv', 'replaySrv'];
const HOST_KEYS = ['host', 'port', 'kvEventsPort', 'replayPort'];
const KEYS = [
  ...SRV_KEYS,
  ...HOST_KEYS,
  'intervalMs',
  'timeoutMs',
  'servers',
  'dpSize',
  'maxNumBatchedTokens',
  'weight',
  'role',
  'bootstrapPort',
];

function name(value: unknown, at: string): string {
  if (typeof value !== 'string' || !/^[A-Za-z0-9_.-]{1,253}$/.test(value))
    throw invalid(`${at} must be a DNS name, got ${describe(value)}`);
  return value;
}

/** Checks `discovery`; the message names the key at fault. */
export function resolveDiscovery(value: unknown, at = 'discovery'): ResolvedDiscovery {
  const o = record(value, at, KEYS);
  const source = discoverySource(o, at);
  const servers = o.servers;
  if (
    servers !== undefined &&
    (!Array.isArray(servers) || servers.length === 0 || !servers.every((s) => typeof s === 'string' && s !== ''))
  )
    throw invalid(`${at}.servers must be a non-empty list of ip or ip:port, got ${describe(servers)}`);
  if (servers !== undefined) {
    // Node's resolver takes addresses only ("1.2.3.4", "1.2.3.4:53", "[::1]:53"), and says which is not one.
    try {
      new Resolver().setServers(servers as string[]);
    } catch (err) {
      throw invalid(`${at}.servers: ${(err as Error).message}`);
    }
  }
  const role = workerRole(o.role, `${at}.role`);
  return {
    name: source.kind === 'srv' ? source.srv : source.host,
    source,
    intervalMs: int(o.intervalMs, `${at}.intervalMs`, 100, 3_600_000, 10_000),
    timeoutMs: int(o.timeoutMs, `${at}.timeoutMs`, 1, 60_000, 2000),
    servers: servers as string[] | undefined,
    dpSize: int(o.dpSize, `${at}.dpSize`, 1, 1024, 1),
    maxNumBatchedTokens:
      o.maxNumBatchedTokens === undefined ? undefined : int(o.maxNumBatchedTokens, `${at}.maxNumBatchedTokens`, 1, 2 ** 31),
    weight: positiveNumber(o.weight, `${at}.weight`, 1),
    role,
    bootstrapPort: bootstrapPort(o.bootstrapPort, role, `${at}.bootstrapPort`),
  };
}

/** `srv` and its names, or `host` and its ports: exactly one, and no key of the other. */
function discoverySource(o: Record<string, unknown>, at: string): DiscoverySource {
  if ((o.srv === undefined) === (o.host === undefined))
    throw invalid(`${at} needs exactly one of srv (SRV records by pod) and host (a name's addresses, one per pod)`);
  const [mine, others] = o.srv !== undefined ? [SRV_KEYS, HOST_KEYS] : [HOST_KEYS, SRV_KEYS];
  const stray = others.find((k) => o[k] !== undefined);
  if (stray !== undefined) throw invalid(`${at}.${stray} goes with ${others[0]}, not ${mine[0]}`);
  if (o.srv !== undefined)
    return {
      kind: 'srv',
      srv: name(o.srv, `${at}.srv`),
      kvEventsSrv: o.kvEventsSrv === undefined ? undefined : name(o.kvEventsSrv, `${at}.kvEventsSrv`),
      replaySrv: o.replaySrv === undefined ? undefined : name(o.replaySrv, `${at}.replaySrv`),
    };
  const port = (k: string) => (o[k] === undefined ? undefined : int(o[k], `${at}.${k}`, 1, 65_535));
  if (o.replayPort !== undefined && o.kvEventsPort === undefined)
    throw invalid(`${at}.replayPort needs kvEventsPort (a replay socket serves the KV events it missed)`);
  return {
    kind: 'host',
    host: name(o.host, `${at}.host`),
    port: int(o.port, `${at}.port`, 1, 65_535, 8000),
    kvEventsPort: port('kvEventsPort'),
    replayPort: port('replayPort'),
  };
}
