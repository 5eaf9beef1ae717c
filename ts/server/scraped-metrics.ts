/**
 * Metrics whose values live elsewhere (a component's own counters) and are read when Prometheus
 * scrapes, so the component needs no knowledge of prom-client.
 * @internal
 * @module
 */

import { Counter, Gauge, type Registry } from 'prom-client';

/** A counter that reports `read()` at every scrape (`read` must never decrease). */
export function scrapedCounter(registry: Registry, name: string, help: string, read: () => number): Counter {
  return new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      this.reset();
      this.inc(read());
    },
  });
}

/** A gauge that reports `read()` at every scrape. */
export function scrapedGauge(registry: Registry, name: string, help: string, read: () => number): Gauge {
  return new Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      this.set(read());
    },
  });
}
