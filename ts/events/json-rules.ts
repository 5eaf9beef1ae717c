/**
 * The rules serde_json enforces and lossless-json does not, checked after lossless-json has
 * parsed a text, so that the pure-JS backend accepts and rejects exactly the texts the native
 * backend does. JSON (RFC 8259) leaves each of them to the implementation:
 * - a key may not repeat in one object, even with an identical value (lossless-json reports a
 *   repeat only when the values differ);
 * - a `\u` escape may not leave half of a surrogate pair (serde_json refuses to build such a
 *   string; lossless-json builds it);
 * - an event may nest at most {@link MAX_EVENT_DEPTH} levels (serde_json's recursion limit).
 * The fourth, a number beyond a double's range, is checked where numbers are read (`json.ts`).
 * Together they cost about a tenth of lossless-json's parse (a walk of the parsed value and
 * `indexOf` scans of the text); the exact, slower scans run only when a cheap one says a rule may
 * be broken (a `\uD8..` escape; more colons than parsed keys).
 * @module
 */

import { JsonFloat } from './json-float.js';

/**
 * How deep one event may nest, its own object being level 1: serde_json's recursion limit (128)
 * refuses the 128th level. The array around a batch does not count, as in the native parser,
 * which splits a batch before it parses each event.
 */
export const MAX_EVENT_DEPTH = 127;

/** Why an event breaks the nesting limit. */
export const TOO_DEEP = `nested deeper than ${MAX_EVENT_DEPTH} levels`;

/** Why a parsed text breaks a rule. */
export interface BrokenRule {
  message: string;
  /** The rule broken was the nesting limit (the caller names the event). */
  tooDeep?: true;
}

/**
 * The first broken rule in a parsed text, or `undefined`.
 * @param text the JSON text, already parsed by lossless-json (so known to be valid JSON)
 * @param value what it parsed to
 * @param eventsAt the level its events sit at (1: the value is an event; 2: a batch array), from
 *   which the nesting limit counts (`Infinity`: the caller checks each event)
 */
export function brokenRule(text: string, value: unknown, eventsAt: number): BrokenRule | undefined {
  const surrogate = loneSurrogateEscape(text);
  if (surrogate !== undefined) return { message: `lone surrogate in \\u escape at position ${surrogate}` };
  const keys = countKeys(value, 2 - eventsAt);
  if (keys < 0) return { message: TOO_DEEP, tooDeep: true };
  // Every key is followed by a colon; colons inside strings only add. So as many colons as
  // parsed keys means no key was folded into an earlier one; else count those outside strings.
  if (countColons(text) === keys || countKeyColons(text) === keys) return undefined;
  const repeated = repeatedKey(text);
  return repeated && { message: `duplicate key ${JSON.stringify(repeated.key)} at position ${repeated.position}` };
}

/** Whether an event nests deeper than the limit. */
export function nestsTooDeep(event: unknown): boolean {
  return countKeys(event, 1) < 0;
}

/** The keys of every object in a value, or -1 when it nests deeper than the limit. */
function countKeys(value: unknown, depth: number): number {
  if (typeof value !== 'object' || value === null || value instanceof JsonFloat) return 0;
  if (depth > MAX_EVENT_DEPTH) return -1;
  let keys = 0;
  if (Array.isArray(value)) {
    for (const item of value) {
      const inner = countKeys(item, depth + 1);
      if (inner < 0) return -1;
      keys += inner;
    }
    return keys;
  }
  for (const key in value) {
    const inner = countKeys((value as Record<string, unknown>)[key], depth + 1);
    if (inner < 0) return -1;
    keys += 1 + inner;
  }
  return keys;
}

function countColons(text: string): number {
  let n = 0;
  for (let at = text.indexOf(':'); at !== -1; at = text.indexOf(':', at + 1)) n++;
  return n;
}

/** Colons outside string literals: one per key written. */
function countKeyColons(text: string): number {
  let n = 0;
  let inString = false;
  let quote = text.indexOf('"');
  for (let colon = text.indexOf(':'); colon !== -1; colon = text.indexOf(':', colon + 1)) {
    for (; quote !== -1 && quote < colon; quote = text.indexOf('"', quote + 1)) {
      if (!isEscaped(text, quote)) inString = !inString;
    }
    if (!inString) n++;
  }
  return n;
}

/** Whether the character at `at` follows an odd number of backslashes. */
function isEscaped(text: string, at: number): boolean {
  let start = at;
  while (start > 0 && text.charCodeAt(start - 1) === 0x5c) start--;
  return (at - start) % 2 === 1;
}

/** A string literal, or one structural character (the text is valid JSON, so this tokenizes it). */
const TOKEN = /"[^"\\]*(?:\\.[^"\\]*)*"|[{}[\]:]/gs;

/** The first key repeated in its object (compared decoded, as both parsers do), or `undefined`. */
function repeatedKey(text: string): { key: string; position: number } | undefined {
  const open: (Set<string> | undefined)[] = [];
  let last = { literal: '', position: 0 };
  for (const m of text.matchAll(TOKEN)) {
    const token = m[0];
    if (token === '{') open.push(new Set());
    else if (token === '[') open.push(undefined);
    else if (token === '}' || token === ']') open.pop();
    else if (token !== ':') last = { literal: token, position: m.index };
    else {
      const key = JSON.parse(last.literal) as string;
      const seen = open[open.length - 1];
      if (seen?.has(key)) return { key, position: last.position };
      seen?.add(key);
    }
  }
  return undefined;
}

const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;
/** One escape sequence; the text is valid JSON, so each backslash starts one. */
const ESCAPE = /\\(?:u([0-9a-fA-F]{4})|.)/gs;

/** Where a `\u` escape leaves half of a surrogate pair, or `undefined`. */
function loneSurrogateEscape(text: string): number | undefined {
  if (!SURROGATE_ESCAPE.test(text)) return undefined;
  let high: number | undefined; // where an unpaired leading half was written
  for (const m of text.matchAll(ESCAPE)) {
    const code = m[1] === undefined ? -1 : Number.parseInt(m[1], 16);
    const trailing = code >= 0xdc00 && code <= 0xdfff;
    if (high !== undefined) {
      if (trailing && m.index === high + 6) {
        high = undefined;
        continue;
      }
      return high;
    }
    if (code >= 0xd800 && code <= 0xdbff) high = m.index;
    else if (trailing) return m.index;
  }
  return high;
}
