/**
 * Python's `json.dumps` with its defaults, and `str()` of a JSON value, for text vLLM builds in
 * Python from a request's JSON (a tool call's arguments, say): the same characters reach the
 * chat template, so the same tokens reach the KV cache. Integers and floats are told apart by
 * value, as JSON read in JavaScript cannot tell `1.0` from `1` (see the README's limitations).
 * @internal
 * @module
 */

import { floatRepr, stringRepr } from './python-str.js';

/** A number as Python prints a JSON number it read: an int when integral, else a float's repr. */
function numberText(n: number): string {
  if (Number.isInteger(n)) return Number.isSafeInteger(n) ? String(n) : BigInt(n).toString();
  return floatRepr(n);
}

/** A string as `json.dumps` writes it: `ensure_ascii`, so every non-ASCII character as `\uXXXX` (astral ones as a surrogate pair). */
function jsonString(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const ch = s[i];
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\b') out += '\\b';
    else if (ch === '\f') out += '\\f';
    else if (c < 0x20 || c > 0x7e) out += `\\u${c.toString(16).padStart(4, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}

/** `json.dumps(value)`: `", "` and `": "` between items, ASCII only, keys in their order. */
export function pythonJsonDumps(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (value === true) return 'true';
  if (value === false) return 'false';
  if (typeof value === 'number')
    return Number.isFinite(value) ? numberText(value) : value > 0 ? 'Infinity' : value < 0 ? '-Infinity' : 'NaN';
  if (typeof value === 'string') return jsonString(value);
  if (Array.isArray(value)) return `[${value.map(pythonJsonDumps).join(', ')}]`;
  const entries = Object.entries(value as Record<string, unknown>);
  return `{${entries.map(([k, v]) => `${jsonString(k)}: ${pythonJsonDumps(v)}`).join(', ')}}`;
}

/** `str(value)` of a JSON value as Python holds it: a string as it is, else its repr (`{'a': 1}`, `True`, `None`). */
export function pythonStrOfJson(value: unknown): string {
  return typeof value === 'string' ? value : pythonReprOfJson(value);
}

function pythonReprOfJson(value: unknown): string {
  if (value === null || value === undefined) return 'None';
  if (value === true) return 'True';
  if (value === false) return 'False';
  if (typeof value === 'number') return numberText(value);
  if (typeof value === 'string') return stringRepr(value);
  if (Array.isArray(value)) return `[${value.map(pythonReprOfJson).join(', ')}]`;
  const entries = Object.entries(value as Record<string, unknown>);
  return `{${entries.map(([k, v]) => `${stringRepr(k)}: ${pythonReprOfJson(v)}`).join(', ')}}`;
}
