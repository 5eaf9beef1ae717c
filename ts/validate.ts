/**
 * Argument checks shared by both backends. Validation happens once, in TypeScript, before any
 * backend runs, so the native and pure-JS backends reject exactly the same inputs with exactly
 * the same messages.
 * @internal
 * @module
 */

import { invalidArg } from './errors.js';
import { JsonFloat } from './events/json-float.js';
import { MAX_TOKENS_PER_REQUEST } from './limits.js';

/** Largest block size accepted, in tokens (matches `MAX_BLOCK_SIZE` in kvroute-core). */
export const MAX_BLOCK_SIZE = 1 << 20;
const U64_MAX = (1n << 64n) - 1n;

export function describe(value: unknown): string {
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value);
  if (Array.isArray(value)) return 'an array';
  if (value === null) return 'null';
  if (value instanceof JsonFloat) return `${value.text} (a float)`;
  // A plain object is "an object", as the native backend says; an instance of a class is named by it.
  if (typeof value === 'object') return value.constructor === Object || !value.constructor ? 'an object' : value.constructor.name;
  return String(value);
}

export function checkBlockSize(blockSize: unknown, name = 'blockSize'): number {
  if (typeof blockSize !== 'number' || !Number.isInteger(blockSize) || blockSize < 1 || blockSize > MAX_BLOCK_SIZE) {
    throw invalidArg(`${name} must be an integer in [1, ${MAX_BLOCK_SIZE}], got ${describe(blockSize)}`);
  }
  return blockSize;
}

/** Full blocks (windows, for EAGLE) that `tokens` tokens yield; mirrors `block_count` in the core. */
export function blockCount(tokens: number, blockSize: number, eagle: boolean): number {
  return Math.floor((eagle ? Math.max(0, tokens - 1) : tokens) / blockSize);
}

/** A token id: an integer in [0, 2^32). */
export function isTokenId(t: unknown): t is number {
  return typeof t === 'number' && Number.isInteger(t) && t >= 0 && t <= 0xffffffff;
}

/** Accepts a Uint32Array as is, or copies an array of integers in [0, 2^32). */
export function toTokens(tokens: unknown, name = 'tokens'): Uint32Array {
  if (!(tokens instanceof Uint32Array) && !Array.isArray(tokens)) {
    throw invalidArg(`${name} must be a Uint32Array or an array of integers in [0, 2^32), got ${describe(tokens)}`);
  }
  if (tokens.length > MAX_TOKENS_PER_REQUEST)
    throw invalidArg(`${name} has ${tokens.length} tokens; at most ${MAX_TOKENS_PER_REQUEST} are accepted`);
  if (tokens instanceof Uint32Array) return tokens;
  const out = new Uint32Array(tokens.length);
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    if (!isTokenId(t)) {
      throw invalidArg(`${name}[${i}] must be an integer in [0, 2^32), got ${describe(t)}`);
    }
    out[i] = t;
  }
  return out;
}

/** Checks one u64 given as a bigint or a non-negative safe integer. */
export function toU64(value: unknown, name: string): bigint {
  if (typeof value === 'bigint') {
    if (value < 0n || value > U64_MAX) throw invalidArg(`${name} must be in [0, 2^64), got ${value}n`);
    return value;
  }
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return BigInt(value);
  throw invalidArg(`${name} must be a bigint in [0, 2^64) or a non-negative safe integer, got ${describe(value)}`);
}

/** Accepts a BigUint64Array as is, or copies an array of u64 values. */
export function toHashes(hashes: unknown, name = 'hashes'): BigUint64Array {
  if (hashes instanceof BigUint64Array) return hashes;
  if (!Array.isArray(hashes)) {
    throw invalidArg(`${name} must be a BigUint64Array or an array of bigints in [0, 2^64), got ${describe(hashes)}`);
  }
  const out = new BigUint64Array(hashes.length);
  for (let i = 0; i < hashes.length; i++) out[i] = toU64(hashes[i], `${name}[${i}]`);
  return out;
}

export function optionalString(value: unknown, name: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw invalidArg(`${name} must be a string, got ${describe(value)}`);
  return value === '' ? undefined : value;
}

export function optionalBoolean(value: unknown, name: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'boolean') throw invalidArg(`${name} must be a boolean, got ${describe(value)}`);
  return value;
}

/** A safe integer >= 1, or `fallback` when undefined. */
export function positiveInteger(value: unknown, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1)
    throw invalidArg(`${name} must be a positive integer, got ${describe(value)}`);
  return value;
}

/** A safe integer >= 0, or `fallback` when undefined. */
export function nonNegativeInteger(value: unknown, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0)
    throw invalidArg(`${name} must be a non-negative integer, got ${describe(value)}`);
  return value;
}

/** A finite number > 0, or `fallback` when undefined. */
export function positiveNumber(value: unknown, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0)
    throw invalidArg(`${name} must be a finite number > 0, got ${describe(value)}`);
  return value;
}

/** A finite number >= 0, or `fallback` when undefined. */
export function nonNegativeNumber(value: unknown, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0)
    throw invalidArg(`${name} must be a finite number >= 0, got ${describe(value)}`);
  return value;
}

/** `on`/`off` arguments: one of `events`, and a function. */
export function checkListener(event: unknown, listener: unknown, events: readonly string[]): void {
  if (typeof event !== 'string' || !events.includes(event))
    throw invalidArg(`event must be ${events.map((e) => `'${e}'`).join(' or ')}, got ${describe(event)}`);
  if (typeof listener !== 'function') throw invalidArg(`listener must be a function, got ${describe(listener)}`);
}

/** Options objects must be plain objects whose keys are all known: a typo must not be ignored. */
export function checkOptions(opts: unknown, name: string, known: readonly string[]): Record<string, unknown> {
  if (opts === undefined) return {};
  if (opts === null || typeof opts !== 'object' || Array.isArray(opts)) {
    throw invalidArg(`${name} must be an object, got ${describe(opts)}`);
  }
  for (const key of Object.keys(opts)) {
    if (!known.includes(key))
      throw invalidArg(`${name} has an unknown option "${key}"${spellingHint(key, known)} (known: ${known.join(', ')})`);
  }
  return opts as Record<string, unknown>;
}

/**
 * `: did you mean "overlapScoreCredit"?` for a key that is a known one in snake_case, the
 * spelling of Dynamo's configs and of vLLM's; else nothing.
 */
export function spellingHint(key: string, known: readonly string[]): string {
  const camel = key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
  return camel !== key && known.includes(camel) ? `: did you mean "${camel}"?` : '';
}
