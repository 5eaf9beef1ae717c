/**
 * The index benchmark: the Mooncake-derived workload (see index-workload.ts) at W = 16 and 256
 * workers, replayed by the native backend, the pure-JS backend (each in its own process) and the
 * pure-Rust harness (`cargo bench -p kvroute-core --bench index`), side by side in one run.
 * Node's ingest is measured three ways: event objects, the same events as NDJSON text, and
 * packed columns (validation skipped), each beside the Rust harness.
 * Targets: ≥ 1M block-events/s and findMatches p99 < 20 µs at W = 16 through Node; Node within
 * 80% of the Rust harness; native ≥ 5× JS.
 */

import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fmt, printTable, QUICK, RESULTS, ROOT, writeResult } from './common.js';
import { benchTrace, buildWorkload, writeWorkload } from './index-workload.js';

type Figures = Record<string, number | string>;

function runNode(file: string, backend: string): Figures {
  const out = execFileSync(process.execPath, ['--expose-gc', '--import', 'tsx', join(ROOT, 'bench', 'index-run.ts'), file, backend], {
    cwd: ROOT,
    encoding: 'utf8',
    maxBuffer: 1 << 26,
  });
  return JSON.parse(out.trim().split('\n').pop() as string);
}

function runRust(file: string): Figures {
  const out = execFileSync('cargo', ['bench', '-q', '-p', 'kvroute-core', '--bench', 'index', '--', file], {
    cwd: ROOT,
    encoding: 'utf8',
    maxBuffer: 1 << 26,
  });
  return JSON.parse(out.trim().split('\n').pop() as string);
}

mkdirSync(RESULTS, { recursive: true });
const { trace, source } = benchTrace(QUICK ? 1500 : undefined);
const results: Record<string, Record<string, Figures>> = {};
const rows: Array<Record<string, string | number>> = [];
for (const workers of [16, 256]) {
  const file = join(RESULTS, `index-workload-w${workers}.bin`);
  writeWorkload(file, buildWorkload(trace, workers));
  const native = runNode(file, 'native');
  const js = runNode(file, 'js');
  const rust = runRust(file);
  results[`w${workers}`] = { native, js, rust };
  const row = (metric: string, n: number, j: number, r: number, higherIsBetter = true) => {
    rows.push({
      W: workers,
      metric,
      native: fmt(n, 2),
      js: fmt(j, 2),
      rust: fmt(r, 2),
      'native/js': fmt(higherIsBetter ? n / j : j / n, 2),
      'node/rust': fmt(higherIsBetter ? n / r : r / n, 2),
    });
  };
  row(
    'block-events/s (M)',
    Number(native.blockEventsPerSec) / 1e6,
    Number(js.blockEventsPerSec) / 1e6,
    Number(rust.blockEventsPerSec) / 1e6,
  );
  row(
    'block-events/s from JSON text (M)',
    Number(native.jsonBlockEventsPerSec) / 1e6,
    Number(js.jsonBlockEventsPerSec) / 1e6,
    Number(rust.blockEventsPerSec) / 1e6,
  );
  row(
    'block-events/s packed, unvalidated (M)',
    Number(native.packedBlockEventsPerSec) / 1e6,
    Number(js.packedBlockEventsPerSec) / 1e6,
    Number(rust.blockEventsPerSec) / 1e6,
  );
  row('events/s (k)', Number(native.eventsPerSec) / 1e3, Number(js.eventsPerSec) / 1e3, Number(rust.eventsPerSec) / 1e3);
  row(
    'findMatches/s (k)',
    Number(native.findMatchesPerSec) / 1e3,
    Number(js.findMatchesPerSec) / 1e3,
    Number(rust.findMatchesPerSec) / 1e3,
  );
  row('findMatches p50 µs', Number(native.p50us), Number(js.p50us), Number(rust.p50us), false);
  row('findMatches p99 µs', Number(native.p99us), Number(js.p99us), Number(rust.p99us), false);
  row('findMatches p99.9 µs', Number(native.p999us), Number(js.p999us), Number(rust.p999us), false);
  row('interleaved run s', Number(native.interleavedSeconds), Number(js.interleavedSeconds), Number(rust.interleavedSeconds), false);
  row('bytes per held block', Number(native.bytesPerHeldBlock), Number(js.bytesPerHeldBlock), Number(rust.bytesPerHeldBlock), false);
  row('peak RSS delta MiB', Number(native.peakRssDeltaMiB), Number(js.peakRssDeltaMiB), Number(rust.peakRssDeltaMiB), false);
}
printTable(`index workload: ${source}, block size 64, 16,384-block LRU per worker`, rows);
writeResult('index', { parameters: { source, blockSize: 64, workerCapacityBlocks: 16_384, batch: 512 }, results, table: rows });
