/**
 * JSON text for events, without precision loss. Hashes above 2^53 are the normal case, and
 * `JSON.parse` would silently round them. Before parsing, integer literals with 16 or more digits
 * (the only ones that can exceed 2^53) are wrapped in quotes; the validator accepts u64 values as
 * decimal strings, so nothing else has to change. The scan skips string contents, so text inside
 * strings is never touched.
 * @module
 */

import { KvRouteError } from '../errors.js';

const QUOTE = 34;
const BACKSLASH = 92;
const MINUS = 45;
const ZERO = 48;
const NINE = 57;
const DOT = 46;
const LOWER_E = 101;
const UPPER_E = 69;

/** Quotes every integer literal of 16+ digits outside strings. */
function quoteLongIntegers(text: string): string {
  let out = '';
  let copied = 0;
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i++;
      while (i < n) {
        const d = text.charCodeAt(i);
        if (d === BACKSLASH) i += 2;
        else if (d === QUOTE) break;
        else i++;
      }
      i++;
      continue;
    }
    if (c === MINUS || (c >= ZERO && c <= NINE)) {
      const start = i;
      i++;
      while (i < n && text.charCodeAt(i) >= ZERO && text.charCodeAt(i) <= NINE) i++;
      const next = i < n ? text.charCodeAt(i) : 0;
      const isInteger = next !== DOT && next !== LOWER_E && next !== UPPER_E;
      const digits = i - start - (c === MINUS ? 1 : 0);
      if (isInteger && digits >= 16) {
        out += `${text.slice(copied, start)}"${text.slice(start, i)}"`;
        copied = i;
      }
      continue;
    }
    i++;
  }
  return copied === 0 ? text : out + text.slice(copied);
}

function parseOne(text: string, where: string): unknown {
  try {
    return JSON.parse(quoteLongIntegers(text));
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
