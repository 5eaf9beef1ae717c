/**
 * TextTokenizer on both backends: Hugging Face's Rust `tokenizers` (native) and tokenizers.js
 * (JS) must give the same ids for the same `tokenizer.json`. Seeded random texts are compared
 * with deliberately simple reference models: UTF-8 bytes for the mock model's byte-level
 * tokenizer, and a textbook BPE (merge the lowest-ranked adjacent pair, leftmost first) for a
 * character BPE with merges.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { KvRouteError, mockTokenizerJson, TextTokenizer } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { expectKvError } from './helpers/errors.js';
import { Rng } from './helpers/random.js';
import { added, bpeTokenizer, withSpecials, wordModel } from './helpers/tokenizer-files.js';

const PIECES = ['a', 'Z', ' ', '  ', '\n', '\t', '.', ',', "'s", 'é', 'ß', '中文', '日本', '🙂', '👩‍💻', '42', '<|x|>', '\u00a0'];

function randomText(rng: Rng, pieces: number): string {
  let text = '';
  for (let i = 0; i < pieces; i++) text += rng.pick(PIECES);
  return text;
}

/** A character BPE over `abcde` with merges, split on whitespace, `<unk>` for anything else. */
function charBpe(): { json: string; merges: string[][]; vocab: Record<string, number> } {
  const merges = [
    ['a', 'b'],
    ['c', 'd'],
    ['ab', 'c'],
    ['cd', 'e'],
    ['a', 'a'],
    ['b', 'b'],
    ['aa', 'b'],
    ['abc', 'de'],
    ['e', 'e'],
    ['bb', 'ee'],
    ['d', 'e'],
  ];
  const vocab: Record<string, number> = { '<unk>': 0 };
  for (const ch of 'abcde') vocab[ch] = Object.keys(vocab).length;
  for (const [l, r] of merges) vocab[l + r] ??= Object.keys(vocab).length;
  const json = bpeTokenizer({
    vocab,
    merges,
    unkToken: '<unk>',
    addedTokens: [added(0, '<unk>')],
    preTokenizer: { type: 'WhitespaceSplit' },
  });
  return { json, merges, vocab };
}

/** Textbook BPE: per whitespace-separated word, merge the lowest-ranked adjacent pair (leftmost first) until none applies. */
function referenceBpe(text: string, merges: string[][], vocab: Record<string, number>): number[] {
  const rank = new Map(merges.map(([l, r], i) => [`${l} ${r}`, i]));
  const ids: number[] = [];
  for (const word of text.split(/\s+/).filter(Boolean)) {
    const symbols = [...word];
    for (;;) {
      let best = -1;
      let bestRank = Number.POSITIVE_INFINITY;
      for (let i = 0; i + 1 < symbols.length; i++) {
        const r = rank.get(`${symbols[i]} ${symbols[i + 1]}`);
        if (r !== undefined && r < bestRank) [best, bestRank] = [i, r];
      }
      if (best < 0) break;
      symbols.splice(best, 2, symbols[best] + symbols[best + 1]);
    }
    for (const s of symbols) ids.push(vocab[s] ?? vocab['<unk>']);
  }
  return ids;
}

/**
 * Llama 3's layout: a Split on the GPT-4 regex, then ByteLevel without its own regex, a
 * byte-level BPE with `ignore_merges`, and merges over the byte alphabet (space-prefixed words,
 * common pairs, a multi-byte character).
 */
function llama3Like(): string {
  const base = mockTokenizerJson() as { model: { vocab: Record<string, number> } };
  const vocab: Record<string, number> = { ...base.model.vocab };
  const merges: string[] = [];
  const merge = (l: string, r: string) => {
    merges.push(`${l} ${r}`);
    vocab[l + r] ??= Object.keys(vocab).length;
  };
  for (const [l, r] of [
    ['Ġ', 't'],
    ['h', 'e'],
    ['Ġt', 'he'],
    ['e', 'r'],
    ['i', 'n'],
    ['Ġ', 'a'],
    ['o', 'u'],
    ['Ġ', 'c'],
    ['Ġc', 'a'],
    ['Ġca', 'c'],
    ['Ġcac', 'he'],
    ['r', 'o'],
    ['ro', 'u'],
    ['rou', 't'],
    ['rout', 'er'],
    ['Ġ', 'rout'],
    ['Ġrout', 'er'],
    ['1', '2'],
    ['12', '3'],
    ['ä', '¸'],
    ['Ċ', 'Ċ'],
  ])
    merge(l, r);
  const gpt4 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  return JSON.stringify({
    ...base,
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        { type: 'Split', pattern: { Regex: gpt4 }, behavior: 'Isolated', invert: false },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    },
    model: { ...(base.model as object), ignore_merges: true, vocab, merges },
  });
}

const bytes = (text: string) => [...new TextEncoder().encode(text)];

const scratch = mkdtempSync(join(tmpdir(), 'kvroute-tokenizer-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe.each(BACKENDS)('TextTokenizer (%s)', (backend) => {
  test('the mock model: one id per UTF-8 byte, for seeded random texts short and long', async () => {
    const t = new TextTokenizer(JSON.stringify(mockTokenizerJson()), { backend });
    expect(t.backend).toBe(backend);
    const rng = new Rng(20261204);
    for (let i = 0; i < 200; i++) {
      // Long texts take the native backend's thread-pool path, short ones the direct one.
      const text = randomText(rng, i % 10 === 0 ? 400 + rng.int(400) : rng.int(40));
      expect(await t.encode(text, { addSpecialTokens: false }), JSON.stringify(text)).toEqual(bytes(text));
      expect(await t.encode(text)).toEqual(bytes(text));
    }
  });

  test('a character BPE with merges agrees with the textbook algorithm on seeded random words', async () => {
    const { json, merges, vocab } = charBpe();
    const t = new TextTokenizer(json, { backend });
    const rng = new Rng(7);
    for (let i = 0; i < 300; i++) {
      const words: string[] = [];
      for (let w = rng.int(6); w >= 0; w--) {
        let word = '';
        for (let c = 1 + rng.int(9); c > 0; c--) word += rng.int(40) === 0 ? 'z' : 'abcde'[rng.int(5)];
        words.push(word);
      }
      const text = words.join(rng.pick([' ', '  ', '\n']));
      expect(await t.encode(text), text).toEqual(referenceBpe(text, merges, vocab));
    }
    // The lowest-ranked pair first, leftmost among equals: ab, cd, cde; then a + ab has no merge.
    expect(await t.encode('abcde')).toEqual([vocab.ab, vocab.cde]);
    expect(await t.encode('aab bbee z')).toEqual([vocab.a, vocab.ab, vocab.bbee, vocab['<unk>']]);
  });

  test("Llama 3's layout (GPT-4 regex split, byte-level BPE with merges): the backends agree on seeded random texts", async () => {
    const t = new TextTokenizer(llama3Like(), { backend });
    const other = new TextTokenizer(llama3Like(), { backend: backend === 'native' ? 'js' : 'native' });
    const words = [
      'the',
      ' the',
      ' cache',
      ' router',
      'router',
      'in',
      "'s",
      "'LL",
      '123',
      '1234',
      '中',
      '\n\n',
      '  ',
      ' ',
      '!!',
      '🙂',
      'Ünïcödé',
    ];
    const rng = new Rng(3);
    for (let i = 0; i < 300; i++) {
      let text = '';
      for (let w = rng.int(30); w >= 0; w--) text += rng.pick(words);
      const ids = await t.encode(text, { addSpecialTokens: false });
      expect(ids, JSON.stringify(text)).toEqual(await other.encode(text, { addSpecialTokens: false }));
    }
    // Merges apply: " the" is one token, " cache" and " router" too.
    const vocab = (JSON.parse(llama3Like()) as { model: { vocab: Record<string, number> } }).model.vocab;
    const id = (token: string) => vocab[token];
    expect(await t.encode(' the cache router')).toEqual([id('Ġthe'), id('Ġcache'), id('Ġrouter')]);
  });

  test('special tokens: the template adds BOS only when asked, and special tokens in the text are one id', async () => {
    const t = new TextTokenizer(withSpecials(), { backend });
    expect(await t.encode('hi')).toEqual([256, ...bytes('hi')]);
    expect(await t.encode('hi', { addSpecialTokens: false })).toEqual(bytes('hi'));
    expect(await t.encode('<|bos|>hi<|eot|>x', { addSpecialTokens: false })).toEqual([256, ...bytes('hi'), 257, ...bytes('x')]);
    expect(await t.encode('a<|eot')).toEqual([256, ...bytes('a<|eot')]);
  });

  test('a word outside the vocabulary of a model without an unknown token is a typed error on both backends', async () => {
    const tokenizer = new TextTokenizer(wordModel(), { backend });
    expect(await tokenizer.encode('ab <t> ba')).toEqual([3, 4, 2, 5]);
    for (const text of ['ab hello', 'x'])
      await expect(tokenizer.encode(text)).rejects.toMatchObject({
        code: 'ERR_INVALID_ARG',
        message: expect.stringMatching(/cannot encode/),
      });
  });

  test('a lone surrogate is U+FFFD on both backends (a byte-fallback model has a token for it)', async () => {
    const vocab: Record<string, number> = { '<unk>': 0 };
    for (let b = 0; b < 256; b++) vocab[`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`] = b + 1;
    Object.assign(vocab, { '\ufffd': 257, a: 258 });
    const json = bpeTokenizer({ vocab, unkToken: '<unk>', byteFallback: true });
    const tokenizer = new TextTokenizer(json, { backend });
    expect(await tokenizer.encode('a\ud83d')).toEqual([258, 257]);
    expect(await tokenizer.encode('\ude42a\ufffd')).toEqual([257, 258, 257]);
    expect(await tokenizer.encode('\u00e9')).toEqual([0xc3 + 1, 0xa9 + 1]); // bytes where the vocabulary lacks the character
  });

  test("the file's truncation and padding are ignored: the engine sees the whole prompt", async () => {
    const json = JSON.stringify({
      ...mockTokenizerJson(),
      truncation: { direction: 'Right', max_length: 4, strategy: 'LongestFirst', stride: 0 },
      padding: { strategy: { Fixed: 64 }, direction: 'Right', pad_to_multiple_of: null, pad_id: 0, pad_type_id: 0, pad_token: '!' },
    });
    const t = new TextTokenizer(json, { backend });
    expect(await t.encode('kv cache router')).toEqual(bytes('kv cache router'));
  });

  test('fromFile reads tokenizer.json and the tokenizer_config.json beside it', async () => {
    const dir = join(scratch, backend);
    rmSync(dir, { recursive: true, force: true });
    const { mkdirSync } = await import('node:fs');
    mkdirSync(dir);
    writeFileSync(join(dir, 'tokenizer.json'), withSpecials());
    const bare = TextTokenizer.fromFile(join(dir, 'tokenizer.json'), { backend });
    expect(bare.config).toEqual({});
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ chat_template: '{{ messages }}', model_max_length: 8 }));
    const t = TextTokenizer.fromFile(join(dir, 'tokenizer.json'), { backend });
    expect(t.config).toMatchObject({ chat_template: '{{ messages }}' });
    expect(await t.encode('ok')).toEqual([256, ...bytes('ok')]);
    writeFileSync(join(dir, 'tokenizer_config.json'), '{');
    expectKvError(
      () => TextTokenizer.fromFile(join(dir, 'tokenizer.json'), { backend }),
      'ERR_INVALID_ARG',
      /cannot load the tokenizer .*tokenizer_config\.json/,
    );
  });

  test('bad files and bad arguments are typed errors', async () => {
    for (const bad of ['', '{', '[]', JSON.stringify({ ...mockTokenizerJson(), model: { type: 'Nonsense' } })])
      expectKvError(() => new TextTokenizer(bad, { backend }), 'ERR_INVALID_ARG', /not a tokenizer this library reads/);
    expectKvError(
      () => TextTokenizer.fromFile(join(scratch, 'missing', 'tokenizer.json'), { backend }),
      'ERR_INVALID_ARG',
      /cannot load the tokenizer/,
    );
    expectKvError(() => TextTokenizer.fromFile('', { backend }), 'ERR_INVALID_ARG', /path must be a non-empty string/);
    expectKvError(() => new TextTokenizer(42 as unknown as string, { backend }), 'ERR_INVALID_ARG', /json must be the text/);
    expectKvError(() => new TextTokenizer('{}', { backend, nope: 1 } as never), 'ERR_INVALID_ARG', /unknown option "nope"/);
    expectKvError(
      () => new TextTokenizer('{}', { backend: 'wasm' as never }),
      'ERR_INVALID_ARG',
      /options.backend must be 'native' or 'js'/,
    );
    const t = new TextTokenizer(JSON.stringify(mockTokenizerJson()), { backend });
    for (const [call, message] of [
      [() => t.encode(7 as unknown as string), /text must be a string/],
      [() => t.encode('x', { addSpecialTokens: 'yes' as unknown as boolean }), /addSpecialTokens must be a boolean/],
      [() => t.encode('x', { add_special_tokens: true } as never), /unknown option "add_special_tokens"/],
    ] as const) {
      const err = await call().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(KvRouteError);
      expect((err as KvRouteError).code).toBe('ERR_INVALID_ARG');
      expect((err as KvRouteError).message).toMatch(message);
    }
  });

  test('a BPE model the Rust library refuses is refused by both: bad merge lines, no merges, a dropout past 1, a part shorter than the prefix', () => {
    const model = (fields: Record<string, unknown>) => {
      const file = JSON.parse(bpeTokenizer({ vocab: { a: 0, b: 1, ab: 2 }, merges: [['a', 'b']] }));
      return JSON.stringify({ ...file, model: { ...file.model, ...fields } });
    };
    const refused: [Record<string, unknown>, RegExp][] = [
      [{ merges: ['#version: 0.2', 'a b', 'a b b'] }, /Merges text file invalid at line 2/],
      [{ merges: ['a b', 'ab'] }, /Merges text file invalid at line 2/],
      [{ merges: undefined }, /Missing vocab\/merges/],
      [{ dropout: 2 }, /Dropout should be between 0 and 1/],
      // The Rust library would panic on it (the native backend refuses it first).
      [{ continuing_subword_prefix: '##' }, /continuing.subword.prefix/],
    ];
    for (const [fields, message] of refused) expectKvError(() => new TextTokenizer(model(fields), { backend }), 'ERR_INVALID_ARG', message);
    // Merges naming tokens outside the vocabulary: the native backend refuses them; tokenizers.js
    // reads them (the README's limitations).
    for (const fields of [{ vocab: { a: 0, b: 1 } }, { merges: [['a', 'c']] }]) {
      if (backend === 'native') expectKvError(() => new TextTokenizer(model(fields), { backend }), 'ERR_INVALID_ARG', /out of vocabulary/);
      else expect(() => new TextTokenizer(model(fields), { backend })).not.toThrow();
    }
  });

  test('a single template naming an undefined special token or sequence B is refused at load by both (it failed every encode)', async () => {
    const file = JSON.parse(withSpecials(true));
    const [a, b] = [{ Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }];
    const special = (id: string) => ({ SpecialToken: { id, type_id: 0 } });
    const withProcessor = (post_processor: object) => JSON.stringify({ ...file, post_processor });
    const template = (single: object[], pair: object[] = [a, b]) => ({ ...file.post_processor, single, pair });
    for (const [single, message] of [
      [[special('<x>'), a], /single template names the special token `<x>`, which its special_tokens do not define/],
      [[special('<|bos|>'), b], /single template uses sequence B/],
    ] as const) {
      const alone = template([...single]);
      for (const processor of [alone, { type: 'Sequence', processors: [{ type: 'ByteLevel', trim_offsets: false }, alone] }])
        expectKvError(() => new TextTokenizer(withProcessor(processor), { backend }), 'ERR_INVALID_ARG', message);
    }
    // A pair template breaking its builder's rules is never used for one text: it loads and encodes.
    const t = new TextTokenizer(withProcessor(template([special('<|bos|>'), a], [a, special('<y>')])), { backend });
    expect(await t.encode('hi')).toEqual([256, ...new TextEncoder().encode('hi')]);
  });

  test('BPE merges in either form are read alike; a continuing subword prefix only the native backend applies, and the JS one refuses', async () => {
    const file = JSON.parse(bpeTokenizer({ vocab: { a: 0, b: 1, ab: 2 }, merges: [['a', 'b']] }));
    const model = (fields: Record<string, unknown>) => JSON.stringify({ ...file, model: { ...file.model, ...fields } });
    for (const merges of [['#version: 0.2', 'a b'], [['a', 'b']]])
      expect(await new TextTokenizer(model({ merges }), { backend }).encode('ab')).toEqual([2]);
    // `a` then `##b` merge into `ab` (the part past the prefix); tokenizers.js would give [a, b].
    const prefixed = model({ vocab: { a: 0, '##b': 1, ab: 2, b: 3 }, merges: [['a', '##b']], continuing_subword_prefix: '##' });
    if (backend === 'native') expect(await new TextTokenizer(prefixed, { backend }).encode('ab')).toEqual([2]);
    else
      expectKvError(
        () => new TextTokenizer(prefixed, { backend }),
        'ERR_INVALID_ARG',
        /does not apply a BPE model's continuing_subword_prefix/,
      );
  });
});
