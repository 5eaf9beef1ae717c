/**
 * The checks the gateway's option readers share (`options.ts`, `discovery-options.ts`): each names
 * the key at fault in an `ERR_INVALID_ARG`.
 * @internal
 * @module
 */

import { validateHeaderName, validateHeaderValue } from 'node:http';
import { KvRouteError } from '../errors.js';
import { describe, spellingHint } from '../validate.js';

export function invalid(message: string): KvRouteError {
  return new KvRouteError('ERR_INVALID_ARG', message);
}

/** An object, whatever its keys (another reader checks them: the router's options, headers). */
export function object(value: unknown, at: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw invalid(`${at} must be an object, got ${describe(value)}`);
  return value as Record<string, unknown>;
}

/** An object with only the `keys` given (an unknown one is named, with a spelling hint). */
export function record(value: unknown, at: string, keys: readonly string[]): Record<string, unknown> {
  object(value, at);
  for (const k of Object.keys(value as object)) {
    if (!keys.includes(k)) throw invalid(`${at}: unknown key "${k}"${spellingHint(k, keys)} (known: ${keys.join(', ')})`);
  }
  return value as Record<string, unknown>;
}

export function int(value: unknown, at: string, min: number, max: number, fallback?: number): number {
  if (value === undefined && fallback !== undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw invalid(`${at} must be an integer in [${min}, ${max}], got ${describe(value)}`);
  }
  return value;
}

export function str(value: unknown, at: string): string {
  if (typeof value !== 'string' || value.length === 0) throw invalid(`${at} must be a non-empty string, got ${describe(value)}`);
  return value;
}

/** Whether `name` is an HTTP token (a header name, a method): Node's own check, as its HTTP client and server apply it. */
export function isHttpToken(name: string): boolean {
  try {
    validateHeaderName(name);
    return true;
  } catch {
    return false;
  }
}

/** Whether `value` can be sent as an HTTP header value (Latin-1, no line breaks): Node's own check. */
export function isHttpHeaderValue(value: string): boolean {
  try {
    validateHeaderValue('x', value);
    return true;
  } catch {
    return false;
  }
}
