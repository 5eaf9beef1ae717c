/**
 * JSON text for events, without precision loss. Hashes above 2^53 are the normal case, and
 * `JSON.parse` would silently round them, so text is parsed by `lossless-json` (a strict JSON
 * parser that hands each number over as its literal text):
 * - an integer literal becomes a number when it is a safe integer, else its decimal string, which
 *   every kvroute API accepts as a u64 (and rejects, naming the field, when out of range);
 * - a literal with a fraction or an exponent (or `-0`) is a float: a number, except that a float
 *   whose value is an integer (`45.0`, `1e3`, `45.000000000000001`) becomes a {@link JsonFloat}, so that
 *   an integer field rejects it instead of reading a rounded value. The native backend parses in
 *   Rust with serde_json, which never reads a float as an integer either: both answer the same.
 * - a key repeated with a different value is an error (a document that means two things is not
 *   accepted). An identical repeat passes here, while serde_json rejects every repeated key: the
 *   one known difference between the backends (README, Limitations).
 * - numbers beyond a double's range (`1e400`) are accepted here but rejected by serde_json:
 *   JSON leaves that to implementations, and no event field can hold one.
 * @module
 */

import { parse } from 'lossless-json';
import { KvRouteError } from '../errors.js';

/**
 * A float literal whose value happens to be an integer (`45.0`, `1e3`), as {@link parseEvents}
 * returns it: every integer field rejects it, as serde_json does, instead of reading a rounded
 * value. `toJSON()` and `Number(x)` give its value.
 * @group Events
 */
export class JsonFloat {
  /** @param text the literal as written in the JSON text */
  constructor(readonly text: string) {}

  /** The literal as written. */
  toString(): string {
    return this.text;
  }

  /** Its value as a number. */
  valueOf(): number {
    return Number(this.text);
  }

  /** Written back as a plain JSON number. */
  toJSON(): number {
    return Number(this.text);
  }
}

const INTEGER = /^-?[0-9]+$/;

function parseNumber(text: string): unknown {
  if (INTEGER.test(text) && text !== '-0') {
    const n = Number(text);
    return Number.isSafeInteger(n) ? n : text;
  }
  const n = Number(text);
  return Number.isInteger(n) ? new JsonFloat(text) : n;
}

/** A key repeated with a different value (lossless-json lets an identical repeat through). */
function rejectDuplicateKey({ key, position }: { key: string; position: number }): never {
  throw new SyntaxError(`duplicate key "${key}" at position ${position}`);
}

function parseOne(text: string, where: string): unknown {
  try {
    return parse(text, null, { parseNumber, onDuplicateKey: rejectDuplicateKey });
  } catch (err) {
    throw new KvRouteError('ERR_INVALID_EVENT', `${where}invalid JSON: ${(err as Error).message}`);
  }
}

/** Parses one JSON value. */
export function parseJsonLossless(text: string): unknown {
  return parseOne(text, '');
}

/**
 * Parses a batch: a JSON array, or NDJSON (one event per line; blank lines are skipped).
 * Returns the values with, for NDJSON, their 1-based line numbers for error messages.
 */
export function parseJsonBatch(text: string): { values: unknown[]; lines?: number[] } {
  const trimmed = text.trimStart();
  if (trimmed.startsWith('[')) {
    const values = parseOne(text, '');
    if (!Array.isArray(values)) throw new KvRouteError('ERR_INVALID_EVENT', 'invalid JSON: expected an array of events');
    return { values };
  }
  const values: unknown[] = [];
  const lines: number[] = [];
  const rows = text.split('\n');
  for (let i = 0; i < rows.length; i++) {
    if (rows[i].trim() === '') continue;
    values.push(parseOne(rows[i], `line ${i + 1}: `));
    lines.push(i + 1);
  }
  return { values, lines };
}

/** JSON text of values that may contain bigints (written as plain JSON numbers). */
export function stringifyLossless(value: unknown): string {
  // A per-call random marker cannot collide with a real string value.
  const marker = `kvroute-bigint-${Math.random().toString(36).slice(2)}:`;
  const json = JSON.stringify(value, (_key, v) => (typeof v === 'bigint' ? `${marker}${v}` : v));
  return json.replace(new RegExp(`"${marker}(\\d+)"`, 'g'), '$1');
}
