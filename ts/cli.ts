/**
 * The `kvroute` command: `replay` and `gen-trace`.
 * @internal
 * @module
 */

import { writeFileSync } from 'node:fs';
import { basename, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { BackendName } from './backend-types.js';
import { parseArgs, UsageError } from './cli-args.js';
import { KvRouteError } from './errors.js';
import { runMockWorker } from './mock-worker/cli.js';
import { generateTrace, traceToJsonl } from './replay/generate.js';
import { renderHtml } from './replay/html.js';
import { type ReplayOptions, type ReplayPolicy, replay } from './replay/replay.js';
import type { PolicyReport, ReplayReport } from './replay/report.js';
import type { Selector } from './router/select.js';

const USAGE = `usage:
  kvroute replay [trace.jsonl] [--workers 16] [--router kv|round-robin|random|<module>]
                 [--compare kv,round-robin,random] [--block-size 64] [--trace-block-size 512]
                 [--num-gpu-blocks 16384] [--max-num-seqs 256] [--max-num-batched-tokens 8192]
                 [--dp-size 1] [--speedup 1] [--arrival-speedup 1] [--router-config '{"overlapScoreWeight":1}']
                 [--limit N] [--seed 42] [--report out.json] [--html out.html] [--backend native|js]
  kvroute gen-trace [--requests 2000] [--rate 4] [--prefix-groups 20] [--shared-prefix-blocks 8]
                    [--turns 4] [--seed 1] > trace.jsonl
  kvroute mock-worker [--port 8001] [--host 127.0.0.1] [--kv-events tcp://*:5557] [--replay tcp://*:5558]
                      [--dp-size 1] [--block-size 16] [--num-gpu-blocks 16384] [--max-num-seqs 256]
                      [--max-num-batched-tokens 8192] [--speedup 1] [--model mock-model]
                      [--wire vllm-0.33|vllm-0.11|sglang] [--seed 1] [--topic ''] [--faults restart@5000,...]

Without a trace, replay runs on the built-in generated workload (what gen-trace prints).
A <module> exports a selector (default export or 'selector'): (candidates, req) => index.`;

async function loadPolicy(spec: string): Promise<ReplayPolicy> {
  if (spec === 'kv' || spec === 'round-robin' || spec === 'random') return spec;
  const mod = (await import(pathToFileURL(resolve(spec)).href)) as { default?: unknown; selector?: unknown };
  const selector = typeof mod.default === 'function' ? mod.default : mod.selector;
  if (typeof selector !== 'function') throw new UsageError(`${spec} exports no selector function (default export or 'selector')`);
  return { name: basename(spec), selector: selector as Selector };
}

function progressBar(): ((policy: string, done: number, total: number) => void) | undefined {
  if (!process.stderr.isTTY) return undefined;
  return (policy, done, total) => {
    const width = 30;
    const filled = Math.round((done / total) * width);
    process.stderr.write(
      `\r${policy.padEnd(12)} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total}${done === total ? '\n' : ''}`,
    );
  };
}

const f = (n: number, digits = 1) => n.toFixed(digits);

function table(report: ReplayReport): string {
  const p = report.policies;
  const rows: Array<[string, (x: PolicyReport) => string]> = [
    ['requests', (x) => String(x.requests)],
    ['TTFT mean ms', (x) => f(x.ttftMs.mean)],
    ['TTFT p50 ms', (x) => f(x.ttftMs.p50)],
    ['TTFT p99 ms', (x) => f(x.ttftMs.p99)],
    ['ITL mean ms', (x) => f(x.itlMs.mean, 2)],
    ['ITL p99 ms', (x) => f(x.itlMs.p99, 2)],
    ['E2E mean ms', (x) => f(x.e2eMs.mean)],
    ['E2E p99 ms', (x) => f(x.e2eMs.p99)],
    ['hit ratio', (x) => `${f(100 * x.hitRatio)}%`],
    ['requests/s', (x) => f(x.throughput.requestsPerSec, 2)],
    ['output tokens/s', (x) => f(x.throughput.outputTokensPerSec, 0)],
    ['preemptions', (x) => String(x.preemptions)],
    ['simulated s', (x) => f(x.simulatedSeconds)],
    ['wall s', (x) => f(x.wallSeconds, 2)],
    ['sim s / wall s', (x) => f(x.simSecondsPerWallSecond, 0)],
    ['decisions / wall s', (x) => f(x.decisionsPerWallSecond, 0)],
  ];
  const head = ['', ...p.map((x) => x.name)];
  const body = rows.map(([label, get]) => [label, ...p.map(get)]);
  const widths = head.map((_, c) => Math.max(...[head, ...body].map((r) => r[c].length)));
  const line = (r: string[]) => r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))).join('  ');
  const upper = `${f(100 * report.trace.upperBoundHitRatio)}%`;
  return `${report.trace.requests} requests (${report.trace.path ?? 'built-in generated workload'}), ${report.config.workers} workers; hit ratio ceiling ${upper}\n\n${[line(head), ...body.map(line)].join('\n')}\n`;
}

async function runReplay(argv: string[]): Promise<void> {
  const { positional, values: v } = parseArgs(argv, {
    workers: 'number',
    router: 'string',
    compare: 'string',
    'block-size': 'number',
    'trace-block-size': 'number',
    'num-gpu-blocks': 'number',
    'max-num-seqs': 'number',
    'max-num-batched-tokens': 'number',
    'dp-size': 'number',
    speedup: 'number',
    'arrival-speedup': 'number',
    'router-config': 'string',
    limit: 'number',
    seed: 'number',
    report: 'string',
    html: 'string',
    backend: 'string',
  });
  if (positional.length > 1) throw new UsageError('replay takes at most one trace file');
  if (v.router !== undefined && v.compare !== undefined) throw new UsageError('use --router or --compare, not both');
  const specs = v.compare !== undefined ? String(v.compare).split(',').filter(Boolean) : [String(v.router ?? 'kv')];
  let routerConfig: ReplayOptions['routerConfig'];
  if (v['router-config'] !== undefined) {
    try {
      routerConfig = JSON.parse(String(v['router-config']));
    } catch (err) {
      throw new UsageError(`--router-config is not valid JSON: ${(err as Error).message}`);
    }
  }
  const num = (k: string) => v[k] as number | undefined;
  const report = await replay({
    ...(positional[0] ? { trace: positional[0] } : {}),
    policies: await Promise.all(specs.map(loadPolicy)),
    workers: num('workers'),
    blockSize: num('block-size'),
    traceBlockSize: num('trace-block-size'),
    numGpuBlocks: num('num-gpu-blocks'),
    maxNumSeqs: num('max-num-seqs'),
    maxNumBatchedTokens: num('max-num-batched-tokens'),
    dpSize: num('dp-size'),
    speedup: num('speedup'),
    arrivalSpeedup: num('arrival-speedup'),
    limit: num('limit'),
    seed: num('seed'),
    ...(routerConfig ? { routerConfig } : {}),
    ...(v.backend !== undefined ? { backend: v.backend as BackendName } : {}),
    onProgress: progressBar(),
  });
  process.stdout.write(table(report));
  if (v.report !== undefined) writeFileSync(String(v.report), `${JSON.stringify(report, null, 2)}\n`);
  if (v.html !== undefined) writeFileSync(String(v.html), renderHtml(report));
}

function runGenTrace(argv: string[]): void {
  const { positional, values: v } = parseArgs(argv, {
    requests: 'number',
    rate: 'number',
    'prefix-groups': 'number',
    'shared-prefix-blocks': 'number',
    turns: 'number',
    seed: 'number',
  });
  if (positional.length > 0) throw new UsageError('gen-trace takes no positional arguments');
  const trace = generateTrace({
    requests: v.requests as number | undefined,
    rate: v.rate as number | undefined,
    prefixGroups: v['prefix-groups'] as number | undefined,
    sharedPrefixBlocks: v['shared-prefix-blocks'] as number | undefined,
    turns: v.turns as number | undefined,
    seed: v.seed as number | undefined,
  });
  process.stdout.write(traceToJsonl(trace));
}

/** Runs the command line; returns the exit code (0 ok, 1 failure, 2 usage). */
export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command === 'replay') await runReplay(rest);
    else if (command === 'gen-trace') runGenTrace(rest);
    else if (command === 'mock-worker') return await runMockWorker(rest);
    else if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
      process.stdout.write(`${USAGE}\n`);
      return command === undefined ? 2 : 0;
    } else throw new UsageError(`unknown command "${command}"`);
    return 0;
  } catch (err) {
    if (err instanceof UsageError || (err instanceof KvRouteError && err.code === 'ERR_INVALID_ARG')) {
      process.stderr.write(`kvroute: ${err.message}\n${err instanceof UsageError ? `\n${USAGE}\n` : ''}`);
      return 2;
    }
    process.stderr.write(`kvroute: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}
