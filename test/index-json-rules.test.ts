import { describe, expect, test } from 'vitest';
import { KvIndex } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { clearedEvent, embedding, indexesClosedAfterEach, outcome } from './helpers/json-text.js';
import { Rng } from './helpers/random.js';

/**
 * The four things JSON leaves to implementations, which kvroute refuses on both backends as
 * serde_json does: a repeated key (even with an identical value), a `\u` escape of half a
 * surrogate pair, a number beyond a double's range, and an event nested deeper than 127 levels.
 * A seeded generator writes documents that break them or come close, and knows as it writes
 * whether each should be refused: the deliberately simple reference both backends must match.
 */

/** The digits of (2 - 2^-53) × 2^1023, halfway between the largest double and 2^1024. */
const HALFWAY_DIGITS = ((2n ** 54n - 1n) * 2n ** 970n).toString();
const nested = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;

describe.each(BACKENDS)('JSON rules left to implementations, on the %s backend', (backend) => {
  const make = indexesClosedAfterEach(backend);

  test('a key repeated in one object is refused, whatever its value and however it is spelled', async () => {
    const i = make();
    for (const text of [
      '{"worker_id": 1, "worker_id": 1, "event": {"event_id": 0, "data": "cleared"}}',
      '{"worker_id": 1, "event": {"event_id": 0, "event_id": 0, "data": "cleared"}}',
      embedding('{"a": [1, {"b": null}], "a": [1, {"b": null}]}'),
      embedding('{"a": 1, "\\u0061": 1}'),
      embedding('{"__proto__": 1, "__proto__": 1}'),
      embedding('[{"k": "x:y", "k": "x:y"}]'),
      // Escaped quotes, and backslashes before a closing quote, amid colons in strings: the
      // keys' colons are still told from the strings' (a count misled by one would match here).
      embedding('{"s": "\\":", "a": 1, "a": 1, "t": ":\\""}'),
      embedding('{"s": "\\\\", "a": 1, "a": 1, "t": ":::", "u": "\\\\"}'),
    ])
      expect(outcome(i, text), text).toBe('ERR_INVALID_EVENT');
    expect(() => i.applyEvents(`${clearedEvent('')}\n${embedding('{"a": true, "a": true}')}`)).toThrow(/line 2/);
    // The same key in different objects, and colons inside strings, are not repeats.
    for (const text of [
      embedding('{"a": 1, "b": {"a": 1}, "c": [{"a": 1}, {"a": 1}]}'),
      embedding('{"url": "http://h:80/a:b", "a\\":": ":", "__proto__": {}}'),
      clearedEvent('"session_id": "s:1:2",'),
    ])
      expect(outcome(i, text), text).toBe('accepted');
    await i.flush();
    expect(i.stats().ranks, 'only the accepted events made a rank').toBe(1);
  });

  test('a \\u escape of half a surrogate pair is refused; a whole pair and an escaped backslash are not', () => {
    const i = make();
    for (const s of ['\\uD834', '\\uDD1E', '\\uDD1E\\uD834', '\\uD834x\\uDD1E', '\\uD834\\n', 'ok\\uDBFF']) {
      expect(outcome(i, embedding(`"${s}"`)), s).toBe('ERR_INVALID_EVENT');
      expect(outcome(i, embedding(`{"${s}": 1}`)), `key ${s}`).toBe('ERR_INVALID_EVENT');
    }
    for (const s of ['\\uD834\\uDD1E', '\\\\uD834', '\\\\\\uD834\\uDD1E', '\\u00e9\\u20AC', '\u{1D11E}'])
      expect(outcome(i, embedding(`"${s}"`)), s).toBe('accepted');
    expect(outcome(i, (x) => x.applyEvents(`[${clearedEvent('')}, ${clearedEvent('"session_id": "\\uDFFF",')}]`))).toBe(
      'ERR_INVALID_EVENT',
    );
  });

  test('a number beyond a double is refused; one that rounds to zero or to the largest double is not', () => {
    const i = make();
    // Halfway between the largest double and 2^1024: the least value that rounds to infinity.
    const halfway = `${HALFWAY_DIGITS}e${308 - HALFWAY_DIGITS.length + 1}`;
    for (const n of [
      '1e400',
      '-1e400',
      '1E+309',
      '-1.8e308',
      `1${'0'.repeat(309)}`,
      `-${'9'.repeat(400)}.5`,
      halfway,
      '1.7976931348623159e308',
    ])
      expect(outcome(i, embedding(n)), n).toBe('ERR_INVALID_EVENT');
    for (const n of [
      '1e-400',
      '-1e-400',
      '1.7976931348623157e308',
      '-1.7976931348623157e308',
      `1${'0'.repeat(300)}`,
      '4.9e-324',
      // Above the largest double but rounding to it (serde_json's fast path overflowed on these).
      '1.7976931348623158e308',
      `-${HALFWAY_DIGITS.slice(0, -1)}${Number(HALFWAY_DIGITS.slice(-1)) - 1}`,
      `${HALFWAY_DIGITS.slice(0, 25)}e${308 - 24}`,
    ])
      expect(outcome(i, embedding(n)), n).toBe('accepted');
  });

  test('an event may nest 127 levels; the array around a batch does not count', async () => {
    const i = make();
    expect(outcome(i, embedding(nested(126)))).toBe('accepted');
    expect(outcome(i, embedding(nested(127)))).toBe('ERR_INVALID_EVENT');
    expect(outcome(i, embedding(`{"a": ${nested(125)}}`))).toBe('accepted');
    expect(outcome(i, embedding(`{"a": ${nested(126)}}`))).toBe('ERR_INVALID_EVENT');
    expect(outcome(i, (x) => x.applyEvents(`[${embedding(nested(126))}]`))).toBe('accepted');
    expect(() => i.applyEvents(`[${clearedEvent('')}, ${embedding(nested(127))}]`)).toThrow(/events\[1\]/);
    expect(() => i.applyEvents(`${clearedEvent('')}\n\n${embedding(nested(200))}`)).toThrow(/line 3/);
    expect(() => KvIndex.fromDump(`[${embedding(nested(127))}]`, { blockSize: 4, backend })).toThrow(/events\[0\]/);
    await i.flush();
    expect(i.stats().ranks).toBe(1);
  });

  test("nesting deep enough to overflow a recursive parser's stack is refused as too deep", async () => {
    const i = make();
    // lossless-json recurses once per level and overflows at about 5,000; serde_json stops at 128.
    const deep = embedding(nested(20_000));
    const one = clearedEvent('');
    for (const [text, message] of [
      [`${deep}\n`, 'line 1: invalid JSON: nested deeper than 127 levels'],
      [`[${one}, ${one}, ${deep}]`, 'events[2]: invalid JSON: nested deeper than 127 levels'],
      [`[${one}, ${embedding(`"${'['.repeat(30_000)}"`)}, ${deep}]`, 'events[2]: invalid JSON: nested deeper than 127 levels'],
    ] as const)
      expect(() => i.applyEvents(text)).toThrow(new RegExp(`^${message.replace(/[[\]]/g, '\\$&')}$`));
    expect(outcome(i, deep)).toBe('ERR_INVALID_EVENT');
    // A number out of range is reported first, wherever it stands, as a parse that got that far would.
    expect(() => i.applyEvent(`{"worker_id": 1e400, "state_source": ${nested(20_000)}}`)).toThrow(/number out of range/);
    await i.flush();
    expect(i.stats().ranks).toBe(0);
  });
});

type Rule = 'repeated key' | 'lone surrogate' | 'out of range' | 'too deep';
/** A generated document and the rules it breaks. */
interface Doc {
  text: string;
  broken: Rule[];
}

const NUMBERS: [string, Rule[]][] = [
  ['0', []],
  ['-12.5e-3', []],
  ['18446744073709551616', []],
  ['1e-999', []],
  ['1.5e308', []],
  ['1.7976931348623158e308', []],
  ['1.7976931348623159e308', ['out of range']],
  ['2e308', ['out of range']],
  ['-1e999', ['out of range']],
];
/** String pieces; a leading half is lone unless a trailing half comes right after it. */
const PIECES = ['a', ':', '\\"', '\\\\', '\\u0041', '\\\\uD834', 'LEAD', 'TRAIL'] as const;
/** Keys as written, and as both parsers compare them (decoded). */
const KEYS: [string, string][] = [
  ['a', 'a'],
  ['\\u0061', 'a'],
  ['b:', 'b:'],
  ['__proto__', '__proto__'],
];

function stringOf(rng: Rng): Doc {
  const pieces = Array.from({ length: rng.int(5) }, () => rng.pick(PIECES));
  let lone = false;
  for (let k = 0; k < pieces.length; k++) {
    if (pieces[k] === 'LEAD' && pieces[k + 1] === 'TRAIL') k++;
    else if (pieces[k] === 'LEAD' || pieces[k] === 'TRAIL') lone = true;
  }
  const text = pieces.map((p) => (p === 'LEAD' ? '\\uD83D' : p === 'TRAIL' ? '\\uDE00' : p)).join('');
  return { text: `"${text}"`, broken: lone ? ['lone surrogate'] : [] };
}

/** A value at nesting level `level` (the event's own object is level 1). */
function generated(rng: Rng, level: number): Doc {
  const kind = rng.int(level > 6 ? 3 : 6);
  if (kind === 0) {
    const [text, broken] = rng.pick(NUMBERS);
    return { text, broken };
  }
  if (kind === 1) return stringOf(rng);
  if (kind === 2) {
    // A chain of arrays ending near the limit on either side of it.
    const levels = 120 - level + rng.int(12);
    return { text: nested(levels), broken: level + levels - 1 > 127 ? ['too deep'] : [] };
  }
  const items = Array.from({ length: rng.int(4) }, () => generated(rng, level + 1));
  const inner = items.flatMap((d) => d.broken);
  if (kind === 3) return { text: `[${items.map((d) => d.text).join(', ')}]`, broken: inner };
  const seen = new Set<string>();
  let repeated = false;
  const fields = items.map((d) => {
    const [written, decoded] = rng.pick(KEYS);
    repeated ||= seen.has(decoded);
    seen.add(decoded);
    return `"${written}": ${d.text}`;
  });
  return { text: `{${fields.join(', ')}}`, broken: repeated ? ['repeated key', ...inner] : inner };
}

test('seeded documents near each rule: both backends refuse exactly what the rules refuse', () => {
  const rng = new Rng(20261206);
  const indexes = BACKENDS.map((backend) => new KvIndex({ blockSize: 4, backend }));
  const counts = new Map<string, number>();
  const wrong: string[] = [];
  for (let n = 0; n < 400; n++) {
    const doc = generated(rng, 2);
    const expected = doc.broken.length > 0 ? 'ERR_INVALID_EVENT' : 'accepted';
    // What decides: nothing broken, or the one rule broken alone.
    const alone = doc.broken.length === 0 ? 'accepted' : new Set(doc.broken).size === 1 ? doc.broken[0] : 'several';
    counts.set(alone, (counts.get(alone) ?? 0) + 1);
    for (const [k, index] of indexes.entries()) {
      const got = outcome(index, (i) => i.applyEvents(`[${embedding(doc.text)}]`));
      if (got !== expected) wrong.push(`${BACKENDS[k]}: ${doc.text.slice(0, 200)} → ${got}`);
    }
  }
  for (const i of indexes) i.close();
  expect(wrong).toEqual([]);
  // Each rule decides some documents alone, and many pass.
  for (const key of ['accepted', 'repeated key', 'lone surrogate', 'out of range', 'too deep'])
    expect(counts.get(key) ?? 0, `${key}: ${JSON.stringify([...counts])}`).toBeGreaterThan(key === 'accepted' ? 100 : 10);
});

/** The rule a refusal names when several are broken: the first a parse meets, then the rules' order. */
const PRECEDENCE: [Rule, RegExp][] = [
  ['out of range', /invalid JSON: number out of range: /],
  ['lone surrogate', /invalid JSON: lone surrogate in \\u escape at position \d+$/],
  ['too deep', /invalid JSON: nested deeper than 127 levels$/],
  ['repeated key', /invalid JSON: duplicate key "[^"]*" at position \d+$/],
];

test("seeded documents: both backends word a refusal alike, naming the rule a whole-text parse meets first, before another event's fault", () => {
  const rng = new Rng(20261207);
  const indexes = BACKENDS.map((backend) => new KvIndex({ blockSize: 4, backend }));
  // An event refused for its own fault (an unknown field), before the generated one.
  const faulty = clearedEvent('"zz": 1,');
  const wrong: string[] = [];
  let named = 0;
  for (let n = 0; n < 300; n++) {
    const doc = generated(rng, 2);
    const event = embedding(doc.text);
    const rule = PRECEDENCE.find(([r]) => doc.broken.includes(r));
    for (const [form, apply] of [
      ['batch', (i: KvIndex) => i.applyEvents(`[${faulty}, ${event}]`)],
      ['ndjson', (i: KvIndex) => i.applyEvents(`${faulty}\n\n${event}\n`)],
      ['event', (i: KvIndex) => i.applyEvent(event)],
    ] as const) {
      const messages = indexes.map((index) => {
        try {
          apply(index);
          return 'accepted';
        } catch (err) {
          return (err as Error).message;
        }
      });
      const shown = `${form} ${doc.text.slice(0, 120)}: ${JSON.stringify(messages).slice(0, 300)}`;
      if (messages[0] !== messages[1]) wrong.push(`differ: ${shown}`);
      else if (rule !== undefined && !rule[1].test(messages[0])) wrong.push(`not ${rule[0]}: ${shown}`);
      else if (rule === undefined && form !== 'event' && !messages[0].includes('unknown field "zz"')) wrong.push(shown);
      else if (rule !== undefined) named++;
    }
  }
  for (const i of indexes) i.close();
  expect(wrong).toEqual([]);
  expect(named).toBeGreaterThan(300);
});
