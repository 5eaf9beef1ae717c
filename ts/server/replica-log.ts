/**
 * The gateway's log of the replica sync: NATS connected, lost and back, peers joining and
 * leaving, peers dropped when their lease ran out. Routing never waits for the sync, so
 * without these lines an outage would show only in metrics. The sync's counters are read from
 * `router.stats()` once a second, as the metrics read them, rather than hooked, so the sync
 * stays free of logging.
 * @internal
 * @module
 */

import type { FastifyBaseLogger } from 'fastify';
import type { ReplicaStats } from '../replicas/sync.js';
import type { KvRouter } from '../router/kv-router.js';

const POLL_MS = 1000;
/** A replica that has not reached NATS this long after starting says so, once. */
const UNREACHABLE_AFTER_MS = 5000;

/** What changed between two readings of the sync's stats, as log calls. */
function logChanges(before: ReplicaStats, now: ReplicaStats, log: FastifyBaseLogger): void {
  const replica = now.replicaId;
  if (now.connected && before.connected && now.outages > before.outages) {
    // Lost and back between two readings.
    log.warn({ replica, outages: now.outages }, `replica sync lost its connection ${now.outages - before.outages} time(s) and reconnected`);
  } else if (now.connected !== before.connected) {
    if (now.connected) {
      log.info({ replica, outages: now.outages }, now.outages === 0 ? 'replica sync connected' : 'replica sync reconnected');
    } else {
      log.warn(
        { replica, outages: now.outages },
        "replica sync lost its connection: routing on this replica's load and what it holds of its peers'",
      );
    }
  }
  const expired = now.leaseExpiries - before.leaseExpiries;
  if (expired > 0) {
    log.warn(
      { replica, expired, expiredBookings: now.expiredBookings },
      `${expired} replica peer(s) unheard for the lease: their load dropped`,
    );
  }
  if (now.peers !== before.peers) log.info({ replica, peers: now.peers }, `replica peers: ${before.peers} → ${now.peers}`);
}

/** Starts logging the replica sync's changes; returns the stop. A router without replicas logs nothing. */
export function logReplicaChanges(router: KvRouter, log: FastifyBaseLogger): () => void {
  let last = router.stats().replicas;
  if (!last) return () => {};
  const started = Date.now();
  let everConnected = last.connected;
  const timer = setInterval(() => {
    let now: ReplicaStats | undefined;
    try {
      now = router.stats().replicas;
    } catch {
      return; // closed
    }
    if (!now || !last) return;
    logChanges(last, now, log);
    if (!everConnected && !now.connected && Date.now() - started >= UNREACHABLE_AFTER_MS) {
      log.warn({ replica: now.replicaId }, "replica sync cannot reach NATS yet: routing on this replica's load alone, retrying");
      everConnected = true; // said once; the connect, when it comes, is logged as usual
    }
    everConnected ||= now.connected;
    last = now;
  }, POLL_MS);
  timer.unref();
  return () => clearInterval(timer);
}
