/**
 * Watching files that are replaced or rewritten while the gateway runs: the config file
 * (`--watch-config`) and the TLS certificate and key files. A stat poll, which follows symlinks,
 * so a Kubernetes ConfigMap's or Secret's swap of its `..data` link is seen too.
 *
 * A file saved in place may be caught half written, and may still parse (a list cut short would
 * remove workers; a certificate rewritten before its key would not match it): a change is reported
 * once every watched file has stayed the same for {@link SETTLE_MS}.
 * @internal
 * @module
 */

import { type Stats, statSync, unwatchFile, watchFile } from 'node:fs';
import type { FastifyBaseLogger } from 'fastify';
import { Counter, type Registry } from 'prom-client';

/** How long changed files must stay the same before they are read. */
export const SETTLE_MS = 250;

const keyOf = (s: Stats) => `${s.ino}:${s.mtimeMs}:${s.size}`;

/** The files' identities and versions as a stat sees them (a missing file: empty). */
function statKeys(files: readonly string[]): string {
  return files
    .map((file) => {
      const s = statSync(file, { throwIfNoEntry: false });
      return s ? keyOf(s) : '';
    })
    .join('|');
}

/**
 * Calls `onChange` with the file that changed once `files` have changed and then stayed the same
 * for {@link SETTLE_MS}; looks every `intervalMs`. Returns the function that stops watching.
 */
export function watchSettled(files: readonly string[], intervalMs: number, onChange: (file: string) => void): () => void {
  let settling: NodeJS.Timeout | undefined;
  const settle = (changed: string, seen: string) => {
    settling = setTimeout(() => {
      const now = statKeys(files);
      if (now === seen) onChange(changed);
      else settle(changed, now);
    }, SETTLE_MS);
    settling.unref();
  };
  const listeners = files.map((file) => {
    const onStat = (now: Stats, before: Stats) => {
      if (now.mtimeMs === before.mtimeMs && now.ino === before.ino && now.size === before.size) return;
      clearTimeout(settling);
      settle(file, statKeys(files));
    };
    watchFile(file, { interval: intervalMs, persistent: false }, onStat);
    return [file, onStat] as const;
  });
  return () => {
    clearTimeout(settling);
    for (const [file, onStat] of listeners) unwatchFile(file, onStat);
  };
}

/** What {@link watchReloads} watches, and how it applies and counts a change. */
export interface ReloadWatch {
  files: readonly string[];
  intervalMs: number;
  registry: Registry;
  /** The counter of reloads by `result` (`applied`, `rejected`), and its help. */
  metric: string;
  help: string;
  log: FastifyBaseLogger;
  /** Names the files in the log lines, e.g. `TLS files`. */
  what: string;
  /** Reads the files and puts them in use; throws (nothing changed) when they do not load. */
  apply: () => void;
}

/**
 * Applies files again whenever they change and settle: a change that loads is counted
 * `applied`, one that does not is logged and counted `rejected`, and what was in use stays.
 * Returns the function that stops watching.
 */
export function watchReloads(w: ReloadWatch): () => void {
  const reloads = new Counter({ name: w.metric, help: w.help, labelNames: ['result'], registers: [w.registry] });
  for (const result of ['applied', 'rejected']) reloads.inc({ result }, 0);
  return watchSettled(w.files, w.intervalMs, (changed) => {
    try {
      w.apply();
    } catch (err) {
      reloads.inc({ result: 'rejected' });
      w.log.error({ file: changed, err: (err as Error).message }, `${w.what} changed but do not load; the ones in use stay`);
      return;
    }
    reloads.inc({ result: 'applied' });
    w.log.info({ file: changed }, `${w.what} reloaded`);
  });
}
