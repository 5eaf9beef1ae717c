/**
 * `npm run bench:vs-dynamo-instructions`: how many instructions each index's writer threads run
 * per block-event on the `bench:vs-dynamo` index workloads, counted by valgrind's callgrind
 * (this VM exposes no hardware counters to `perf`). Unlike the timed comparison, the count does
 * not move with the machine's load or with which virtual CPU a writer draws, so it separates
 * the work each design does from how fast the machine runs it: beside `ingestCpuRatio` it says
 * how much of a ratio comes from fewer instructions and how much from fewer stalls.
 *
 * Each run is one system's ingest alone (`kvroute-vs-dynamo ingest-once`), one file per thread
 * (`--separate-threads=yes`); a system's writer threads are the ones that ran its apply loop
 * (kvroute's `TreeWriter::apply_event`, Dynamo's `SyncIndexer::worker`), so the producer, which
 * builds the events before the ingest starts, is not counted for either. Under valgrind the
 * threads run one at a time, so locks are never contended: Dynamo's count is its uncontended
 * path. Needs valgrind (`apt-get install valgrind`); takes about ten minutes on 2 cores. Not run
 * in CI.
 */

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fmt, printTable, writeResult } from './common.js';
import { buildVsDynamo, indexWorkloadFiles } from './vs-dynamo-setup.js';

const SYSTEMS = { kvroute: /TreeWriter::apply_event/, dynamo: /SyncIndexer for [^\n]*>::worker/ } as const;
type System = keyof typeof SYSTEMS;
const WRITER_COUNTS = [1, 2];

try {
  execFileSync('valgrind', ['--version'], { stdio: 'ignore' });
} catch {
  console.error('bench:vs-dynamo-instructions needs valgrind (apt-get install valgrind); not found.');
  process.exit(1);
}

/** Runs one system's ingest under callgrind; returns its writer threads' instructions and the block-events. */
function countIngest(binary: string, file: string, system: System, writers: number): { instructions: number[]; blockEvents: number } {
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-callgrind-'));
  try {
    const out = join(dir, 'callgrind.out');
    const stdout = execFileSync(
      'valgrind',
      ['--tool=callgrind', '--separate-threads=yes', `--callgrind-out-file=${out}`, binary, 'ingest-once', file, system],
      { encoding: 'utf8', env: { ...process.env, WRITERS: String(writers) }, stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 1 << 20 },
    );
    const instructions: number[] = [];
    for (const name of readdirSync(dir).filter((n) => n.startsWith('callgrind.out-'))) {
      const text = readFileSync(join(dir, name), 'utf8');
      if (!SYSTEMS[system].test(text)) continue;
      const summary = /^summary: (\d+)/m.exec(text) ?? /^totals: (\d+)/m.exec(text);
      if (!summary) throw new Error(`${name}: no summary line in callgrind's output`);
      instructions.push(Number(summary[1]));
    }
    if (instructions.length !== writers) {
      throw new Error(`${system} with ${writers} writers: found ${instructions.length} writer threads in callgrind's output`);
    }
    return { instructions, blockEvents: Number(stdout.trim()) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const binary = buildVsDynamo();
const rows: Array<Record<string, string | number>> = [];
const results: Record<string, unknown> = {};
for (const { name, file } of indexWorkloadFiles()) {
  for (const writers of WRITER_COUNTS) {
    const counts = {} as Record<System, { instructions: number[]; blockEvents: number; perBlockEvent: number }>;
    for (const system of Object.keys(SYSTEMS) as System[]) {
      console.log(`${name}, ${writers} writer${writers === 1 ? '' : 's'}: ${system} under callgrind…`);
      const { instructions, blockEvents } = countIngest(binary, file, system, writers);
      const total = instructions.reduce((a, b) => a + b, 0);
      counts[system] = { instructions, blockEvents, perBlockEvent: total / blockEvents };
    }
    const ratio = counts.kvroute.perBlockEvent / counts.dynamo.perBlockEvent;
    results[`${name}, ${writers} writers`] = { ...counts, kvrouteOverDynamo: ratio };
    rows.push({
      workload: name,
      writers,
      'block-events': counts.kvroute.blockEvents,
      'kvroute instructions / block-event': fmt(counts.kvroute.perBlockEvent, 1),
      'dynamo instructions / block-event': fmt(counts.dynamo.perBlockEvent, 1),
      'kvroute / dynamo': fmt(ratio, 3),
      'kvroute per writer (M)': counts.kvroute.instructions.map((n) => fmt(n / 1e6, 1)).join(' / '),
      'dynamo per writer (M)': counts.dynamo.instructions.map((n) => fmt(n / 1e6, 1)).join(' / '),
    });
  }
}
printTable("writer threads' instructions per block-event (callgrind; one ingest of each system, events built beforehand)", rows);
writeResult('vs-dynamo-instructions', { tool: execFileSync('valgrind', ['--version'], { encoding: 'utf8' }).trim(), results, table: rows });
