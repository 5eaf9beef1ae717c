/**
 * What `bench:vs-dynamo` and `bench:vs-dynamo-instructions` share: building the comparison's
 * binary (`bench/vs-dynamo`, a separate cargo workspace depending on `dynamo-kv-router =
 * "=1.6.1"`) and the index workloads both systems replay.
 */

import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { QUICK, RESULTS, ROOT } from './common.js';
import { benchTrace, buildWorkload, CHURN_CAPACITY, churnTrace, writeWorkload } from './index-workload.js';

/** Builds the comparison's binary (the first build fetches and compiles Dynamo and tokio: minutes on 2 cores) and returns its path. */
export function buildVsDynamo(): string {
  const manifest = join(ROOT, 'bench', 'vs-dynamo', 'Cargo.toml');
  console.log('building bench/vs-dynamo (the first build compiles dynamo-kv-router 1.6.1 and tokio: minutes)…');
  execFileSync('cargo', ['build', '--release', '--manifest-path', manifest], { stdio: 'inherit' });
  return join(ROOT, 'bench', 'vs-dynamo', 'target', 'release', 'kvroute-vs-dynamo');
}

export interface IndexWorkloadFile {
  name: string;
  file: string;
  /** Where the workload's requests come from (the trace's path, or "synthetic"). */
  source: string;
}

/**
 * The index workloads, each written to `bench/results/vs-dynamo-index-<name>.bin` when it is
 * needed: the `bench:index` workload (the conversation trace, or a generated one of its shape)
 * at W = 16 and W = 256, and the synthetic churn workload at W = 64.
 */
export function* indexWorkloadFiles(): Generator<IndexWorkloadFile> {
  mkdirSync(RESULTS, { recursive: true });
  const indexTrace = benchTrace(QUICK ? 1500 : undefined);
  const workloads = [
    { name: 'W=16', source: indexTrace.source, build: () => buildWorkload(indexTrace.trace, 16) },
    { name: 'W=256', source: indexTrace.source, build: () => buildWorkload(indexTrace.trace, 256) },
    {
      name: 'churn W=64',
      source: 'synthetic',
      build: () => buildWorkload(churnTrace(QUICK ? 4000 : 40_000), 64, 42, CHURN_CAPACITY),
    },
  ];
  for (const { name, source, build } of workloads) {
    const file = join(RESULTS, `vs-dynamo-index-${name.replace(/[^a-z0-9]+/gi, '-')}.bin`);
    writeWorkload(file, build());
    yield { name, file, source };
  }
}
