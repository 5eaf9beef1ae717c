/**
 * `metrics(router, registry?)`: the router's, the index's and the event sources' state as
 * Prometheus metrics on a `prom-client` registry, read from `stats()` at scrape time (one
 * snapshot per scrape, shared by every metric). Names follow Prometheus conventions: `_total`
 * counters, base units (seconds, bytes), `worker` and `dp_rank` labels.
 * @module
 */

import { Counter, Gauge, Registry } from 'prom-client';
import { KvRouteError } from '../errors.js';
import type { IndexStats } from '../kv-index.js';
import { KvRouter } from '../router/kv-router.js';
import type { RankLoad, RouterStats } from '../router/types.js';

interface Snapshot {
  router: RouterStats;
  sources: {
    worker: string;
    dpRank: number;
    state: string;
    gaps: number;
    replays: number;
    restarts: number;
    resyncs: number;
    batches: number;
    decodeErrors: number;
    lagSeconds: number | null;
  }[];
}

const STATES = ['connecting', 'active', 'recovering', 'resyncing', 'failed'];

/**
 * Metrics of one router, registered on `registry` (a new one when omitted), which is returned.
 * @group Gateway
 * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument when `router` is not a KvRouter or `registry` not a prom-client Registry (this package's copy).
 */
export function metrics(router: KvRouter, registry: Registry = new Registry()): Registry {
  if (!(router instanceof KvRouter)) throw new KvRouteError('ERR_INVALID_ARG', 'metrics(router) needs a KvRouter');
  if (!(registry instanceof Registry))
    throw new KvRouteError('ERR_INVALID_ARG', "registry must be a prom-client Registry (this package's copy)");
  // One snapshot per scrape. A scrape collects the metrics in registration order, so the first
  // metric takes a fresh snapshot and the others reuse it; it is also dropped at the next
  // macrotask, for a metric read on its own.
  let cached: Snapshot | undefined;
  const snap = (fresh = false): Snapshot => {
    if (cached && !fresh) return cached;
    const sources: Snapshot['sources'] = [];
    try {
      for (const s of router.index.engineSources()) {
        for (const r of s.stats().ranks) {
          sources.push({
            worker: String(s.workerId),
            dpRank: r.dpRank,
            state: r.state,
            gaps: r.gaps,
            replays: r.replayRequests,
            restarts: r.restarts,
            resyncs: r.resyncs,
            batches: r.batches,
            decodeErrors: r.decodeErrors,
            lagSeconds: r.lagMs === null ? null : r.lagMs / 1000,
          });
        }
      }
    } catch {
      // A closed router has no sources.
    }
    cached = { router: router.stats(), sources };
    setImmediate(() => {
      cached = undefined;
    });
    return cached;
  };
  const registers = [registry];
  const gauge = (name: string, help: string, labelNames: string[], fill: (g: Gauge, s: Snapshot) => void) =>
    new Gauge({
      name,
      help,
      labelNames,
      registers,
      collect() {
        this.reset();
        fill(this, snap());
      },
    });
  const counter = (
    name: string,
    help: string,
    labelNames: string[],
    fill: (set: (labels: Record<string, string | number>, v: number) => void, s: Snapshot) => void,
  ) =>
    new Counter({
      name,
      help,
      labelNames,
      registers,
      collect() {
        this.reset();
        fill((labels, v) => this.inc(labels, v), snap());
      },
    });
  const index = (s: Snapshot): IndexStats => s.router.index;

  new Gauge({
    name: 'kvroute_router_workers',
    help: 'Registered workers.',
    registers,
    collect() {
      this.set(snap(true).router.workers);
    },
  });
  gauge('kvroute_router_ranks', 'Registered (worker, dp rank) candidates.', [], (g, s) => g.set(s.router.ranks));
  gauge('kvroute_router_queued_requests', "Requests waiting in the router's queue.", [], (g, s) => g.set(s.router.queued));
  /** A gauge of one figure of every rank with in-flight requests. */
  const perRank = (name: string, help: string, figure: (l: RankLoad) => number) =>
    gauge(name, help, ['worker', 'dp_rank'], (g, s) => {
      for (const l of s.router.load) g.set({ worker: String(l.workerId), dp_rank: l.dpRank }, figure(l));
    });
  perRank(
    'kvroute_router_in_flight_requests',
    'Requests booked and not freed, per rank (an SGLang batch: one per prompt).',
    (l) => l.requests,
  );
  perRank(
    'kvroute_router_active_prefill_tokens',
    'Prompt tokens of in-flight requests without a first token, per rank.',
    (l) => l.activePrefillTokens,
  );
  perRank('kvroute_router_active_blocks', 'KV blocks of in-flight requests (output blocks weighted), per rank.', (l) => l.activeBlocks);
  const routerCounts: [string, keyof RouterStats, string][] = [
    ['kvroute_router_routed_total', 'routed', 'Requests routed.'],
    ['kvroute_router_queued_total', 'queuedTotal', 'Requests that had to wait in the queue.'],
    ['kvroute_router_aborted_total', 'aborted', 'Waiting requests aborted.'],
    ['kvroute_router_expired_total', 'expired', 'In-flight requests freed by expiry.'],
    ['kvroute_router_dropped_with_worker_total', 'droppedWithWorker', 'In-flight requests dropped with their worker.'],
    ['kvroute_router_unknown_free_total', 'unknownFree', 'free() calls for unknown request ids.'],
    ['kvroute_router_unknown_output_tokens_total', 'unknownOutputTokens', 'markOutputTokens() calls for unknown request ids.'],
  ];
  for (const [name, key, help] of routerCounts) counter(name, help, [], (set, s) => set({}, s.router[key] as number));

  gauge('kvroute_index_blocks', 'Blocks held, summed over ranks.', [], (g, s) => g.set(index(s).blocks));
  gauge('kvroute_index_tree_nodes', 'Nodes of the prefix tree.', [], (g, s) => g.set(index(s).treeNodes));
  gauge('kvroute_index_memory_bytes', 'Estimated heap bytes of the index.', [], (g, s) => g.set(index(s).memoryBytes));
  gauge('kvroute_index_pending_events', 'Events accepted and not applied yet.', [], (g, s) => g.set(index(s).pending));
  counter('kvroute_index_events_applied_total', 'Index events applied, by kind.', ['kind'], (set, s) => {
    for (const [kind, v] of Object.entries(index(s).events)) set({ kind }, v);
  });
  counter('kvroute_index_events_rejected_total', 'Index events rejected, by reason.', ['reason'], (set, s) => {
    for (const [reason, v] of Object.entries(index(s).rejected)) set({ reason }, v);
  });
  counter('kvroute_index_events_skipped_total', 'Index events left out on purpose, by reason.', ['reason'], (set, s) => {
    for (const [reason, v] of Object.entries(index(s).skipped)) set({ reason }, v);
  });
  gauge('kvroute_index_lower_tier_blocks', 'Blocks held in each lower storage tier, summed over ranks.', ['tier'], (g, s) => {
    for (const [tier, t] of Object.entries(index(s).lowerTiers)) g.set({ tier }, t.blocks);
  });
  counter(
    'kvroute_index_lower_tier_blocks_total',
    'Lower-tier blocks by tier and outcome (stored, removed, unanchored, conflicting, not_found).',
    ['tier', 'outcome'],
    (set, s) => {
      for (const [tier, t] of Object.entries(index(s).lowerTiers))
        for (const outcome of ['stored', 'removed', 'unanchored', 'conflicting', 'not_found'] as const) set({ tier, outcome }, t[outcome]);
    },
  );
  counter('kvroute_index_duplicate_stores_total', 'Stored events that changed nothing (replays).', [], (set, s) =>
    set({}, index(s).duplicateStores),
  );

  const rank = (x: Snapshot['sources'][number]) => ({ worker: x.worker, dp_rank: x.dpRank });
  gauge(
    'kvroute_event_source_state',
    'KV-event source state per rank (1 for the current state).',
    ['worker', 'dp_rank', 'state'],
    (g, s) => {
      for (const x of s.sources) for (const state of STATES) g.set({ ...rank(x), state }, x.state === state ? 1 : 0);
    },
  );
  gauge('kvroute_event_source_lag_seconds', "Receive time minus the batch's own timestamp, last batch.", ['worker', 'dp_rank'], (g, s) => {
    for (const x of s.sources) if (x.lagSeconds !== null) g.set(rank(x), x.lagSeconds);
  });
  const sourceCounts: [string, 'gaps' | 'replays' | 'restarts' | 'resyncs' | 'batches' | 'decodeErrors', string][] = [
    ['kvroute_event_source_batches_total', 'batches', 'Engine batches applied.'],
    ['kvroute_event_source_gaps_total', 'gaps', 'Sequence gaps seen.'],
    ['kvroute_event_source_replays_total', 'replays', 'Replay requests sent.'],
    ['kvroute_event_source_restarts_total', 'restarts', 'Engine restarts seen.'],
    ['kvroute_event_source_resyncs_total', 'resyncs', 'Times a rank was cleared and resynced.'],
    ['kvroute_event_source_decode_errors_total', 'decodeErrors', 'Batches that did not decode.'],
  ];
  for (const [name, key, help] of sourceCounts) {
    counter(name, help, ['worker', 'dp_rank'], (set, s) => {
      for (const x of s.sources) set(rank(x), x[key]);
    });
  }
  replicaMetrics(gauge, counter);
  sessionMetrics(gauge, counter);
  return registry;
}

type GaugeFn = (name: string, help: string, labelNames: string[], fill: (g: Gauge, s: Snapshot) => void) => Gauge;
type CounterFn = (
  name: string,
  help: string,
  labelNames: string[],
  fill: (set: (labels: Record<string, string | number>, v: number) => void, s: Snapshot) => void,
) => Counter;

/** The replica load sync (`replicas` configured; its metrics stay 0 otherwise). */
function replicaMetrics(gauge: GaugeFn, counter: CounterFn): void {
  gauge('kvroute_replica_connected', 'Whether the replica sync is connected (1) or routing on local load only (0).', [], (g, s) => {
    const r = s.router.replicas;
    if (r) g.set(r.connected ? 1 : 0);
  });
  gauge('kvroute_replica_peers', 'Peer replicas heard from within the lease.', [], (g, s) => {
    if (s.router.replicas) g.set(s.router.replicas.peers);
  });
  gauge(
    'kvroute_replica_remote_in_flight_requests',
    "Peers' requests counted in this replica's load (a batch: one per prompt).",
    [],
    (g, s) => {
      if (s.router.replicas) g.set(s.router.replicas.remoteInFlight);
    },
  );
  partCounters(counter, (s) => s.router.replicas, [
    ['kvroute_replica_outages_total', 'outages', 'Times the connection to the sync transport was lost.'],
    ['kvroute_replica_messages_published_total', 'messagesPublished', 'Sync messages published.'],
    ['kvroute_replica_published_bytes_total', 'bytesPublished', 'Bytes of sync messages published.'],
    ['kvroute_replica_publish_errors_total', 'publishErrors', 'Changes not published (disconnected); repaired by the next state.'],
    ['kvroute_replica_states_published_total', 'statesPublished', 'Full states published (join, reconnect, request, every resyncMs).'],
    ['kvroute_replica_messages_received_total', 'messagesReceived', 'Sync messages received.'],
    ['kvroute_replica_received_bytes_total', 'bytesReceived', 'Bytes of sync messages received.'],
    ['kvroute_replica_messages_rejected_total', 'messagesRejected', 'Sync messages that did not decode (nothing applied).'],
    ['kvroute_replica_bookings_applied_total', 'bookingsApplied', "Peers' bookings counted in this replica's load."],
    [
      'kvroute_replica_bookings_refused_total',
      'refused',
      "Peers' bookings the router refused to count (past its bounds); nothing of them is in the load.",
    ],
    ['kvroute_replica_states_applied_total', 'statesApplied', "Peers' full states applied."],
    ['kvroute_replica_duplicates_total', 'duplicates', 'Duplicate sync changes ignored.'],
    ['kvroute_replica_reordered_total', 'reordered', 'Sync changes that overtook their booking.'],
    ['kvroute_replica_gaps_total', 'gaps', 'Sequence gaps in a peer’s messages (a state was requested).'],
    ['kvroute_replica_repaired_total', 'repaired', 'Remote bookings freed by a full state (their free was lost).'],
    ['kvroute_replica_lease_expiries_total', 'leaseExpiries', 'Peers dropped because their lease ran out.'],
    ['kvroute_replica_expired_bookings_total', 'expiredBookings', 'Remote bookings dropped with an expired peer.'],
    ['kvroute_replica_session_updates_published_total', 'sessionUpdatesPublished', 'Session bindings published to the peers.'],
    ['kvroute_replica_session_updates_received_total', 'sessionUpdatesReceived', "Peers' session bindings received."],
  ]);
}

/** Session affinity (`sessionAffinityTtlSecs` set; its metrics stay 0 otherwise). */
function sessionMetrics(gauge: GaugeFn, counter: CounterFn): void {
  gauge('kvroute_router_session_bindings', 'Sessions bound to a (worker, dp rank) now.', [], (g, s) => {
    if (s.router.sessions) g.set(s.router.sessions.bound);
  });
  partCounters(counter, (s) => s.router.sessions, [
    ['kvroute_router_session_hits_total', 'hits', "Requests sent to their session's bound rank."],
    ['kvroute_router_session_binds_total', 'bindings', 'Sessions bound by a request routed by cost.'],
    ['kvroute_router_session_invalidated_total', 'invalidated', 'Bindings dropped because their rank was gone or not allowed.'],
    ['kvroute_router_session_expired_total', 'expired', 'Bindings dropped after their idle time.'],
    ['kvroute_router_session_adopted_total', 'adopted', "Sessions bound by a peer replica's binding."],
    ['kvroute_router_session_superseded_total', 'superseded', "Bindings to another rank replaced by a peer's later one."],
    [
      'kvroute_router_session_stale_peer_updates_total',
      'stalePeerUpdates',
      "Peers' binding updates older than the binding held (ignored).",
    ],
    ['kvroute_router_session_evicted_total', 'evicted', 'Idle bindings dropped to make room (sessionAffinityMaxSessions reached).'],
    ['kvroute_router_session_overflow_total', 'overflow', 'Sessions left unbound because every binding had a request in flight.'],
  ]);
}

/** Counters of an optional part of the router's stats, left at 0 while it is absent. */
function partCounters<T>(counter: CounterFn, part: (s: Snapshot) => T | undefined, counts: [string, keyof T, string][]): void {
  for (const [name, key, help] of counts) {
    counter(name, help, [], (set, s) => {
      const p = part(s);
      if (p) set({}, p[key] as number);
    });
  }
}
