/**
 * The index snapshot writer's state (`snapshots` in the gateway's options) as Prometheus metrics,
 * read from its `stats()` at scrape time: a writer whose NATS store is unreachable keeps failing
 * every period without touching the router, so this (and the gateway's log) is where it shows.
 * @internal
 * @module
 */

import { Counter, Gauge, type Registry } from 'prom-client';
import type { IndexSnapshotWriter } from '../replicas/snapshot-store.js';

export function snapshotMetrics(writer: IndexSnapshotWriter, registry: Registry): void {
  const registers = [registry];
  const total = (name: string, help: string, read: (w: IndexSnapshotWriter) => number) =>
    new Counter({
      name,
      help,
      registers,
      collect() {
        this.reset();
        this.inc(read(writer));
      },
    });
  const gauge = (name: string, help: string, read: (w: IndexSnapshotWriter) => number) =>
    new Gauge({
      name,
      help,
      registers,
      collect() {
        this.set(read(writer));
      },
    });
  total('kvroute_snapshot_writes_total', 'Index snapshots stored in the NATS object store.', (w) => w.stats().writes);
  total(
    'kvroute_snapshot_failures_total',
    'Index snapshot writes that failed (NATS unreachable, no JetStream, ...); each is retried at the next period.',
    (w) => w.stats().failures,
  );
  gauge('kvroute_snapshot_last_bytes', 'Size of the last snapshot stored (0: none yet).', (w) => w.stats().lastBytes);
  gauge(
    'kvroute_snapshot_last_write_timestamp_seconds',
    'Wall-clock time of the last snapshot stored, in seconds since the epoch (0: none yet).',
    (w) => (w.stats().lastWriteAt ?? 0) / 1000,
  );
}
