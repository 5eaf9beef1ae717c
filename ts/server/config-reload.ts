/**
 * `kvroute serve`'s config reload: on SIGHUP, and with `--watch-config` whenever the file changes
 * (a stat poll, which follows symlinks, so a Kubernetes ConfigMap's swap of its `..data` link is
 * seen too), the options are read again as at start (the file, then the flags and environment)
 * and the gateway's workers set to them (`Gateway.setWorkers`).
 *
 * Only the workers change at run time. Any other option the reload finds changed is named in a
 * warning and in `kvroute_gateway_config_restart_needed` (1 until the file matches the running
 * options again), and the workers are applied all the same: an operator editing the fleet
 * should not be blocked by a setting that waits for the next restart. A file that does not read
 * or does not validate changes nothing; it is logged and counted.
 * @internal
 * @module
 */

import { Counter, Gauge } from 'prom-client';
import { watchSettled } from './file-watch.js';
import type { Gateway } from './gateway.js';
import type { GatewayOptions } from './options.js';

/** How often `--watch-config` looks at the file. */
export const WATCH_INTERVAL_MS = 1000;

export interface ConfigReloadOptions {
  /** Reads the options as at start; throws when they do not read. */
  read: () => GatewayOptions;
  /** The options the gateway started with. */
  started: GatewayOptions;
  /** The file to watch, when `--watch-config` is given. */
  watch?: string;
}

/** JSON with object keys sorted, so that reordering a file's keys is no change. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.keys(v)
            .sort()
            .map((k) => [k, (v as Record<string, unknown>)[k]]),
        )
      : typeof v === 'bigint'
        ? v.toString()
        : v,
  );
}

/** The top-level options other than `workers` that differ between two reads. */
export function changedOptions(before: GatewayOptions, after: GatewayOptions): string[] {
  const a = before as unknown as Record<string, unknown>;
  const b = after as unknown as Record<string, unknown>;
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  keys.delete('workers');
  return [...keys].filter((k) => canonical(a[k]) !== canonical(b[k])).sort();
}

/** Starts reloading on SIGHUP (and on file changes with `watch`); returns the function that stops it. */
export function reloadConfigOnSignal(gateway: Gateway, opts: ConfigReloadOptions): () => void {
  const log = gateway.app.log;
  const reloads = new Counter({
    name: 'kvroute_gateway_config_reloads_total',
    help: 'Config reloads (SIGHUP or --watch-config): applied (workers changed), unchanged, or rejected (nothing changed).',
    labelNames: ['result'],
    registers: [gateway.registry],
  });
  const restartNeeded = new Gauge({
    name: 'kvroute_gateway_config_restart_needed',
    help: 'Whether the config holds options other than the workers that differ from the running ones (applied at the next restart).',
    registers: [gateway.registry],
  });
  for (const result of ['applied', 'unchanged', 'rejected']) reloads.inc({ result }, 0);
  restartNeeded.set(0);

  const reload = (why: string) => {
    let next: GatewayOptions;
    try {
      next = opts.read();
      // A config that declares no workers (they came through the admin API) leaves them be; `workers: []` empties the fleet.
      const changes =
        next.workers === undefined
          ? { added: [], removed: [], replaced: [], updated: [], unchanged: gateway.workers().map((w) => w.id as bigint) }
          : gateway.setWorkers(next.workers);
      const changed = Object.entries(changes).some(([k, ids]) => k !== 'unchanged' && ids.length > 0);
      reloads.inc({ result: changed ? 'applied' : 'unchanged' });
      const ids = Object.fromEntries(Object.entries(changes).map(([k, v]) => [k, (v as bigint[]).map(String)]));
      log.info({ reason: why, workers: ids }, changed ? 'config reloaded: workers changed' : 'config reloaded: no worker changed');
    } catch (err) {
      reloads.inc({ result: 'rejected' });
      log.error({ reason: why, err: (err as Error).message }, 'config reload rejected, nothing changed');
      return;
    }
    const pending = changedOptions(opts.started, next);
    restartNeeded.set(pending.length > 0 ? 1 : 0);
    if (pending.length > 0) log.warn({ options: pending }, `config reload: ${pending.join(', ')} changed; they apply at the next restart`);
  };

  const onSignal = () => reload('SIGHUP');
  process.on('SIGHUP', onSignal);
  const file = opts.watch;
  const stopWatching = file === undefined ? () => {} : watchSettled([file], WATCH_INTERVAL_MS, () => reload(`${file} changed`));
  return () => {
    process.off('SIGHUP', onSignal);
    stopWatching();
  };
}
