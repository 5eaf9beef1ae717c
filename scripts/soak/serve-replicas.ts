/**
 * The soak's gateways as `kvroute serve` processes (the built `dist/cli.js`), as they run in
 * production: each reads a config file of its own with `--watch-config`, so the faults reach
 * them as an operator's would. A config reload rewrites the file, either swapped in whole (a
 * rename, as a Kubernetes ConfigMap's link swap) for the watch to find, or in place followed by
 * SIGHUP. A clean restart starts the successor first and then sends SIGTERM, as a rolling update
 * does: the old process must exit 0 within {@link STOP_BOUND_MS}. A crash is SIGKILL: its
 * requests in flight are cut (their clients are told, see `crashed`) and its peers must drop
 * its load when its lease runs out. Once a process has ended, what it logged at warn or above is
 * counted by message; errors, and anything else it printed, are kept as problems.
 */

import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCommand } from '../../test/helpers/cli-process.js';
import { scrape } from '../../test/helpers/prometheus.js';
import type { GatewayWorker } from '../../ts/index.js';
import { type LinkedReplica, LinkedReplicas } from './linked-replicas.js';
import { indexBlocks, type SoakReplica, type SoakReplicaSet } from './replica-set.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** How long a SIGTERM may take: the shutdown delay (0.5 s) and the longest request a slowed engine serves. */
const STOP_BOUND_MS = 20_000;
/** How long a reload may take to apply: the watch's 1 s poll and 250 ms settle, with room. */
const RELOAD_BOUND_MS = 5000;

interface Process extends LinkedReplica {
  command: ReturnType<typeof runCommand>;
  config: string;
}

export class ServeReplicas extends LinkedReplicas<Process> implements SoakReplicaSet {
  private readonly dir = mkdtempSync(join(tmpdir(), 'kvroute-soak-'));
  /** The URLs of replicas crashed on purpose: what their clients saw cut is expected. */
  readonly crashed = new Set<string>();
  /** How long each SIGTERM took to end its process, in ms. */
  readonly stopMs: number[] = [];
  /** Log lines at warn or above, by level and message. */
  readonly logged = new Map<string, number>();
  private reloads = 0;

  async restart(slot: number, crash: boolean): Promise<void> {
    const old = this.live[slot];
    this.live[slot] = await this.startOne(slot);
    if (crash) {
      this.crashed.add(old.url);
      old.command.child.kill('SIGKILL');
      await old.command.exited;
    } else {
      await this.stop(old);
    }
    this.readOutput(old);
    await old.link?.cut();
  }

  async setWorkers(replica: SoakReplica, workers: GatewayWorker[]): Promise<string> {
    const p = this.live.find((x) => x === replica);
    if (!p) return 'gone';
    const before = await this.appliedReloads(p);
    const text = JSON.stringify({ ...JSON.parse(readFileSync(p.config, 'utf8')), workers });
    // A removal and its restore go the same way; the next pair the other way.
    const how = Math.floor(this.reloads++ / 2) % 2 === 0 ? 'file swapped' : 'SIGHUP';
    if (how === 'SIGHUP') {
      writeFileSync(p.config, text);
      p.command.child.kill('SIGHUP');
    } else {
      writeFileSync(`${p.config}.next`, text);
      renameSync(`${p.config}.next`, p.config);
    }
    const deadline = Date.now() + RELOAD_BOUND_MS;
    let applied = before;
    while (applied === before && Date.now() < deadline && this.live.includes(p)) {
      await sleep(100);
      applied = await this.appliedReloads(p);
    }
    if (this.live.includes(p) && applied === before)
      this.problems.push(`${p.id}: a config reload (${how}) not applied within ${RELOAD_BOUND_MS} ms`);
    return how;
  }

  /**
   * Each process's resident memory, heap and event-loop delay (p99 since its previous scrape:
   * prom-client resets it at each), from its own `/metrics`.
   */
  async memory(): Promise<string> {
    const each = await Promise.all(
      this.live.map(async (p) => {
        const m = await scrape(`${p.url}/metrics`);
        const mb = (name: string) => (m.sum(name) / 2 ** 20).toFixed(0);
        const lag = (m.sum('nodejs_eventloop_lag_p99_seconds') * 1000).toFixed(1);
        return `${p.id} ${mb('process_resident_memory_bytes')} MB resident, ${mb('nodejs_heap_size_used_bytes')} MB heap, ${lag} ms event-loop p99`;
      }),
    );
    return each.join('; ');
  }

  async close(): Promise<void> {
    for (const p of this.live.splice(0)) {
      await this.stop(p);
      this.readOutput(p);
      await p.link?.cut();
    }
    await this.stopNats();
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** SIGTERM, and the exit it must make: 0, within {@link STOP_BOUND_MS}. */
  private async stop(p: Process): Promise<void> {
    const at = Date.now();
    p.command.child.kill('SIGTERM');
    const code = await Promise.race([p.command.exited, sleep(STOP_BOUND_MS).then(() => 'late' as const)]);
    if (code === 'late') {
      this.problems.push(`${p.id}: still running ${STOP_BOUND_MS} ms after SIGTERM`);
      p.command.child.kill('SIGKILL');
      await p.command.exited;
    } else if (code !== 0) {
      this.problems.push(`${p.id}: exited ${code} after SIGTERM (${Date.now() - at} ms)`);
    } else {
      this.stopMs.push(Date.now() - at);
    }
  }

  private async appliedReloads(p: Process): Promise<number> {
    try {
      return (await scrape(`${p.url}/metrics`)).sum('kvroute_gateway_config_reloads_total', { result: 'applied' });
    } catch {
      return -1;
    }
  }

  protected async startOne(slot: number): Promise<Process> {
    const { id, link, warm, options } = await this.birth(slot);
    const config = join(this.dir, `${id}.json`);
    writeFileSync(config, JSON.stringify({ ...options, logLevel: 'warn', shutdown: { delayMs: 500 } }));
    const command = runCommand(['serve', '--config', config, '--watch-config', '--port', '0'], /proxy (https?:\/\/127\.0\.0\.1:\d+)/);
    const url = (await command.match)[1];
    if (warm) this.warmStarts.push({ from: warm, blocks: await indexBlocks(url) });
    return { id, url, command, config, link };
  }

  /** Reads what an ended process printed: its log lines counted, anything else a problem. */
  private readOutput(p: Process): void {
    for (const line of p.command.output().split('\n')) {
      if (line !== '' && !line.startsWith('kvroute serve: proxy')) this.log(p.id, line);
    }
    const errors = p.command.errors().trim();
    if (errors !== '') this.problems.push(`${p.id} stderr: ${errors.slice(0, 300)}`);
  }

  /** Counts a pino line by level and message; keeps an error's whole line as a problem. */
  private log(id: string, line: string): void {
    let entry: { level?: number; msg?: string };
    try {
      entry = JSON.parse(line);
    } catch {
      this.problems.push(`${id} printed: ${line.slice(0, 300)}`);
      return;
    }
    const level = entry.level ?? 0;
    if (level < 40) return;
    const key = `${level >= 50 ? 'error' : 'warn'}: ${entry.msg}`;
    this.logged.set(key, (this.logged.get(key) ?? 0) + 1);
    // A failed warm start is a warning to an operator (the gateway serves on, cold); here it is a failure.
    if (level >= 50 || entry.msg?.startsWith('warm start failed')) this.problems.push(`${id} logged: ${line.slice(0, 300)}`);
  }
}
