/**
 * TextTokenizer's prefix cache on both backends: a text whose beginning up to a special token was
 * encoded before encodes only the rest, and its ids are the ids without the cache. The reference
 * model is deliberately simple: the same tokenizer without a cache, encoding every text whole.
 */
import { describe, expect, test } from 'vitest';
import { mockTokenizerJson, TextTokenizer } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { expectKvError } from './helpers/errors.js';
import { Rng } from './helpers/random.js';
import { type ChatTokenizerFixture, chatmlBytes, llama3Chat, metaspaceFirst, wordModel } from './helpers/tokenizer-files.js';

const FIXTURES: [string, () => ChatTokenizerFixture][] = [
  ['ChatML over bytes', chatmlBytes],
  ['Metaspace at the first piece only', metaspaceFirst],
  ['Llama 3 layout', llama3Chat],
];

/** A random text of `n` pieces of the fixture. */
function randomText(rng: Rng, fixture: ChatTokenizerFixture, n: number): string {
  let text = '';
  for (let i = 0; i < n; i++) text += rng.pick(fixture.pieces);
  return text;
}

/** Where the boundary tokens end in `text` (the cuts the cache may reuse). */
function cuts(text: string, fixture: ChatTokenizerFixture): number[] {
  const out: number[] = [];
  for (let at = 0; at < text.length; at++) for (const b of fixture.boundaries) if (text.startsWith(b, at)) out.push(at + b.length);
  return out;
}

/**
 * Prompts as a gateway sees them: conversations growing by a few pieces a turn, new ones
 * starting from one of a few shared beginnings (system prompts), and branches taken from an
 * earlier prompt cut at a boundary or anywhere.
 */
function prompts(rng: Rng, fixture: ChatTokenizerFixture, count: number): string[] {
  const systems = [0, 1, 2].map(() => randomText(rng, fixture, 12));
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const roll = rng.int(10);
    let text: string;
    if (out.length === 0 || roll < 2) text = rng.pick(systems) + randomText(rng, fixture, 1 + rng.int(8));
    else if (roll < 8) text = rng.pick(out) + randomText(rng, fixture, 1 + rng.int(8));
    else {
      const earlier = rng.pick(out);
      const at = roll === 8 ? (rng.pick([0, ...cuts(earlier, fixture)]) as number) : rng.int(earlier.length + 1);
      text = earlier.slice(0, at) + randomText(rng, fixture, rng.int(6));
    }
    out.push(text);
  }
  return out;
}

describe.each(BACKENDS)('TextTokenizer prefix cache (%s)', (backend) => {
  const cached = (json: string, maxBytes = 1 << 20) => new TextTokenizer(json, { backend, prefixCache: { maxBytes } });

  test('a conversation that grows encodes only what it adds, with the same ids', async () => {
    const { json } = chatmlBytes();
    const plain = new TextTokenizer(json, { backend });
    const tokenizer = cached(json);
    const turn1 = '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n';
    const turn2 = `${turn1}hello<|im_end|>\n<|im_start|>user\nmore`;
    const ids1 = await tokenizer.encode(turn1, { addSpecialTokens: false });
    expect(ids1).toEqual(await plain.encode(turn1, { addSpecialTokens: false }));
    expect(ids1.length).toBe(21); // 3 special tokens, 18 bytes
    // Cut after each boundary token: <|im_start|> | user\nhi<|im_end|> | \n<|im_start|> | assistant\n (not cached: no boundary ends it).
    expect(tokenizer.prefixCacheStats()).toMatchObject({
      boundaryTokens: 4,
      hits: 0,
      misses: 1,
      skipped: 0,
      rejected: 0,
      pieces: 3,
      reusedTokens: 0,
    });
    const ids2 = await tokenizer.encode(turn2, { addSpecialTokens: false });
    expect(ids2).toEqual(await plain.encode(turn2, { addSpecialTokens: false }));
    // The three cached pieces (1 + 8 + 2 ids) are reused; "assistant\nhello<|im_end|>" and "\n<|im_start|>" are new pieces.
    expect(tokenizer.prefixCacheStats()).toMatchObject({ hits: 1, misses: 1, pieces: 5, reusedTokens: 11 });
    // With the post-processor's BOS in front, through the same cache.
    const withBos = await tokenizer.encode(turn2);
    expect(withBos).toEqual(await plain.encode(turn2));
    expect(withBos[0]).toBe(262);
    // All five pieces are reused this time: every id but the 9 bytes of the unfinished "user\nmore".
    expect(tokenizer.prefixCacheStats()).toMatchObject({ hits: 2, reusedTokens: 11 + ids2.length - 9 });
    // No boundary token: encoded whole, nothing cached.
    expect(await tokenizer.encode('plain text <|rs|>  x')).toEqual(await plain.encode('plain text <|rs|>  x'));
    expect(tokenizer.prefixCacheStats()).toMatchObject({ skipped: 1, pieces: 5, rejected: 0 });
  });

  test('only added tokens that split a text the same way everywhere are cut after', () => {
    const stats = (json: string) => cached(json).prefixCacheStats()?.boundaryTokens;
    expect(stats(chatmlBytes().json)).toBe(4); // not <|rs|> (rstrip), <|a|> (inside <|a|>b), <|n|> (normalized)
    expect(stats(metaspaceFirst().json)).toBe(3); // not <unk>: the model emits it for other text
    expect(stats(JSON.stringify(mockTokenizerJson()))).toBe(0);
  });

  test.each(FIXTURES)('seeded: the same ids as the tokenizer without a cache (%s)', async (_name, make) => {
    const fixture = make();
    const plain = new TextTokenizer(fixture.json, { backend });
    const tokenizer = cached(fixture.json);
    for (const seed of [1, 2, 3]) {
      const rng = new Rng(seed);
      for (const text of prompts(rng, fixture, 150)) {
        const addSpecialTokens = rng.int(2) === 0;
        expect(await tokenizer.encode(text, { addSpecialTokens }), `${JSON.stringify(text)} ${addSpecialTokens}`).toEqual(
          await plain.encode(text, { addSpecialTokens }),
        );
      }
    }
    const stats = tokenizer.prefixCacheStats();
    expect(stats?.rejected).toBe(0);
    expect(stats?.hits).toBeGreaterThan(150);
    expect(stats?.reusedTokens).toBeGreaterThan(5_000);
  });

  test('long pieces of one length (past what V8 hashes by content) are told apart by their text', async () => {
    const { json } = chatmlBytes();
    const plain = new TextTokenizer(json, { backend });
    const tokenizer = cached(json, 1 << 22);
    const long = (c: string) => `${'a'.repeat(10_000)}${c}${'a'.repeat(10_000)}`; // 20,001 characters
    const text = (c: string, tail: string) => `<|im_start|>${long(c)}<|im_end|>\n${tail}`;
    const encode = async (t: string) =>
      expect(await tokenizer.encode(t, { addSpecialTokens: false })).toEqual(await plain.encode(t, { addSpecialTokens: false }));
    await encode(text('x', 'one'));
    await encode(text('y', 'two')); // same length, another piece: only <|im_start|> is reused
    expect(tokenizer.prefixCacheStats()).toMatchObject({ hits: 1, misses: 1, reusedTokens: 1 });
    await encode(text('x', 'three')); // the first long piece again: 1 + 20,002 ids reused
    await encode(text('y', 'four'));
    expect(tokenizer.prefixCacheStats()).toMatchObject({ hits: 3, reusedTokens: 1 + 2 * 20_003, rejected: 0 });
  });

  test('bounded in bytes: the least recently used pieces go, the ids stay right', async () => {
    const fixture = chatmlBytes();
    const plain = new TextTokenizer(fixture.json, { backend });
    const tokenizer = cached(fixture.json, 4096);
    const rng = new Rng(7);
    let most = 0;
    for (const text of prompts(rng, fixture, 300)) {
      expect(await tokenizer.encode(text)).toEqual(await plain.encode(text));
      const stats = tokenizer.prefixCacheStats();
      expect(stats?.bytes).toBeLessThanOrEqual(4096);
      most = Math.max(most, stats?.pieces ?? 0);
    }
    expect(tokenizer.prefixCacheStats()?.hits).toBeGreaterThan(0);
    expect(most).toBeGreaterThan(5);
    // A conversation outgrowing the whole bound is still encoded right, and leaves the cache within it.
    const long = `<|im_start|>${'long words '.repeat(300)}<|im_end|>`;
    expect(await tokenizer.encode(`${long}\nnext`)).toEqual(await plain.encode(`${long}\nnext`));
    expect(tokenizer.prefixCacheStats()?.bytes).toBeLessThanOrEqual(4096);
  });

  test('concurrent encodes of one growing conversation (long texts, off the thread on native)', async () => {
    const fixture = llama3Chat();
    const plain = new TextTokenizer(fixture.json, { backend });
    const tokenizer = cached(fixture.json);
    const turn = (i: number) => `<|start_header_id|>user<|end_header_id|>\n\n${'the user said '.repeat(40)}${i}<|eot_id|>`;
    const texts: string[] = [];
    let text = '<|begin_of_text|>';
    for (let i = 0; i < 12; i++) {
      text += turn(i);
      texts.push(text);
    }
    const [got, want] = await Promise.all([
      Promise.all(texts.map((t) => tokenizer.encode(t))),
      Promise.all(texts.map((t) => plain.encode(t))),
    ]);
    expect(got).toEqual(want);
    // Sequentially, every later turn reuses the one before it.
    const again = cached(fixture.json);
    for (const t of texts) expect(await again.encode(t)).toEqual(await plain.encode(t));
    expect(again.prefixCacheStats()).toMatchObject({ hits: 11, misses: 1, rejected: 0 });
  });

  test('a chat request through its template reuses the turns before', async () => {
    const fixture = chatmlBytes();
    const chatTemplate =
      "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
    const plain = new TextTokenizer(fixture.json, { backend, chatTemplate });
    const tokenizer = new TextTokenizer(fixture.json, { backend, chatTemplate, prefixCache: { maxBytes: 1 << 20 } });
    const messages = [{ role: 'system', content: 'be brief' }];
    for (let i = 0; i < 5; i++) {
      messages.push({ role: 'user', content: `question ${i}` });
      expect(await tokenizer.encodeChat({ messages })).toEqual(await plain.encodeChat({ messages }));
      messages.push({ role: 'assistant', content: `answer ${i}` });
    }
    expect(tokenizer.prefixCacheStats()).toMatchObject({ hits: 4, misses: 1, rejected: 0 });
  });

  test('a model that cannot encode every text still encodes with its special tokens through the cache', async () => {
    // A word model without an unknown token: words outside its vocabulary cannot be encoded, the cache's probes among them.
    const json = wordModel();
    const plain = new TextTokenizer(json, { backend });
    const tokenizer = cached(json);
    for (const text of ['ab <t> ba', 'ab <t> ba <t> a', 'ab <t> ba <t> a <t> b']) {
      expect(await tokenizer.encode(text)).toEqual(await plain.encode(text));
      expect(await tokenizer.encode(text, { addSpecialTokens: false })).toEqual(await plain.encode(text, { addSpecialTokens: false }));
    }
    expect(await plain.encode('ab <t> ba')).toEqual([3, 4, 2, 5]);
    // The texts with special tokens added are encoded whole (the probes failed); the others reuse their beginnings.
    expect(tokenizer.prefixCacheStats()).toMatchObject({ hits: 2, skipped: 3, rejected: 0 });
    await expect(tokenizer.encode('ab <t> hello')).rejects.toMatchObject({ code: 'ERR_INVALID_ARG' });
  });

  test('off unless asked for; bad options refused', () => {
    const { json } = chatmlBytes();
    expect(new TextTokenizer(json, { backend }).prefixCacheStats()).toBeUndefined();
    expect(new TextTokenizer(json, { backend, prefixCache: { maxBytes: 0 } }).prefixCacheStats()).toBeUndefined();
    for (const prefixCache of [null, 5, { maxBytes: -1 }, { maxBytes: 1.5 }, { maxBytes: '1' }, {}, { maxBytes: 1, max_entries: 2 }])
      expectKvError(() => new TextTokenizer(json, { backend, prefixCache: prefixCache as never }), 'ERR_INVALID_ARG', /prefixCache/);
  });
});
