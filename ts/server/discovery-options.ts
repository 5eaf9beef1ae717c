/**
 * The `discovery` option of the gateway (DNS SRV discovery, discovery.ts): its shape and checks.
 * @internal
 * @module
 */

import { Resolver } from 'node:dns/promises';
import { describe, positiveNumber } from '../validate.js';
import { int, invalid, record } from './option-checks.js';

/**
 * Workers found in DNS SRV records (see the README's "Changing the fleet").
 * @group Gateway
 */
export interface DiscoveryOptions {
  /** The SRV name of the workers' HTTP API, e.g. `_http._tcp.vllm.default.svc.cluster.local`. */
  srv: string;
  /** The SRV name of their KV-event PUB sockets (rank 0's), matched by target. Omitted: workers without KV events. */
  kvEventsSrv?: string;
  /** The SRV name of their replay sockets (rank 0's), matched by target. */
  replaySrv?: string;
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
}

/** @internal */
export type ResolvedDiscovery = Required<Omit<DiscoveryOptions, 'kvEventsSrv' | 'replaySrv' | 'servers' | 'maxNumBatchedTokens'>> &
  Pick<DiscoveryOptions, 'kvEventsSrv' | 'replaySrv' | 'servers' | 'maxNumBatchedTokens'>;

const KEYS = ['srv', 'kvEventsSrv', 'replaySrv', 'intervalMs', 'timeoutMs', 'servers', 'dpSize', 'maxNumBatchedTokens', 'weight'];

function name(value: unknown, at: string): string {
  if (typeof value !== 'string' || !/^[A-Za-z0-9_.-]{1,253}$/.test(value))
    throw invalid(`${at} must be a DNS name, got ${describe(value)}`);
  return value;
}

/** Checks `discovery`; the message names the key at fault. */
export function resolveDiscovery(value: unknown, at = 'discovery'): ResolvedDiscovery {
  const o = record(value, at, KEYS);
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
  return {
    srv: name(o.srv, `${at}.srv`),
    kvEventsSrv: o.kvEventsSrv === undefined ? undefined : name(o.kvEventsSrv, `${at}.kvEventsSrv`),
    replaySrv: o.replaySrv === undefined ? undefined : name(o.replaySrv, `${at}.replaySrv`),
    intervalMs: int(o.intervalMs, `${at}.intervalMs`, 100, 3_600_000, 10_000),
    timeoutMs: int(o.timeoutMs, `${at}.timeoutMs`, 1, 60_000, 2000),
    servers: servers as string[] | undefined,
    dpSize: int(o.dpSize, `${at}.dpSize`, 1, 1024, 1),
    maxNumBatchedTokens:
      o.maxNumBatchedTokens === undefined ? undefined : int(o.maxNumBatchedTokens, `${at}.maxNumBatchedTokens`, 1, 2 ** 31),
    weight: positiveNumber(o.weight, `${at}.weight`, 1),
  };
}
