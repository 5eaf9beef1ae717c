/**
 * Shared benchmark plumbing: machine facts, `--quick`, percentiles, tables, and result files in
 * `bench/results/<name>.json`. Speed is measured here, never in tests; ratios are always taken
 * from figures measured side by side in one run.
 */

import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const RESULTS = join(ROOT, 'bench', 'results');
export const QUICK = process.argv.includes('--quick');

export function machine(): Record<string, string | number> {
  let rustc = 'unknown';
  try {
    rustc = execFileSync('rustc', ['--version'], { encoding: 'utf8' }).trim();
  } catch {
    // rustc is only needed to build; the figure is informational.
  }
  return {
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    rustc,
    platform: `${process.platform}-${process.arch}`,
  };
}

export function percentile(sorted: Float64Array | number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

export function sortedCopy(values: ArrayLike<number>): Float64Array {
  return Float64Array.from(values).sort();
}

/** Runs `fn` repeatedly for about `ms` milliseconds after a warm-up; returns ns per call. */
export function timePerCall(fn: () => void, ms: number): number {
  const warm = performance.now() + ms / 5;
  while (performance.now() < warm) fn();
  let calls = 0;
  const start = process.hrtime.bigint();
  const end = performance.now() + ms;
  while (performance.now() < end) {
    for (let i = 0; i < 16; i++) fn();
    calls += 16;
  }
  return Number(process.hrtime.bigint() - start) / calls;
}

/**
 * Measures several functions side by side: `rounds` rounds, each timing every function for `ms`
 * in turn, so slow drifts of the machine hit all of them alike. Returns the median ns per call.
 */
export function compareMedians(fns: Record<string, () => void>, ms: number, rounds: number): Record<string, number> {
  const samples: Record<string, number[]> = {};
  for (const name of Object.keys(fns)) samples[name] = [];
  for (let round = 0; round < rounds; round++) {
    for (const [name, fn] of Object.entries(fns)) samples[name].push(timePerCall(fn, ms));
  }
  const out: Record<string, number> = {};
  for (const [name, values] of Object.entries(samples)) out[name] = percentile(sortedCopy(values), 50);
  return out;
}

export function printTable(title: string, rows: Array<Record<string, string | number>>): void {
  console.log(`\n${title}`);
  console.table(rows);
}

export function writeResult(name: string, result: Record<string, unknown>): string {
  mkdirSync(RESULTS, { recursive: true });
  const path = join(RESULTS, `${name}.json`);
  const body = { name, date: new Date().toISOString(), quick: QUICK, machine: machine(), ...result };
  writeFileSync(path, `${JSON.stringify(body, (_k, v) => (typeof v === 'bigint' ? v.toString() : v), 2)}\n`);
  console.log(`\nwrote ${path}`);
  return path;
}

export function fmt(n: number, digits = 1): string {
  return Number.isFinite(n) ? n.toFixed(digits) : String(n);
}

/**
 * Closed-loop load: `clients` loops each calling `step(client)` until `seconds` have passed (a
 * step under way finishes). Returns the seconds it took.
 */
export async function closedLoop(clients: number, seconds: number, step: (client: number) => Promise<void>): Promise<number> {
  const deadline = performance.now() + seconds * 1000;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      while (performance.now() < deadline) await step(c);
    }),
  );
  return (performance.now() - t0) / 1000;
}

/**
 * Starts `node --import tsx <args>` in the repository and resolves once its standard output
 * matches `pattern` (a server printing its address, say); rejects if it exits first.
 */
export function spawnLine(
  args: string[],
  pattern: RegExp,
  nodeArgs: string[] = [],
): Promise<{ child: ChildProcess; match: RegExpExecArray }> {
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', ...args], { stdio: ['ignore', 'pipe', 'inherit'], cwd: ROOT });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (d) => {
      out += d;
      const m = pattern.exec(out);
      if (m) resolve({ child, match: m });
    });
    child.on('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}: ${out}`)));
  });
}

/** Keep-alive undici pools, one per origin with `connections` each, and a way to close them all. */
export function poolsOf(connections: number): { pool: (url: string) => Pool; close: () => Promise<void> } {
  const pools = new Map<string, Pool>();
  return {
    pool(url) {
      const existing = pools.get(url);
      if (existing) return existing;
      const created = new Pool(url, { connections });
      pools.set(url, created);
      return created;
    },
    async close() {
      for (const p of pools.values()) await p.close();
    },
  };
}

/** POSTs `body` as JSON; resolves with the milliseconds until the whole answer and its text, rejects on a status other than 200. */
export async function timedPost(pool: Pool, url: string, path: string, body: unknown): Promise<{ ms: number; text: string }> {
  const t0 = performance.now();
  const res = await pool.request({ method: 'POST', path, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`${url}${path} answered ${res.statusCode}: ${text}`);
  return { ms: performance.now() - t0, text };
}
