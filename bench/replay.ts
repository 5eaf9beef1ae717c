/**
 * Replay: the conversation trace (or a generated one) through `replay` with the kv and
 * round-robin policies, 16 workers, block size 64, on each backend. Target: the whole
 * comparison under 60 s of wall time with the native backend.
 */

import { replay } from '../ts/index.js';
import { fmt, printTable, QUICK, writeResult } from './common.js';
import { benchTrace } from './index-workload.js';

const { trace, source } = benchTrace(QUICK ? 800 : undefined);
const results: Record<string, unknown> = {};
const rows: Array<Record<string, string | number>> = [];
for (const backend of ['native', 'js'] as const) {
  const t0 = performance.now();
  const report = await replay({ trace, policies: ['kv', 'round-robin'], workers: 16, blockSize: 64, backend });
  const wall = (performance.now() - t0) / 1000;
  results[backend] = {
    wallSeconds: wall,
    policies: report.policies.map(({ cdf: _cdf, workers: _w, ...p }) => p),
    upperBoundHitRatio: report.trace.upperBoundHitRatio,
  };
  for (const p of report.policies) {
    rows.push({
      backend,
      policy: p.name,
      'wall s (both policies)': fmt(wall, 1),
      'policy wall s': fmt(p.wallSeconds, 1),
      'sim s / wall s': fmt(p.simSecondsPerWallSecond, 0),
      'TTFT mean ms': fmt(p.ttftMs.mean, 1),
      'hit ratio': `${fmt(100 * p.hitRatio, 1)}%`,
    });
  }
}
printTable(`replay --compare kv,round-robin: ${source}, 16 workers, block size 64`, rows);
writeResult('replay', { parameters: { source, workers: 16, blockSize: 64, policies: ['kv', 'round-robin'] }, results, table: rows });
