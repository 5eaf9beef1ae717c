/**
 * What the soak asks of its gateways, whether they run in its own process (`replicas.ts`) or as
 * `kvroute serve` processes (`serve-replicas.ts`): faults to inject, and each one's state read
 * over HTTP as an operator would read it (`/metrics`, `/admin/workers`), so that both kinds are
 * checked by the same words.
 */

import { createHash } from 'node:crypto';
import { parse } from 'lossless-json';
import { scrape } from '../../test/helpers/prometheus.js';
import type { GatewayWorker } from '../../ts/index.js';

/** The replicas' sync timing: short, so that a soak of minutes sees many leases run out and states repair. */
export const SYNC = { heartbeatMs: 250, leaseMs: 1500, resyncMs: 5000 };

export interface SoakReplica {
  /** Its replica id (a restarted replica gets a new one, as a new pod would). */
  id: string;
  /** Its proxy, which serves `/metrics` and the admin API too. */
  url: string;
}

export interface SoakReplicaSet {
  /** The replicas clients may send to, by slot. */
  readonly live: SoakReplica[];
  /** More than one replica, sharing their load over NATS. */
  readonly shared: boolean;
  /** What went wrong outside the requests: a replica that did not stop cleanly or in time, a config reload refused. */
  readonly problems: string[];
  /** Each warm start: from a live peer's `/dump` or the latest snapshot, and the index blocks as the replica began to listen. */
  readonly warmStarts: { from: 'peer' | 'snapshot'; blocks: number }[];
  start(): Promise<void>;
  /** A live replica, at random. */
  pick(random: (n: number) => number): SoakReplica;
  /** Stalls replica `slot`'s link to NATS for `ms`, then resets it (the client reconnects). */
  partition(slot: number, ms: number): Promise<void>;
  /**
   * Replaces replica `slot` with a new one under a new id, warm-started from a live peer's
   * `/dump` or the latest index snapshot: `crash` without a goodbye, otherwise a clean stop.
   */
  restart(slot: number, crash: boolean): Promise<void>;
  /** Stops NATS for `ms`, then starts it again on its port. */
  natsOutage(ms: number): Promise<void>;
  /** Sets a replica's workers as a config reload does; says how. Nothing when the replica has gone meanwhile. */
  setWorkers(replica: SoakReplica, workers: GatewayWorker[]): Promise<string>;
  /** Each replica's memory, in words (the soak prints it every 30 s). */
  memory(): Promise<string>;
  close(): Promise<void>;
}

/** A replica's state as its metrics and admin API tell it. */
export interface ReplicaState {
  /** Requests in flight in the gateway. */
  inFlight: number;
  /** Its router's own bookings. */
  booked: number;
  /** Its peers' bookings counted in its load. */
  remote: number;
  /** Sessions bound. */
  sessions: number;
  /** Requests sent to their session's worker, so far. */
  sessionHits: number;
  /** Peers heard within the lease. */
  peers: number;
  /** Blocks in its index. */
  blocks: number;
  /** Times one of its event streams was cleared and resynced (a gap past the engine's replay buffer). */
  resyncs: number;
  /** What its caches of tokenized prompts hold. */
  tokenizeCacheBytes: number;
  /** Its workers as its admin API lists them. */
  workers: { id: string; health: string; routable: boolean }[];
  /** What the faults made it repair, in words. */
  repairs: string;
}

export async function replicaState(url: string): Promise<ReplicaState> {
  const m = await scrape(`${url}/metrics`);
  const listed = (await (await fetch(`${url}/admin/workers`)).json()) as { id: string | number; health: string; routable: boolean }[];
  return {
    inFlight: m.sum('kvroute_gateway_in_flight_requests'),
    booked: m.sum('kvroute_router_in_flight_requests'),
    remote: m.sum('kvroute_replica_remote_in_flight_requests'),
    sessions: m.sum('kvroute_router_session_bindings'),
    sessionHits: m.sum('kvroute_router_session_hits_total'),
    peers: m.sum('kvroute_replica_peers'),
    blocks: m.sum('kvroute_index_blocks'),
    resyncs: m.sum('kvroute_event_source_resyncs_total'),
    tokenizeCacheBytes: m.sum('kvroute_gateway_tokenize_cache_bytes'),
    workers: listed.map((w) => ({ id: String(w.id), health: w.health, routable: w.routable })),
    repairs: [
      `${m.sum('kvroute_event_source_gaps_total')} event gaps, ${m.sum('kvroute_event_source_replays_total')} replays`,
      `${m.sum('kvroute_event_source_resyncs_total')} resyncs`,
      `${m.sum('kvroute_replica_lease_expiries_total')} peers' leases ran out`,
      `${m.sum('kvroute_replica_states_applied_total')} peer states applied`,
      `${m.sum('kvroute_replica_repaired_total')} bookings repaired`,
      // `kvroute serve`'s reloads (in-process gateways have their workers set directly).
      ...(m.has('kvroute_gateway_config_reloads_total')
        ? [`${m.sum('kvroute_gateway_config_reloads_total', { result: 'applied' })} config reloads`]
        : []),
    ].join(', '),
  };
}

/** The blocks in the index of the replica at `url`. */
export async function indexBlocks(url: string): Promise<number> {
  return (await scrape(`${url}/metrics`)).sum('kvroute_index_blocks');
}

interface DumpEntry {
  events: {
    worker_id: unknown;
    storage_tier: string;
    event: { dp_rank: unknown; data: { stored: { blocks: { block_hash: unknown }[] } } };
  }[];
}

/**
 * What the index of the replica at `url` holds, as a count and a digest of its `/dump`: every block by
 * worker, rank, tier and the engine's name for it (u64s read exactly), in sorted order, so that
 * two indexes holding the same blocks give the same digest however their trees were built.
 */
export async function indexDigest(url: string): Promise<string> {
  const document = parse(await (await fetch(`${url}/dump`)).text()) as Record<string, DumpEntry>;
  const blocks: string[] = [];
  for (const entry of Object.values(document)) {
    for (const e of entry.events) {
      const rank = `${e.worker_id}/${e.event.dp_rank}/${e.storage_tier}`;
      for (const b of e.event.data.stored.blocks) blocks.push(`${rank}/${b.block_hash}`);
    }
  }
  return `${blocks.length} blocks, ${createHash('sha256').update(blocks.sort().join('\n')).digest('hex').slice(0, 16)}`;
}
