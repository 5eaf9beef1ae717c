/**
 * The mock worker benchmark: one `kvroute mock-worker` process (one JavaScript thread) at
 * `--speedup 100` with KV events on, driven by this process over keep-alive HTTP with N
 * concurrent clients sending short prompts for 16-token streamed completions. Reports streamed
 * requests/s, latency percentiles, and the KV-event batches the worker published, received by a
 * kvroute source in this process (publishing must keep up: no gaps).
 * Goal: ≥ 1,000 streamed requests/s.
 */

import { spawn } from 'node:child_process';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { KvIndex } from '../ts/index.js';
import { closedLoop, fmt, percentile, printTable, QUICK, ROOT, sortedCopy, writeResult } from './common.js';

const SECONDS = QUICK ? 2 : 10;
const CLIENTS = 64;

async function startWorker(): Promise<{ url: string; events: string; replay: string; stop: () => void }> {
  // Port 0 everywhere: the worker binds what the OS gives and prints it. (A random port could
  // collide with one in use, and the bench then failed with EADDRINUSE.)
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(ROOT, 'ts', 'bin.ts'),
      'mock-worker',
      '--port',
      '0',
      '--kv-events',
      'tcp://127.0.0.1:0',
      '--replay',
      'tcp://127.0.0.1:0',
      '--speedup',
      '100',
      '--block-size',
      '16',
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      if (out.includes('\n')) resolve(out);
    });
    child.on('exit', (code) => reject(new Error(`mock worker exited with ${code}`)));
  });
  const endpoint = (re: RegExp) => {
    const found = re.exec(line)?.[1];
    if (!found) throw new Error(`unexpected mock worker banner: ${line}`);
    return found;
  };
  const url = endpoint(/(http:\/\/\S+?),/);
  const events = endpoint(/KV events (tcp:\/\/\S+?),/);
  const replay = endpoint(/replay (tcp:\/\/\S+)/);
  return { url, events, replay, stop: () => child.kill('SIGTERM') };
}

const agent = new Agent({ keepAlive: true, maxSockets: CLIENTS });

function streamed(url: string, prompt: string): Promise<number> {
  const t0 = performance.now();
  const body = JSON.stringify({ prompt, max_tokens: 16, stream: true });
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/v1/completions`,
      { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        let tail = '';
        res.on('data', (d: Buffer) => {
          tail = (tail + d.toString()).slice(-32);
        });
        res.on('end', () => (tail.includes('[DONE]') ? resolve(performance.now() - t0) : reject(new Error('stream ended without [DONE]'))));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const w = await startWorker();
const index = new KvIndex({ blockSize: 16 });
const src = index.subscribe({ workerId: 1, endpoint: w.events, replayEndpoint: w.replay });
await new Promise((r) => setTimeout(r, 300));
const latencies: number[] = [];
let n = 0;
const seconds = await closedLoop(CLIENTS, SECONDS, async (c) => {
  // Short prompts: a shared 48-byte system part and a unique question.
  latencies.push(await streamed(w.url, `You are a helpful assistant. Answer briefly now. Question ${c}-${n++}?`));
});
await new Promise((r) => setTimeout(r, 500));
const r = src.stats().ranks[0];
const sorted = sortedCopy(latencies);
const figures = {
  requests: latencies.length,
  seconds,
  streamedRequestsPerSec: latencies.length / seconds,
  p50ms: percentile(sorted, 50),
  p99ms: percentile(sorted, 99),
  eventBatchesReceived: r.batches,
  eventGaps: r.gaps,
  sourceState: r.state,
};
w.stop();
index.close();
printTable(`mock worker: ${CLIENTS} clients, 16-token streamed completions, --speedup 100, ${SECONDS} s`, [
  {
    'requests/s': fmt(figures.streamedRequestsPerSec, 0),
    'p50 ms': fmt(figures.p50ms),
    'p99 ms': fmt(figures.p99ms),
    'KV batches received': figures.eventBatchesReceived,
    gaps: figures.eventGaps,
    'source state': figures.sourceState,
  },
]);
writeResult('mock-worker', { parameters: { clients: CLIENTS, seconds: SECONDS, speedup: 100, maxTokens: 16 }, figures });
agent.destroy();
