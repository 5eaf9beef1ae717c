/**
 * JSON's open questions in a warm-start snapshot (a repeated key, a lone surrogate escape, a
 * number beyond a double's range, nesting) are settled for the whole document, on both backends
 * alike: a break in a part kvroute never reads (another model's entry, a field it ignores) refuses
 * the snapshot on the native backend too, in the same words and at the same character position.
 * Seeded documents put breaks and harmless look-alikes in random places; each is served by a real
 * HTTP peer and read by both backends.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Rng } from './helpers/random.js';
import { type Outcome, SnapshotPeer } from './helpers/snapshot-peer.js';

const BS = 4;
const peer = new SnapshotPeer();
beforeAll(() => peer.start());
afterAll(() => peer.close());

const nest = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;

/** Values that break a rule wherever they stand, each with the words of its refusal. */
const BREAKING: [string, string][] = [
  ['"\\ud800"', 'lone surrogate'],
  ['"a\\udc00b"', 'lone surrogate'],
  ['"\\uD83D\\u0041"', 'lone surrogate'],
  ['1e400', 'number out of range'],
  ['-1E999', 'number out of range'],
  [`1${'0'.repeat(400)}`, 'number out of range'],
  ['{"a": 1, "a": 1}', 'duplicate key'],
  ['{"k": [1], "k": {"x": 2}}', 'duplicate key'],
  [nest(600), 'nested deeper than 512 levels'],
  [nest(8000), 'nested deeper than 512 levels'],
];

/** Which of several breaks a refusal names: a parse stops at a number, then the rules' order. */
const PRECEDENCE = ['number out of range', 'lone surrogate', 'nested deeper than 512 levels', 'duplicate key'];

/** Values that look like a break and are not. */
const HARMLESS = ['"\\ud83d\\ude00"', '"é😀\\u00e9"', '1e-400', '-0.0e999', nest(120), '{"a": {"a": 1}, "b": [{"a": 2}]}'];

/** Where a field may go: the end of each object of the document (`@` marks it). */
const TEMPLATE = `{"m:default": {"block_size": 4, "events": [
  {"worker_id": 1, "event": {"event_id": 1, "dp_rank": 0, "data": {"stored": {"parent_hash": null,
    "blocks": [{"block_hash": 1, "tokens_hash": 2}, {"block_hash": 3, "tokens_hash": 4}]}}}}
], "engine_seqs": [{"worker_id": 1, "dp_rank": 0, "seq": 41@}]@}, "other:default": {"block_size": 8, "events": [
  {"worker_id": 2, "note": [1, {"x": "y"@}]@}
]@}@}`;

const SLOTS = TEMPLATE.split('@').length - 1;

/** A document with `fields` put at the given slots (several may share one). */
function render(fields: { slot: number; text: string }[]): string {
  const parts = TEMPLATE.split('@');
  return parts
    .map(
      (part, i) =>
        part +
        fields
          .filter((f) => f.slot === i)
          .map((f) => f.text)
          .join(''),
    )
    .join('');
}

const read = async (text: string): Promise<[Outcome, Outcome]> => [
  await peer.outcome('native', text, BS, 'm'),
  await peer.outcome('js', text, BS, 'm'),
];

describe('a snapshot is held to JSON rules as a whole, on both backends alike', () => {
  test('the template reads, and one break anywhere refuses it with the same message', async () => {
    const [native, js] = await read(render([]));
    expect(native).toEqual({ ok: true, events: 1, blocks: 2, resumable: 1 });
    expect(js).toEqual(native);
    for (let slot = 0; slot < SLOTS; slot++) {
      for (const [value] of BREAKING) {
        const text = render([{ slot, text: `, "z": ${value}` }]);
        const [n, j] = await read(text);
        expect(n, `${value.slice(0, 30)} at ${slot}`).toMatchObject({ ok: false, code: 'ERR_INVALID_EVENT' });
        expect(n.ok || n.message.startsWith('warm start: the snapshot is not JSON (invalid JSON: ')).toBe(true);
        expect(j, `${value.slice(0, 30)} at ${slot}`).toEqual(n);
      }
    }
  });

  test('a repeated key and a lone surrogate in a key, in any object', async () => {
    const expected = (message: string) => ({
      ok: false,
      code: 'ERR_INVALID_EVENT',
      message: `warm start: the snapshot is not JSON (invalid JSON: ${message})`,
    });
    for (let slot = 0; slot < SLOTS; slot++) {
      const text = render([{ slot, text: ', "\\u007a": 1, "é😀": 2, "z": 3' }]);
      const at = text.indexOf('"z"');
      const [native, js] = await read(text);
      expect(native).toEqual(expected(`duplicate key "z" at position ${at}`));
      expect(js).toEqual(native);
      const lone = render([{ slot, text: ', "\\udfff": 1' }]);
      const [n, j] = await read(lone);
      expect(n).toEqual(expected(`lone surrogate in \\u escape at position ${lone.indexOf('\\udfff')}`));
      expect(j).toEqual(n);
    }
    // A field kvroute reads, repeated with the same value.
    const text = TEMPLATE.replaceAll('@', '').replace('"seq": 41', '"seq": 41, "seq": 41');
    const [native, js] = await read(text);
    expect(native).toEqual(expected(`duplicate key "seq" at position ${text.lastIndexOf('"seq"')}`));
    expect(js).toEqual(native);
  });

  test('a syntax error anywhere is refused in the same words on both, at its position in the whole text', async () => {
    // Each damage, and how far into it the first character that cannot be JSON is, with what was expected.
    const DAMAGE: [string, number, string][] = [
      [', "z": [1 2]', 10, "expected ',' or ']', got '2'"],
      [', "z": -x', 8, "expected a digit, got 'x'"],
      [', "z" 1', 6, "expected ':', got '1'"],
      [', "😀é": tru ', 12, "expected 'true', got U+0020"],
      [', "z": "a\\qb"', 10, "expected an escape (one of \"\\/bfnrtu), got 'q'"],
      [',,', 1, "expected a string key, got ','"],
    ];
    for (let slot = 0; slot < SLOTS; slot++) {
      for (const [damage, offset, words] of DAMAGE) {
        for (const lead of ['', ' \n\t']) {
          const text = lead + render([{ slot, text: damage }]);
          const at = text.indexOf(damage) + offset;
          const [native, js] = await read(text);
          expect(js, `${damage} at ${slot}`).toEqual(native);
          expect(native).toMatchObject({ ok: false, code: 'ERR_INVALID_EVENT' });
          const message = (native as { message: string }).message;
          expect(message).toBe(`warm start: the snapshot is not JSON (invalid JSON: ${words} at position ${at})`);
        }
      }
    }
  });

  test('nesting: 512 levels in all are read, deeper is refused', async () => {
    // The deepest slot's object is at `level`; a value there nested 512 - level levels reaches 512.
    let level = 0;
    for (const c of TEMPLATE.split('@').slice(0, 3).join('')) level += '{['.includes(c) ? 1 : '}]'.includes(c) ? -1 : 0;
    expect(level).toBeGreaterThan(4);
    for (const [levels, ok] of [
      [512 - level, true],
      [513 - level, false],
    ] as const) {
      const [native, js] = await read(render([{ slot: 2, text: `, "z": ${nest(levels)}` }]));
      expect(native.ok, `${levels}`).toBe(ok);
      expect(js).toEqual(native);
      if (!ok) expect(native).toMatchObject({ message: expect.stringContaining('nested deeper than 512 levels') });
    }
  });

  test('seeded documents with breaks and look-alikes: the same result and message, naming the break that ranks first', async () => {
    const rng = new Rng(20261206);
    let refused = 0;
    let several = 0;
    for (let i = 0; i < 200; i++) {
      const fields: { slot: number; text: string }[] = [];
      const breaks: string[] = [];
      for (let f = 1 + rng.int(4); f > 0; f--) {
        const [value, words] = rng.int(3) === 0 ? rng.pick(BREAKING) : [rng.pick(HARMLESS), undefined];
        if (words !== undefined) breaks.push(words);
        fields.push({ slot: rng.int(SLOTS), text: `, "f${f}": ${value}` });
      }
      const text = render(fields);
      const [native, js] = await read(text);
      const shown = `${text.slice(0, 80)}…: ${JSON.stringify([native, js]).slice(0, 400)}`;
      expect(js, shown).toEqual(native);
      const first = PRECEDENCE.find((words) => breaks.includes(words));
      if (first !== undefined) {
        expect(native, shown).toMatchObject({ ok: false, message: expect.stringContaining(`invalid JSON: ${first}`) });
      }
      if (!native.ok) refused++;
      if (new Set(breaks).size > 1) several++;
    }
    expect(refused).toBeGreaterThan(40);
    expect(refused).toBeLessThan(180);
    expect(several).toBeGreaterThan(10);
  });
});
