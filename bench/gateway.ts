/**
 * The gateway benchmark: what `kvroute serve` adds over calling the workers directly.
 * 16 mock workers (`--speedup 1000`, one child process), one `kvroute serve` process in front of
 * them with the mock model's tokenizer.json as its local tokenizer, and this process as the
 * load generator (keep-alive undici pools). Two phases, each run direct and through the gateway
 * back to back:
 * - throughput: 64 concurrent clients, short non-streaming completions (1 output token); the
 *   same prompts as SGLang's `/generate` (`text`, `max_new_tokens` 1), direct and through the gateway;
 *   and as `/generate` batches of 8 such prompts (`text` a list), which the gateway tokenizes
 *   prompt by prompt and routes by all of them (`batchPrompts`);
 * - added latency: one client, a 4,096-token prompt (4,096 bytes of text for the byte
 *   tokenizer), non-streaming, 1 output token, its last 8 characters a request counter (so the
 *   gateway's tokenizer cache misses and the workers' prefix caches hit all but the last block);
 *   also with the prompt sent as token ids (no tokenization at the gateway), and one text
 *   repeated unchanged (the tokenizer cache's hit).
 * - Responses API conversations: 64 clients, each a chain of 4 turns (a new response, then 3
 *   follow-ups by `previous_response_id`, 1 output token each; every turn's input text unique):
 *   direct, a client keeps its
 *   conversation on the worker that answered its first turn; through the gateway, the gateway
 *   sends each follow-up there.
 * - disaggregated: a second gateway over the same workers, half of them prefill and half decode,
 *   the short requests again (each one a prefill leg and a decode leg);
 * - TensorRT-LLM's hand-over: a third gateway over the same workers (`--disaggregation-protocol
 *   trtllm`), the short requests again;
 * - SGLang's protocol: a fourth gateway over a second fleet of 16 in SGLang's prefill and decode
 *   modes (`--disaggregation-protocol sglang`), the short requests again (both legs at once).
 * Goals (issue 13): ≥ 3,000 short requests/s; < 1 ms p99 added for the 4,096-token prompt.
 */

import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mockTokenize, writeMockTokenizer } from '../ts/index.js';
import { closedLoop, fmt, percentile, poolsOf, printTable, QUICK, ROOT, sortedCopy, spawnLine, timedPost, writeResult } from './common.js';

const WORKERS = 16;
const SECONDS = QUICK ? 1.5 : 8;
const CLIENTS = 64;
const LATENCY_REQUESTS = QUICK ? 50 : 400;
const TURNS = 4;

const fleet = await spawnLine([join(ROOT, 'bench', 'gateway-fleet.ts'), String(WORKERS)], /^(\[.*\])\n/);
type FleetWorker = { url: string; kvEvents: string; replay: string; bootstrapPort?: number };
const workers = JSON.parse(fleet.match[1]) as FleetWorker[];
const tokenizerDir = mkdtempSync(join(tmpdir(), 'kvroute-bench-tok-'));
const tokenizer = writeMockTokenizer(tokenizerDir);
/** A `kvroute serve` over `over`; `role(i)` is worker i's role (a disaggregated gateway's). */
function startServe(role: (i: number) => string | undefined, over: FleetWorker[] = workers, flags: string[] = []) {
  return spawnLine(
    [
      join(ROOT, 'ts', 'bin.ts'),
      'serve',
      '--port',
      '0',
      '--block-size',
      '16',
      '--log-level',
      'warn',
      '--tokenizer',
      tokenizer,
      ...over.flatMap((w, i) => [
        '--worker',
        `id=${i + 1},url=${w.url},kv-events=${w.kvEvents},replay=${w.replay}${role(i) ? `,role=${role(i)}` : ''}${
          role(i) === 'prefill' && w.bootstrapPort !== undefined ? `,bootstrap-port=${w.bootstrapPort}` : ''
        }`,
      ]),
      ...flags,
      // More `kvroute serve` flags, space-separated, for an A/B of one option (e.g. --allowed-origins []).
      ...(process.env.BENCH_GATEWAY_ARGS ?? '').split(' ').filter(Boolean),
    ],
    /proxy (http:\/\/127\.0\.0\.1:\d+)/,
    // e.g. --cpu-prof to profile the gateway process.
    (process.env.BENCH_GATEWAY_NODE_ARGS ?? '').split(' ').filter(Boolean),
  );
}
const serve = await startServe(() => undefined);
const gatewayUrl = serve.match[1];
await new Promise((r) => setTimeout(r, 500));

const { pool, close: closePools } = poolsOf(CLIENTS);

async function completion(url: string, prompt: string | number[]): Promise<number> {
  return (await timedPost(pool(url), url, '/v1/completions', { prompt, max_tokens: 1 })).ms;
}

/** One Responses API turn; returns the response's id. */
async function respond(url: string, input: string, previous: string | undefined): Promise<string> {
  const body = { input, max_output_tokens: 1, ...(previous === undefined ? {} : { previous_response_id: previous }) };
  return (JSON.parse((await timedPost(pool(url), url, '/v1/responses', body)).text) as { id: string }).id;
}

let conversations = 0;

/** Responses API conversations of `TURNS` turns for SECONDS; `target(c)` is client c's URL for its next conversation. */
async function converse(target: () => string): Promise<number> {
  let n = 0;
  const seconds = await closedLoop(CLIENTS, SECONDS, async (c) => {
    const url = target();
    const conversation = conversations++;
    let previous: string | undefined;
    for (let turn = 0; turn < TURNS; turn++) {
      previous = await respond(url, `Client ${c}, conversation ${conversation}, turn ${turn}: and then what happened?`, previous);
      n++;
    }
  });
  return n / seconds;
}

async function throughput(target: (i: number) => string, send = completion): Promise<number> {
  let n = 0;
  const seconds = await closedLoop(CLIENTS, SECONDS, async (c) => {
    await send(target(n), `Short question ${c}-${n++}?`);
  });
  return n / seconds;
}

/** One SGLang `/generate` of one output token. */
async function generate(url: string, text: string | number[]): Promise<number> {
  return (await timedPost(pool(url), url, '/generate', { text, sampling_params: { max_new_tokens: 1 } })).ms;
}

/** Prompts in one `/generate` batch of the batch phase. */
const BATCH = 8;

/** One SGLang `/generate` batch of `BATCH` prompts, one output token each. */
async function generateBatch(url: string, text: string | number[]): Promise<number> {
  const prompts = Array.from({ length: BATCH }, (_, j) => `${text} (part ${j})`);
  return (await timedPost(pool(url), url, '/generate', { text: prompts, sampling_params: { max_new_tokens: 1 } })).ms;
}

let sent = 0;

/** Latencies of one client's requests; `prompt(n)` is the n-th request's prompt (n unique over the run). */
async function latencies(url: string, prompt: (n: number) => string | number[]): Promise<Float64Array> {
  for (let i = 0; i < 20; i++) await completion(url, prompt(sent++));
  const out: number[] = [];
  for (let i = 0; i < LATENCY_REQUESTS; i++) out.push(await completion(url, prompt(sent++)));
  return sortedCopy(out);
}

/** CPU seconds a process used so far (Linux: utime + stime of /proc/<pid>/stat, 100 ticks/s). */
function cpuSeconds(pid: number | undefined): number {
  if (pid === undefined || !existsSync(`/proc/${pid}/stat`)) return Number.NaN;
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * A phase's rate through a gateway and per second of the gateway's CPU: what one gateway core
 * sustains when it is not sharing the machine's two cores with the load generator and the workers.
 */
async function gatewayRate(pid: number | undefined, run: () => Promise<number>): Promise<{ rps: number; perCpu: number; cpu: number }> {
  const cpuBefore = cpuSeconds(pid);
  const started = performance.now();
  const rps = await run();
  const cpu = cpuSeconds(pid) - cpuBefore;
  return { rps, perCpu: (rps * ((performance.now() - started) / 1000)) / cpu, cpu };
}

let rr = 0;
const directRps = await throughput(() => workers[rr++ % WORKERS].url);
const { rps: gatewayRps, perCpu: perCoreRps, cpu: gatewayCpu } = await gatewayRate(serve.child.pid, () => throughput(() => gatewayUrl));
const directGenerateRps = await throughput(() => workers[rr++ % WORKERS].url, generate);
const { rps: gatewayGenerateRps, perCpu: generatePerCoreRps } = await gatewayRate(serve.child.pid, () =>
  throughput(() => gatewayUrl, generate),
);
const directBatchRps = await throughput(() => workers[rr++ % WORKERS].url, generateBatch);
const { rps: gatewayBatchRps, perCpu: batchPerCoreRps } = await gatewayRate(serve.child.pid, () =>
  throughput(() => gatewayUrl, generateBatch),
);
const directResponsesRps = await converse(() => workers[rr++ % WORKERS].url);
const { rps: gatewayResponsesRps, perCpu: responsesPerCoreRps } = await gatewayRate(serve.child.pid, () => converse(() => gatewayUrl));
const text = 'The quick brown fox jumps over the lazy dog. '.repeat(92).slice(0, 4096);
const ids = mockTokenize(text);
/** The 4,096-byte text with its last 8 characters the request's number. */
const numbered = (n: number) => text.slice(0, 4096 - 8) + String(n).padStart(8, '0');
// Direct calls go to one worker, which then caches the prompt, as the gateway's choice does.
const direct = await latencies(workers[0].url, numbered);
const viaText = await latencies(gatewayUrl, numbered);
const viaIds = await latencies(gatewayUrl, (n) => mockTokenize(numbered(n)));
const viaRepeatedText = await latencies(gatewayUrl, () => text);
// Disaggregated: a second gateway over the same workers, the first half prefill, the rest decode,
// so every short request runs in two legs (a prefill answer read whole, then the decode).
serve.child.kill('SIGTERM');
const pd = await startServe((i) => (i < WORKERS / 2 ? 'prefill' : 'decode'));
const pdUrl = pd.match[1];
await new Promise((r) => setTimeout(r, 500));
const { rps: pdRps, perCpu: pdPerCoreRps } = await gatewayRate(pd.child.pid, () => throughput(() => pdUrl));
pd.child.kill('SIGTERM');
// TensorRT-LLM's hand-over: the same two steps with its parameters, over the same workers.
const trt = await startServe((i) => (i < WORKERS / 2 ? 'prefill' : 'decode'), workers, ['--disaggregation-protocol', 'trtllm']);
await new Promise((r) => setTimeout(r, 500));
const { rps: trtRps, perCpu: trtPerCoreRps } = await gatewayRate(trt.child.pid, () => throughput(() => trt.match[1]));
trt.child.kill('SIGTERM');
// SGLang's protocol: a fleet in its disaggregation modes, both legs of each request sent at once.
const sglangFleet = await spawnLine([join(ROOT, 'bench', 'gateway-fleet.ts'), String(WORKERS), '1000', 'sglang'], /^(\[.*\])\n/);
const sglangWorkers = JSON.parse(sglangFleet.match[1]) as FleetWorker[];
const sg = await startServe((i) => (i < WORKERS / 2 ? 'prefill' : 'decode'), sglangWorkers, ['--disaggregation-protocol', 'sglang']);
const sgUrl = sg.match[1];
await new Promise((r) => setTimeout(r, 500));
const { rps: sgRps, perCpu: sgPerCoreRps } = await gatewayRate(sg.child.pid, () => throughput(() => sgUrl));
sg.child.kill('SIGTERM');
sglangFleet.child.kill('SIGTERM');
const added = (s: Float64Array, p: number) => percentile(s, p) - percentile(direct, p);
const figures = {
  directRequestsPerSec: directRps,
  gatewayRequestsPerSec: gatewayRps,
  gatewayCpuSeconds: gatewayCpu,
  gatewayRequestsPerCpuSecond: perCoreRps,
  directGeneratePerSec: directGenerateRps,
  gatewayGeneratePerSec: gatewayGenerateRps,
  gatewayGeneratePerCpuSecond: generatePerCoreRps,
  directGenerateBatchesPerSec: directBatchRps,
  gatewayGenerateBatchesPerSec: gatewayBatchRps,
  gatewayGenerateBatchesPerCpuSecond: batchPerCoreRps,
  directResponsesPerSec: directResponsesRps,
  gatewayResponsesPerSec: gatewayResponsesRps,
  gatewayResponsesPerCpuSecond: responsesPerCoreRps,
  disaggregatedRequestsPerSec: pdRps,
  disaggregatedRequestsPerCpuSecond: pdPerCoreRps,
  trtllmDisaggregatedRequestsPerSec: trtRps,
  trtllmDisaggregatedRequestsPerCpuSecond: trtPerCoreRps,
  sglangDisaggregatedRequestsPerSec: sgRps,
  sglangDisaggregatedRequestsPerCpuSecond: sgPerCoreRps,
  directP50ms: percentile(direct, 50),
  directP99ms: percentile(direct, 99),
  addedP50msLocalTokenizer: added(viaText, 50),
  addedP99msLocalTokenizer: added(viaText, 99),
  addedP50msTokenIds: added(viaIds, 50),
  addedP99msTokenIds: added(viaIds, 99),
  addedP50msRepeatedText: added(viaRepeatedText, 50),
  addedP99msRepeatedText: added(viaRepeatedText, 99),
};
printTable(`gateway: ${WORKERS} mock workers, short requests with ${CLIENTS} clients for ${SECONDS} s`, [
  { path: 'direct (client round robin)', 'requests/s': fmt(directRps, 0) },
  { path: 'through kvroute serve', 'requests/s': fmt(gatewayRps, 0) },
  { path: 'kvroute serve, per second of its CPU', 'requests/s': fmt(perCoreRps, 0) },
  { path: "SGLang's /generate: direct (client round robin)", 'requests/s': fmt(directGenerateRps, 0) },
  { path: "SGLang's /generate: through kvroute serve", 'requests/s': fmt(gatewayGenerateRps, 0) },
  { path: "SGLang's /generate: kvroute serve, per second of its CPU", 'requests/s': fmt(generatePerCoreRps, 0) },
  { path: `SGLang's /generate, batches of ${BATCH}: direct (client round robin)`, 'requests/s': fmt(directBatchRps, 0) },
  { path: `SGLang's /generate, batches of ${BATCH}: through kvroute serve`, 'requests/s': fmt(gatewayBatchRps, 0) },
  { path: `SGLang's /generate, batches of ${BATCH}: kvroute serve, per second of its CPU`, 'requests/s': fmt(batchPerCoreRps, 0) },
]);
printTable(`gateway: Responses API conversations of ${TURNS} turns (3 by previous_response_id), ${CLIENTS} clients for ${SECONDS} s`, [
  { path: 'direct (each conversation kept on its worker)', 'requests/s': fmt(directResponsesRps, 0) },
  { path: 'through kvroute serve', 'requests/s': fmt(gatewayResponsesRps, 0) },
  { path: 'kvroute serve, per second of its CPU', 'requests/s': fmt(responsesPerCoreRps, 0) },
]);
printTable(
  `gateway: disaggregated, ${WORKERS / 2} prefill and ${WORKERS / 2} decode workers, short requests with ${CLIENTS} clients for ${SECONDS} s`,
  [
    { path: 'through kvroute serve (two legs each)', 'requests/s': fmt(pdRps, 0) },
    { path: 'kvroute serve, per second of its CPU', 'requests/s': fmt(pdPerCoreRps, 0) },
    { path: "TensorRT-LLM's hand-over: through kvroute serve (two legs each)", 'requests/s': fmt(trtRps, 0) },
    { path: "TensorRT-LLM's hand-over: kvroute serve, per second of its CPU", 'requests/s': fmt(trtPerCoreRps, 0) },
    { path: "SGLang's protocol: through kvroute serve (both legs at once)", 'requests/s': fmt(sgRps, 0) },
    { path: "SGLang's protocol: kvroute serve, per second of its CPU", 'requests/s': fmt(sgPerCoreRps, 0) },
  ],
);
printTable(`gateway: added latency, 4,096-token prompt, one client, ${LATENCY_REQUESTS} requests`, [
  { prompt: 'direct (baseline)', 'p50 ms': fmt(figures.directP50ms, 3), 'p99 ms': fmt(figures.directP99ms, 3) },
  {
    prompt: 'text, local tokenizer.json: added',
    'p50 ms': fmt(figures.addedP50msLocalTokenizer, 3),
    'p99 ms': fmt(figures.addedP99msLocalTokenizer, 3),
  },
  { prompt: 'token ids: added', 'p50 ms': fmt(figures.addedP50msTokenIds, 3), 'p99 ms': fmt(figures.addedP99msTokenIds, 3) },
  {
    prompt: 'one text repeated (tokenizer cache): added',
    'p50 ms': fmt(figures.addedP50msRepeatedText, 3),
    'p99 ms': fmt(figures.addedP99msRepeatedText, 3),
  },
]);
writeResult('gateway', {
  parameters: { workers: WORKERS, clients: CLIENTS, seconds: SECONDS, latencyRequests: LATENCY_REQUESTS, promptTokens: ids.length },
  figures,
});
await closePools();
fleet.child.kill('SIGTERM');
rmSync(tokenizerDir, { recursive: true, force: true });
