/**
 * JSON syntax errors in the same words from both backends: where the text stops being JSON (an
 * offset in UTF-16 code units, as the other JSON rules give theirs) and what was expected there.
 * The cases are shared with the Rust scanner's unit tests (`cases.json` beside
 * `crates/kvroute-core/src/index/json/syntax.rs`), so both scanners are held to the same list;
 * here they are applied through the public API, as a batch or as a line of NDJSON. The seeded
 * comparisons of both backends are in `index-json.test.ts` and `replicas-snapshot-json-rules.test.ts`.
 */

import { readFileSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import { BACKENDS } from './helpers/backends.js';
import { indexesClosedAfterEach } from './helpers/json-text.js';

const CASES = JSON.parse(readFileSync(new URL('../crates/kvroute-core/src/index/json/syntax/cases.json', import.meta.url), 'utf8')) as [
  string,
  string | null,
][];

/** The message of what `apply` threw, or `accepted`. */
function messageOf(apply: () => unknown): string {
  try {
    apply();
    return 'accepted';
  } catch (err) {
    return `${(err as { code?: string }).code}: ${(err as Error).message}`;
  }
}

describe.each(BACKENDS)('JSON syntax errors (%s)', (backend) => {
  const make = indexesClosedAfterEach(backend);

  test('each shared case is refused where and as the scanners say, as a batch array or as a line of NDJSON', () => {
    const index = make();
    const refused = CASES.filter(([text, words]) => words !== null && !/^[ \t\n\r]*$/.test(text));
    expect(refused.length).toBeGreaterThan(35);
    for (const [text, words] of refused) {
      const batch = /^[ \t\n\r]*\[/.test(text);
      // As NDJSON each line is an event of its own, so a text of several lines is not one line.
      if (!batch && text.includes('\n')) continue;
      expect(
        messageOf(() => index.applyEvents(text)),
        JSON.stringify(text),
      ).toBe(`ERR_INVALID_EVENT: ${batch ? '' : 'line 1: '}invalid JSON: ${words}`);
      expect(
        messageOf(() => index.applyEvent(text)),
        JSON.stringify(text),
      ).toBe(`ERR_INVALID_EVENT: event: invalid JSON: ${words}`);
    }
    expect(index.stats().blocks).toBe(0);
  });

  test('a syntax error on a later line of NDJSON counts its position from that line', () => {
    const index = make();
    const event = '{"worker_id": 1, "event": {"event_id": 0, "data": "cleared"}}';
    expect(messageOf(() => index.applyEvents(`${event}\n\n{"worker_id": 1, "event": {"event_id": 1 "data": "cleared"}}`))).toBe(
      "ERR_INVALID_EVENT: line 3: invalid JSON: expected ',' or '}', got '\"' at position 41",
    );
    expect(messageOf(() => index.applyEvents(`[${event},\n ${event.slice(0, -1)}]`))).toBe(
      `ERR_INVALID_EVENT: invalid JSON: expected ',' or '}', got ']' at position ${2 * event.length + 3}`,
    );
    expect(index.stats().ranks).toBe(0);
  });
});
