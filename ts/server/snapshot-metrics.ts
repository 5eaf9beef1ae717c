/**
 * The index snapshot writer's state (`snapshots` in the gateway's options) as Prometheus metrics,
 * read from its `stats()` at scrape time: a writer whose NATS store is unreachable keeps failing
 * every period without touching the router, so this (and the gateway's log) is where it shows.
 * @internal
 * @module
 */

import type { Registry } from 'prom-client';
import type { IndexSnapshotWriter } from '../replicas/snapshot-store.js';
import { scrapedCounter, scrapedGauge } from './scraped-metrics.js';

export function snapshotMetrics(writer: IndexSnapshotWriter, registry: Registry): void {
  scrapedCounter(
    registry,
    'kvroute_snapshot_writes_total',
    'Index snapshots stored in the NATS object store.',
    () => writer.stats().writes,
  );
  scrapedCounter(
    registry,
    'kvroute_snapshot_failures_total',
    'Index snapshot writes that failed (NATS unreachable, no JetStream, ...); each is retried at the next period.',
    () => writer.stats().failures,
  );
  scrapedGauge(registry, 'kvroute_snapshot_last_bytes', 'Size of the last snapshot stored (0: none yet).', () => writer.stats().lastBytes);
  scrapedGauge(
    registry,
    'kvroute_snapshot_last_write_timestamp_seconds',
    'Wall-clock time of the last snapshot stored, in seconds since the epoch (0: none yet).',
    () => (writer.stats().lastWriteAt ?? 0) / 1000,
  );
}
