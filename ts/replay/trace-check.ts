/**
 * Checks of a {@link Trace} built in code rather than parsed: `replay({ trace })`,
 * `upperBoundHitRatio` and `synthesizeTokens` take one, and a request with too few hash ids,
 * a block size of 0 or a fractional length would otherwise become wrong tokens, a hang or a
 * TypeError deep in the simulation. The rules are those `parseTrace` applies to each line.
 */

import { KvRouteError } from '../errors.js';
import { describe } from '../validate.js';
import type { Trace, TraceRequest } from './trace.js';

function invalid(message: string): never {
  throw new KvRouteError('ERR_INVALID_ARG', message);
}

function integerAtLeast(value: unknown, min: number, at: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min)
    invalid(`${at} must be an integer >= ${min}, got ${describe(value)}`);
  return value;
}

function nonNegative(value: unknown, at: string): void {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0)
    invalid(`${at} must be a non-negative number of ms, got ${describe(value)}`);
}

/** Tokens per hash id: a positive integer. */
export function checkTraceBlockSize(value: unknown, at: string): number {
  return integerAtLeast(value, 1, at);
}

/** One request, against the trace's block size. */
export function checkTraceRequest(value: unknown, traceBlockSize: number, at: string): TraceRequest {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) invalid(`${at} must be a trace request, got ${describe(value)}`);
  const r = value as Record<string, unknown>;
  nonNegative(r.timestampMs, `${at}.timestampMs`);
  const inputLength = integerAtLeast(r.inputLength, 1, `${at}.inputLength`);
  integerAtLeast(r.outputLength, 1, `${at}.outputLength`);
  const ids = r.hashIds;
  if (!Array.isArray(ids) || ids.length === 0) invalid(`${at}.hashIds must be a non-empty array of integers, got ${describe(ids)}`);
  for (let i = 0; i < ids.length; i++) integerAtLeast(ids[i], 0, `${at}.hashIds[${i}]`);
  if (inputLength > ids.length * traceBlockSize)
    invalid(`${at}.inputLength ${inputLength} exceeds ${ids.length} hash ids × ${traceBlockSize} tokens`);
  if (r.delayMs !== undefined) nonNegative(r.delayMs, `${at}.delayMs`);
  for (const k of ['sessionId', 'chatId', 'parentChatId'] as const)
    if (r[k] !== undefined && typeof r[k] !== 'string') invalid(`${at}.${k} must be a string, got ${describe(r[k])}`);
  if (r.turn !== undefined) integerAtLeast(r.turn, 0, `${at}.turn`);
  if (r.line !== undefined) integerAtLeast(r.line, 0, `${at}.line`);
  return value as TraceRequest;
}

/** A whole trace: its block size and every request. */
export function checkTrace(value: unknown, at: string): Trace {
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    invalid(`${at} must be a trace (from loadTrace, parseTrace or generateTrace), got ${describe(value)}`);
  const t = value as Record<string, unknown>;
  const traceBlockSize = checkTraceBlockSize(t.traceBlockSize, `${at}.traceBlockSize`);
  if (!Array.isArray(t.requests)) invalid(`${at}.requests must be an array of requests, got ${describe(t.requests)}`);
  if (t.requests.length === 0) invalid(`${at}.requests is empty`);
  for (const [i, r] of t.requests.entries()) checkTraceRequest(r, traceBlockSize, `${at}.requests[${i}]`);
  if (t.path !== undefined && typeof t.path !== 'string') invalid(`${at}.path must be a string, got ${describe(t.path)}`);
  return value as Trace;
}
