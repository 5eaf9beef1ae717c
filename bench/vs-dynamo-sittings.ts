/**
 * `npm run bench:vs-dynamo-sittings -- [N]`: N sittings of `bench:vs-dynamo` back to back
 * (default 5), each sitting's result kept as `bench/results/vs-dynamo-sitting-<k>.json`, then
 * the summary the "kvroute vs Dynamo" tables of BENCHMARKS.md give: for each index workload and
 * figure, the range over the sittings, the median, and how many sittings met issue #10's target.
 * `npm run bench:vs-dynamo-sittings -- --summarize a.json b.json ...` summarizes results already
 * written (by this script or by `bench:vs-dynamo`).
 *
 * Why sittings: a single sitting's ratios move by ±20% on the 2-vCPU test VMs (their virtual
 * CPUs' clocks change from run to run), so a target is judged over several, never one.
 * Each sitting takes about 75 s once the harness is built. Not run in CI.
 */

import { execFileSync } from 'node:child_process';
import { copyFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fmt, printTable, RESULTS, ROOT, writeResult } from './common.js';

interface Concurrent {
  writerBlockEventsPerSec: number;
  writerBlockEventsPerCpuSec: number;
  readerUs: { p99: number };
}

interface Sitting {
  date: string;
  results: Record<
    string,
    {
      ingestRatio: number;
      ingestCpuRatio: number;
      lockstepTimeRatio: number;
      idleFindUs: { kvroute: { p99: number }; dynamo: { p99: number } };
      liveBytesPerHeldBlock: { kvroute: number; dynamo: number };
      queriesWithDifferentOverlaps: number;
    }
  >;
  scaling: Record<
    string,
    {
      ingestByWriters: Record<string, { kvrouteBlockEventsPerSec: number }>;
      concurrent: { kvroute: Concurrent; dynamo: Concurrent };
      memory: { reportedOverLive: number };
    }
  >;
}

/** A figure of one workload in one sitting, and the target for it where there is one. */
interface Figure {
  label: string;
  of: (s: Sitting, workload: string) => number;
  digits: number;
  target?: (workload: string) => { atLeast?: number; atMost?: number } | undefined;
}

const TARGET_WORKLOADS = new Set(['W=16', 'W=256']);
const onTargetWorkloads = (bound: { atLeast?: number; atMost?: number }) => (w: string) => (TARGET_WORKLOADS.has(w) ? bound : undefined);

const FIGURES: Figure[] = [
  {
    label: 'ingest, kvroute / Dynamo',
    of: (s, w) => s.results[`index ${w}`].ingestRatio,
    digits: 2,
    target: onTargetWorkloads({ atLeast: 2 }),
  },
  { label: 'ingest CPU time, Dynamo / kvroute', of: (s, w) => s.results[`index ${w}`].ingestCpuRatio, digits: 2 },
  {
    label: 'lockstep time, kvroute / Dynamo',
    of: (s, w) => s.results[`index ${w}`].lockstepTimeRatio,
    digits: 2,
    target: onTargetWorkloads({ atMost: 0.5 }),
  },
  {
    label: 'idle find p99, kvroute / Dynamo',
    of: (s, w) => s.results[`index ${w}`].idleFindUs.kvroute.p99 / s.results[`index ${w}`].idleFindUs.dynamo.p99,
    digits: 2,
    target: (w) => (w === 'W=16' ? { atMost: 0.5 } : w === 'W=256' ? { atMost: 1 } : undefined),
  },
  {
    label: 'live bytes per held block, kvroute / Dynamo',
    of: (s, w) => s.results[`index ${w}`].liveBytesPerHeldBlock.kvroute / s.results[`index ${w}`].liveBytesPerHeldBlock.dynamo,
    digits: 4,
    target: onTargetWorkloads({ atMost: 0.5 }),
  },
  {
    label: 'concurrent writers, kvroute / Dynamo',
    of: (s, w) => s.scaling[w].concurrent.kvroute.writerBlockEventsPerSec / s.scaling[w].concurrent.dynamo.writerBlockEventsPerSec,
    digits: 2,
    target: onTargetWorkloads({ atLeast: 2 }),
  },
  {
    label: 'concurrent reader p99, kvroute / Dynamo',
    of: (s, w) => s.scaling[w].concurrent.kvroute.readerUs.p99 / s.scaling[w].concurrent.dynamo.readerUs.p99,
    digits: 2,
    target: onTargetWorkloads({ atMost: 1 }),
  },
  {
    label: 'concurrent writers per CPU-second, kvroute / Dynamo',
    of: (s, w) => s.scaling[w].concurrent.kvroute.writerBlockEventsPerCpuSec / s.scaling[w].concurrent.dynamo.writerBlockEventsPerCpuSec,
    digits: 2,
  },
  {
    label: "kvroute's 2 writers over 1",
    of: (s, w) => s.scaling[w].ingestByWriters['2'].kvrouteBlockEventsPerSec / s.scaling[w].ingestByWriters['1'].kvrouteBlockEventsPerSec,
    digits: 2,
  },
  {
    label: 'memoryBytes / allocator',
    of: (s, w) => s.scaling[w].memory.reportedOverLive,
    digits: 3,
    target: () => ({ atLeast: 0.9, atMost: 1.1 }),
  },
  {
    label: 'queries with different overlaps',
    of: (s, w) => s.results[`index ${w}`].queriesWithDifferentOverlaps,
    digits: 0,
    target: () => ({ atMost: 0 }),
  },
];

/**
 * The middle value, or the mean of the two middle ones for an even count: the median every
 * set of sittings in BENCHMARKS.md and the history reports. `percentile(…, 50)` of `common.ts`
 * is a nearest-rank percentile (the lower middle for an even count), made for latency samples.
 */
function median(values: number[]): number {
  const v = [...values].sort((a, b) => a - b);
  const mid = v.length >> 1;
  return v.length % 2 === 1 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

function runSittings(count: number): string[] {
  const files: string[] = [];
  for (let k = 1; k <= count; k++) {
    console.log(`\n=== sitting ${k} of ${count} ===`);
    execFileSync('npx', ['tsx', join(ROOT, 'bench', 'vs-dynamo.ts')], { stdio: 'inherit', cwd: ROOT });
    const kept = join(RESULTS, `vs-dynamo-sitting-${k}.json`);
    copyFileSync(join(RESULTS, 'vs-dynamo.json'), kept);
    files.push(kept);
  }
  return files;
}

function summarize(files: string[]): void {
  const sittings = files.map((f) => JSON.parse(readFileSync(f, 'utf8')) as Sitting);
  const workloads = Object.keys(sittings[0].scaling);
  const rows: Array<Record<string, string | number>> = [];
  const summary: Record<string, Record<string, unknown>> = {};
  for (const w of workloads) {
    summary[w] = {};
    for (const figure of FIGURES) {
      const values = sittings.map((s) => figure.of(s, w));
      const target = figure.target?.(w);
      const met = target
        ? values.filter((v) => (target.atLeast === undefined || v >= target.atLeast) && (target.atMost === undefined || v <= target.atMost))
            .length
        : undefined;
      summary[w][figure.label] = { values, median: median(values), met, target };
      rows.push({
        workload: w,
        figure: figure.label,
        range: `${fmt(Math.min(...values), figure.digits)}-${fmt(Math.max(...values), figure.digits)}`,
        median: fmt(median(values), figure.digits),
        target: target
          ? [target.atLeast !== undefined ? `≥ ${target.atLeast}` : '', target.atMost !== undefined ? `≤ ${target.atMost}` : '']
              .filter(Boolean)
              .join(', ')
          : '',
        'sittings meeting it': met === undefined ? '' : `${met} of ${values.length}`,
      });
    }
  }
  printTable(`kvroute vs Dynamo 1.6.1 over ${sittings.length} sittings (${sittings[0].date} to ${sittings.at(-1)?.date})`, rows);
  writeResult('vs-dynamo-sittings', { sittings: files, dates: sittings.map((s) => s.date), summary });
}

const args = process.argv.slice(2).filter((a) => a !== '--');
const summarizeAt = args.indexOf('--summarize');
const files = summarizeAt >= 0 ? args.slice(summarizeAt + 1) : runSittings(Number(args[0] ?? 5));
if (files.length === 0) throw new Error('--summarize needs the result files of one or more sittings');
summarize(files);
