/**
 * The rules serde_json enforces and lossless-json does not, checked after lossless-json has
 * parsed a text, so that the pure-JS backend accepts and rejects exactly the texts the native
 * backend does. JSON (RFC 8259) leaves each of them to the implementation:
 * - a key may not repeat in one object, even with an identical value (lossless-json is told to
 *   keep the first value, and a repeat is found here, so that every repeat is refused alike);
 * - a `\u` escape may not leave half of a surrogate pair (serde_json refuses to build such a
 *   string; lossless-json builds it);
 * - an event may nest at most {@link MAX_EVENT_DEPTH} levels (serde_json's recursion limit), a
 *   warm-start snapshot around its events {@link MAX_DOCUMENT_DEPTH} (the native reader's own
 *   scan, `json/rules.rs`, holds the whole snapshot to these rules as this module does).
 * The fifth, a number beyond a double's range, is checked where numbers are read (`json.ts`).
 * A text breaking several is refused for the first in this order: a number (the parser stops
 * there), a lone surrogate, the nesting, a repeated key.
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

/**
 * How deep a warm-start snapshot may nest, its outermost value being level 1. Its events sit at
 * level 4 and may nest {@link MAX_EVENT_DEPTH} levels each, so a valid snapshot reaches 130; the
 * bound is there so that no answer depends on stack size (lossless-json recurses, and overflows
 * the stack at about 5,000 levels).
 */
export const MAX_DOCUMENT_DEPTH = 512;

/** Why a value breaks a nesting limit of `levels`. */
export const tooDeep = (levels: number) => `nested deeper than ${levels} levels`;

/** Why an event breaks the nesting limit. */
export const TOO_DEEP = tooDeep(MAX_EVENT_DEPTH);

/** Where the nesting limit counts from and what it is. */
export interface Nesting {
  /** The level the parsed value itself is at (1: it is the outermost value counted). */
  level: number;
  /** The deepest level allowed. */
  max: number;
}

/** The nesting limit of a value whose events sit at level `eventsAt` (1: it is an event; 2: a batch of them). */
export const eventNesting = (eventsAt: number): Nesting => ({ level: 2 - eventsAt, max: MAX_EVENT_DEPTH });

const surrogateMessage = (position: number) => `lone surrogate in \\u escape at position ${position}`;

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
 * @param nesting the nesting limit ({@link eventNesting} for events)
 */
export function brokenRule(text: string, value: unknown, nesting: Nesting): BrokenRule | undefined {
  const surrogate = loneSurrogateEscape(text);
  if (surrogate !== undefined) return { message: surrogateMessage(surrogate) };
  const keys = countKeys(value, nesting.level, nesting.max);
  if (keys < 0) return { message: tooDeep(nesting.max), tooDeep: true };
  // Every key is followed by a colon; colons inside strings only add. So as many colons as
  // parsed keys means no key was folded into an earlier one; else count those outside strings.
  if (countColons(text) === keys || countKeyColons(text) === keys) return undefined;
  // A key was repeated, and the value parsed for its repeat was dropped unwalked: the text says
  // whether that value nests too deep, which outranks the repeat.
  if (deepItem(text, nesting) >= 0) return { message: tooDeep(nesting.max), tooDeep: true };
  const repeated = repeatedKey(text);
  return repeated && { message: `duplicate key ${JSON.stringify(repeated.key)} at position ${repeated.position}` };
}

/**
 * Why a text that overflowed the parser's stack is refused: a number out of range, else a lone
 * surrogate, else its nesting (past any limit: the stack holds thousands of levels), as the rules
 * rank them for a text parsed whole.
 */
export function overflowRule(text: string, max: number): string {
  const number = numberOutOfRange(text);
  if (number !== undefined) return number;
  const surrogate = loneSurrogateEscape(text);
  return surrogate === undefined ? tooDeep(max) : surrogateMessage(surrogate);
}

/** A JSON string literal, as a pattern the tokenizers below share. */
const STRING = String.raw`"[^"\\]*(?:\\.[^"\\]*)*"`;

/** A string literal, or one structural character (in JSON text this tokenizes it). */
const TOKEN = new RegExp(`${STRING}|[{}[\\]:,]`, 'gs');

/**
 * Where a text nests past `nesting`, found in the text rather than in what it parsed to (a
 * repeated key's dropped value counts; a text too deep to parse has no value): the item of the
 * top-level array that does first (0 when the text is not an array), or -1 if none does. For a
 * batch it names the event, as the native backend, which parses each event alone, names it.
 */
export function deepItem(text: string, nesting: Nesting): number {
  // A container at depth d (the outermost at 1) is at level nesting.level + d - 1.
  const deepest = nesting.max - nesting.level + 1;
  let depth = 0;
  let item = 0;
  let array = false; // whether the outermost container is an array, whose items are counted
  for (const m of text.matchAll(TOKEN)) {
    const c = m[0];
    if (c === '[' || c === '{') {
      if (depth === 0) array = c === '[';
      if (++depth > deepest) return item;
    } else if (c === ']' || c === '}') depth--;
    else if (c === ',' && depth === 1 && array) item++;
  }
  return -1;
}

/** Why a number literal is refused, as the parser words it (`json.ts`). */
export function outOfRange(literal: string): string {
  return `number out of range: ${literal.length > 40 ? `${literal.slice(0, 40)}…` : literal}`;
}

/** A string literal, or a number literal (the text is JSON up to where its parser stopped). */
const STRING_OR_NUMBER = new RegExp(`${STRING}|-?[0-9][0-9.eE+-]*`, 'gs');

/** Why the first number out of a double's range is refused, or `undefined`. */
function numberOutOfRange(text: string): string | undefined {
  for (const m of text.matchAll(STRING_OR_NUMBER)) {
    if (m[0][0] !== '"' && !Number.isFinite(Number(m[0]))) return outOfRange(m[0]);
  }
  return undefined;
}

/** Whether an event nests deeper than the limit. */
export function nestsTooDeep(event: unknown): boolean {
  return countKeys(event, 1, MAX_EVENT_DEPTH) < 0;
}

/** The keys of every object in a value, or -1 when it nests deeper than `max`. */
function countKeys(value: unknown, depth: number, max: number): number {
  if (typeof value !== 'object' || value === null || value instanceof JsonFloat) return 0;
  if (depth > max) return -1;
  let keys = 0;
  if (Array.isArray(value)) {
    for (const item of value) {
      const inner = countKeys(item, depth + 1, max);
      if (inner < 0) return -1;
      keys += inner;
    }
    return keys;
  }
  for (const key in value) {
    const inner = countKeys((value as Record<string, unknown>)[key], depth + 1, max);
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

/** The first key repeated in its object (compared decoded, as both parsers do), or `undefined`. */
function repeatedKey(text: string): { key: string; position: number } | undefined {
  const open: (Set<string> | undefined)[] = [];
  let last = { literal: '', position: 0 };
  for (const m of text.matchAll(TOKEN)) {
    const token = m[0];
    if (token === '{') open.push(new Set());
    else if (token === '[') open.push(undefined);
    else if (token === '}' || token === ']') open.pop();
    else if (token === ',') continue;
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
