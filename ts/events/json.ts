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
 * - a number beyond a double's range (`1e400`) is an error, as in serde_json;
 * - a syntax error is worded by `json-syntax.ts` (as the native backend words it), not as
 *   lossless-json does;
 * - so are a repeated key, a `\u` escape of half a surrogate pair and an event nested deeper than
 *   serde_json's limit (`json-rules.ts`): JSON leaves all four to implementations, and kvroute's
 *   two backends answer alike, in the same words (the native backend, which reads event by
 *   event, looks over a refused text for what this parser meets first: `json/refusal.rs`). A
 *   text deep enough to overflow lossless-json's stack is refused as those rules would refuse
 *   it, not with the engine's "Maximum call stack size exceeded".
 * @module
 */

import { parse } from 'lossless-json';
import { KvRouteError } from '../errors.js';
import { JsonFloat } from './json-float.js';
import { brokenRule, deepItem, eventNesting, MAX_DOCUMENT_DEPTH, type Nesting, outOfRange, overflowRule, tooDeep } from './json-rules.js';
import { syntaxError } from './json-syntax.js';

const INTEGER = /^-?[0-9]+$/;

/** A number literal beyond a double's range: the parser's first fault, worded by `json-rules.ts`. */
class NumberOutOfRange extends SyntaxError {}

function parseNumber(text: string): unknown {
  const n = Number(text);
  if (!Number.isFinite(n)) throw new NumberOutOfRange(outOfRange(text));
  if (INTEGER.test(text) && text !== '-0') return Number.isSafeInteger(n) ? n : text;
  return Number.isInteger(n) ? new JsonFloat(text) : n;
}

/** The nesting limits of a value that is an event, and of a batch array of them. */
const AN_EVENT = eventNesting(1);
const A_BATCH = eventNesting(2);
const A_DOCUMENT: Nesting = { level: 1, max: MAX_DOCUMENT_DEPTH };

/** A repeated key keeps its first value: `json-rules.ts` refuses every repeat, with its position. */
const keepFirst = () => undefined;

/** Whether an error is the stack overflowing (lossless-json recurses once per level). */
const isStackOverflow = (err: unknown) => err instanceof RangeError && /call stack/i.test(err.message);

/**
 * Parses one value held to `nesting`; `eventsAt` is the level its events sit at (2: a batch array
 * of them), to name the one nested too deep.
 */
function parseOne(text: string, where: string, nesting: Nesting, eventsAt = 1): unknown {
  let value: unknown;
  try {
    value = parse(text, null, { parseNumber, onDuplicateKey: keepFirst });
  } catch (err) {
    if (err instanceof NumberOutOfRange) throw invalid(where, -1, err.message);
    // A syntax error, in the words both backends use (lossless-json's own are its own), even
    // where the text nests deep enough to overflow lossless-json's stack before it is met.
    const syntax = syntaxError(text);
    if (syntax !== undefined || !isStackOverflow(err)) throw invalid(where, -1, syntax ?? (err as Error).message);
    const why = overflowRule(text, nesting.max);
    const deep = eventsAt === 2 && why === tooDeep(nesting.max) ? deepItem(text, nesting) : -1;
    throw invalid(where, deep, why);
  }
  const broken = brokenRule(text, value, nesting);
  if (broken !== undefined) {
    const deep = broken.tooDeep && eventsAt === 2 ? deepItem(text, nesting) : -1;
    throw invalid(where, deep, broken.message);
  }
  return value;
}

/** A refusal of invalid JSON, naming the batch's event `deep` when it is one (>= 0). */
function invalid(where: string, deep: number, why: string): KvRouteError {
  return new KvRouteError('ERR_INVALID_EVENT', `${where}${deep >= 0 ? `events[${deep}]: ` : ''}invalid JSON: ${why}`);
}

/** Parses one JSON value, held to an event's nesting limit. */
export function parseJsonLossless(text: string): unknown {
  return parseOne(text, '', AN_EVENT);
}

/**
 * Parses a warm-start snapshot: held to {@link MAX_DOCUMENT_DEPTH} as a whole (the caller holds
 * each event to an event's limit with `nestsTooDeep`).
 */
export function parseJsonDocument(text: string): unknown {
  return parseOne(text, '', A_DOCUMENT);
}

/** One event's text, named `event` in messages as the native backend names it. */
export function parseJsonEvent(text: string): unknown {
  return parseOne(text, 'event: ', AN_EVENT);
}

/**
 * JSON's whitespace (RFC 8259), which alone precedes a batch array or makes an NDJSON line blank,
 * as in the native parser: `trim()` would also skip the byte-order mark and Unicode spaces, which
 * no JSON parser skips (and Rust's `trim` a different set of them).
 */
const BEFORE_ARRAY = /^[ \t\n\r]*\[/;
const BLANK_LINE = /^[ \t\r]*$/;

/**
 * Parses a batch: a JSON array, or NDJSON (one event per line; lines of JSON whitespace are
 * skipped). Returns the values with, for NDJSON, their 1-based line numbers for error messages.
 */
export function parseJsonBatch(text: string): { values: unknown[]; lines?: number[] } {
  if (BEFORE_ARRAY.test(text)) {
    const values = parseOne(text, '', A_BATCH, 2);
    if (!Array.isArray(values)) throw new KvRouteError('ERR_INVALID_EVENT', 'invalid JSON: expected an array of events');
    return { values };
  }
  const values: unknown[] = [];
  const lines: number[] = [];
  const rows = text.split('\n');
  for (let i = 0; i < rows.length; i++) {
    if (BLANK_LINE.test(rows[i])) continue;
    values.push(parseOne(rows[i], `line ${i + 1}: `, AN_EVENT));
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
