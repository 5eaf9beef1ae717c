/**
 * Damaged `tokenizer.json` files, seeded: fixture files with one to three fields replaced by
 * values of other shapes, loaded and used on both backends. Whatever a file holds, loading and
 * encoding either work or fail with `ERR_INVALID_ARG`: never an internal error (a panic inside
 * Hugging Face's Rust library, which the native backend once passed on for a post-processor it
 * read unchecked), never an error that is not a `KvRouteError`. What each backend accepts may
 * differ (the README's limitations list where); the fixtures themselves load on both.
 */
import { describe, expect, test } from 'vitest';
import { KvRouteError, TextTokenizer } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { Rng } from './helpers/random.js';
import { bpeTokenizer, withSpecials, wordModel } from './helpers/tokenizer-files.js';

const FIXTURES = [
  bpeTokenizer({ vocab: { a: 0, b: 1, ab: 2, '<unk>': 3 }, merges: [['a', 'b']], unkToken: '<unk>' }),
  withSpecials(true),
  wordModel(),
].map((text) => JSON.parse(text) as Record<string, unknown>);

/** Values of every JSON shape a field may be swapped for, some of them fragments of real components. */
const VALUES: unknown[] = [
  null,
  0,
  -1,
  1e9,
  2.5,
  '',
  'x',
  '##',
  'é',
  true,
  [],
  [1],
  ['a b'],
  [['a', 'b']],
  {},
  { type: 'BPE' },
  { type: 'Sequence', pretokenizers: [] },
  { type: 'Sequence', processors: [{ type: 'TemplateProcessing' }] },
  { SpecialToken: { id: '<x>', type_id: 0 } },
  { Sequence: { id: 'B', type_id: 0 } },
  { type: 'Split', pattern: { Regex: '(' }, behavior: 'Isolated', invert: false },
];

/** Every path to a field of `value` (objects and arrays), the root excluded. */
function paths(value: unknown, at: string[] = [], out: string[][] = []): string[][] {
  if (at.length > 0) out.push(at);
  if (value !== null && typeof value === 'object')
    for (const key of Object.keys(value)) paths((value as Record<string, unknown>)[key], [...at, key], out);
  return out;
}

/** A copy of `file` with one to three fields replaced. */
function damaged(rng: Rng, file: Record<string, unknown>): string {
  const copy = structuredClone(file);
  const all = paths(copy);
  for (let n = 1 + rng.int(3); n > 0; n--) {
    const path = rng.pick(all);
    let parent: unknown = copy;
    for (const key of path.slice(0, -1))
      parent = parent !== null && typeof parent === 'object' ? (parent as Record<string, unknown>)[key] : undefined;
    if (parent !== null && typeof parent === 'object')
      (parent as Record<string, unknown>)[path[path.length - 1]] = structuredClone(rng.pick(VALUES));
  }
  return JSON.stringify(copy);
}

/** The error's code when it is a `KvRouteError`, else the error itself (which fails the test). */
function codeOf(err: unknown): unknown {
  return err instanceof KvRouteError ? err.code : err;
}

describe.each(BACKENDS)('damaged tokenizer.json files (%s)', (backend) => {
  test('the fixtures load and encode', async () => {
    for (const file of FIXTURES)
      expect((await new TextTokenizer(JSON.stringify(file), { backend }).encode('a b')).length).toBeGreaterThan(0);
  });

  test('seeded: loading and encoding a damaged file work or fail with ERR_INVALID_ARG, never an internal error', async () => {
    const rng = new Rng(20261207);
    const outcomes = { loaded: 0, refused: 0 };
    for (let i = 0; i < 3000; i++) {
      const text = damaged(rng, rng.pick(FIXTURES));
      let tokenizer: TextTokenizer;
      try {
        tokenizer = new TextTokenizer(text, { backend });
      } catch (err) {
        expect(codeOf(err), text).toBe('ERR_INVALID_ARG');
        outcomes.refused++;
        continue;
      }
      outcomes.loaded++;
      for (const input of ['ab', 'a b é <x>', ''])
        for (const addSpecialTokens of [true, false])
          await tokenizer.encode(input, { addSpecialTokens }).catch((err: unknown) => expect(codeOf(err), text).toBe('ERR_INVALID_ARG'));
    }
    // Both kinds of outcome are met, so the damage reaches past the reader's first checks.
    expect(outcomes.loaded).toBeGreaterThan(20);
    expect(outcomes.refused).toBeGreaterThan(20);
  });
});
