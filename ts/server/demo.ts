/**
 * `kvroute demo` (`npm start`): the whole thing live on 127.0.0.1. Four mock vLLM workers with
 * real KV events, a gateway in front, a short load from a trace (the built-in workload unless
 * `--trace` is given) streamed through it with KV-aware routing, then the same load through a
 * round-robin gateway over fresh workers, and a side-by-side table of what the clients and the
 * engines measured, written to `report.html` too.
 * @internal
 * @module
 */

import { writeFileSync } from 'node:fs';
import { request } from 'undici';
import { type Flags, helpText, parseCommand, UsageError } from '../cli-args.js';
import { startMockWorker } from '../mock-worker/worker.js';
import { generateTrace } from '../replay/generate.js';
import { loadTrace, synthesizeTokens, type Trace } from '../replay/trace.js';
import type { Selector } from '../router/select.js';
import { createGateway } from './gateway.js';

const FLAGS: Flags = {
  trace: { kind: 'string', value: 'file', help: 'a Mooncake-style JSONL trace', default: 'the built-in workload' },
  requests: { kind: 'number', help: 'requests sent per policy', default: '200' },
  speedup: {
    kind: 'number',
    help: 'divides engine durations and arrival gaps alike (higher runs out of CPU on small machines)',
    default: '5',
  },
  'max-output': { kind: 'number', help: "caps each request's output tokens", default: '32' },
  html: { kind: 'string', value: 'file', help: 'the HTML report', default: 'report.html' },
};
const USAGE = helpText(
  'kvroute demo [options]',
  'Runs 4 mock workers behind a kvroute gateway, sends a trace through it with KV-aware routing and then\nwith round robin, and prints what the clients (TTFT) and the engines (prefix-cache hits) measured.',
  FLAGS,
);

interface RunResult {
  policy: string;
  requests: number;
  failed: number;
  ttftMeanMs: number;
  ttftP50Ms: number;
  ttftP99Ms: number;
  hitRatio: number;
  requestsPerSec: number;
}

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

async function runPolicy(trace: Trace, policy: 'kv' | 'round-robin', speedup: number, maxOutput: number): Promise<RunResult> {
  const workers = await Promise.all(
    Array.from({ length: 4 }, () =>
      startMockWorker({ port: 0, kvEvents: 'tcp://127.0.0.1:0', replay: 'tcp://127.0.0.1:0', blockSize: 64, speedup }),
    ),
  );
  let turn = 0;
  const roundRobin: Selector = (candidates) => turn++ % candidates.length;
  const gateway = createGateway({
    blockSize: 64,
    logLevel: false,
    router: policy === 'round-robin' ? { selector: roundRobin } : {},
    workers: workers.map((w, i) => ({ id: i + 1, url: w.url, kvEvents: w.kvEventsEndpoints, replay: w.replayEndpoints })),
  });
  try {
    const { url } = await gateway.listen();
    await new Promise((r) => setTimeout(r, 300));
    const ttfts: number[] = [];
    let failed = 0;
    const start = performance.now();
    const t0 = trace.requests[0]?.timestampMs ?? 0;
    await Promise.all(
      trace.requests.map(async (req) => {
        const due = (req.timestampMs - t0) / speedup;
        const wait = due - (performance.now() - start);
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        const sent = performance.now();
        const body = JSON.stringify({
          prompt: Array.from(synthesizeTokens(req, trace.traceBlockSize)),
          max_tokens: Math.min(maxOutput, req.outputLength),
          stream: true,
        });
        try {
          const res = await request(`${url}/v1/completions`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
          let first = true;
          for await (const _chunk of res.body) {
            if (first) ttfts.push(performance.now() - sent);
            first = false;
          }
          if (res.statusCode !== 200) failed++;
        } catch {
          failed++;
        }
      }),
    );
    const seconds = (performance.now() - start) / 1000;
    let queries = 0;
    let hits = 0;
    for (const w of workers) {
      queries += w.stats().prefixQueries;
      hits += w.stats().prefixHits;
    }
    ttfts.sort((a, b) => a - b);
    return {
      policy,
      requests: trace.requests.length,
      failed,
      ttftMeanMs: ttfts.reduce((a, b) => a + b, 0) / Math.max(1, ttfts.length),
      ttftP50Ms: quantile(ttfts, 0.5),
      ttftP99Ms: quantile(ttfts, 0.99),
      hitRatio: queries === 0 ? 0 : hits / queries,
      requestsPerSec: trace.requests.length / seconds,
    };
  } finally {
    await gateway.close();
    await Promise.all(workers.map((w) => w.close()));
  }
}

const ROWS: [string, (r: RunResult) => string][] = [
  ['requests (failed)', (r) => `${r.requests} (${r.failed})`],
  ['TTFT mean ms', (r) => r.ttftMeanMs.toFixed(1)],
  ['TTFT p50 ms', (r) => r.ttftP50Ms.toFixed(1)],
  ['TTFT p99 ms', (r) => r.ttftP99Ms.toFixed(1)],
  ['prefix-cache hit ratio (engines)', (r) => `${(r.hitRatio * 100).toFixed(1)}%`],
  ['requests/s', (r) => r.requestsPerSec.toFixed(1)],
];

function table(results: RunResult[]): string {
  const head = ['', ...results.map((r) => r.policy)];
  const rows = ROWS.map(([label, f]) => [label, ...results.map(f)]);
  const widths = head.map((_, c) => Math.max(...[head, ...rows].map((row) => row[c].length)));
  return [head, ...rows]
    .map((row) => row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))).join('  '))
    .join('\n');
}

function html(results: RunResult[], source: string, speedup: number): string {
  const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const cells = ROWS.map(([label, f]) => `<tr><th>${esc(label)}</th>${results.map((r) => `<td>${esc(f(r))}</td>`).join('')}</tr>`).join(
    '\n',
  );
  return `<!doctype html><html lang="en"><meta charset="utf-8"><title>kvroute demo</title>
<style>body{font-family:system-ui,sans-serif;margin:2rem}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3rem .8rem;text-align:right}th{text-align:left}</style>
<h1>kvroute demo: 4 mock workers behind the gateway</h1>
<p>${esc(source)}; engines and arrivals sped up ${speedup}×. TTFT is measured by the clients through the gateway; hit ratio by the engines.</p>
<table><tr><th></th>${results.map((r) => `<th>${esc(r.policy)}</th>`).join('')}</tr>
${cells}</table></html>\n`;
}

export async function runDemo(argv: string[]): Promise<number> {
  const { positional, values: v, help } = parseCommand(argv, FLAGS, USAGE);
  if (help) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (positional.length > 0) throw new UsageError('demo takes no positional arguments', USAGE);
  const count = (v.requests as number | undefined) ?? 200;
  const speedup = (v.speedup as number | undefined) ?? 5;
  const maxOutput = (v['max-output'] as number | undefined) ?? 32;
  if (!(count >= 1 && speedup > 0 && maxOutput >= 1))
    throw new UsageError('--requests, --speedup and --max-output must be positive', USAGE);
  const full = v.trace === undefined ? generateTrace({ requests: count, seed: 1 }) : loadTrace(String(v.trace));
  const trace: Trace = { ...full, requests: full.requests.slice(0, count) };
  const source =
    v.trace === undefined
      ? `built-in workload, ${trace.requests.length} requests`
      : `${String(v.trace)}, first ${trace.requests.length} requests`;
  process.stdout.write(`kvroute demo: ${source}, speedup ${speedup}\n`);
  const results: RunResult[] = [];
  for (const policy of ['kv', 'round-robin'] as const) {
    process.stdout.write(`  running ${policy}…\n`);
    results.push(await runPolicy(trace, policy, speedup, maxOutput));
  }
  process.stdout.write(`${table(results)}\n`);
  const out = String(v.html ?? 'report.html');
  writeFileSync(out, html(results, source, speedup));
  process.stdout.write(`wrote ${out}\n`);
  return 0;
}
