/**
 * How a call to a worker failed: in the breaker's terms ({@link failureKind}), and in words for
 * the logs, traces and answers ({@link describeError}). Every path that calls a worker (the proxy,
 * the legs, the probes, the passed-on and broadcast routes) reads its undici errors through these.
 * @internal
 * @module
 */

import type { FailureKind } from './breaker.js';

/** Classifies an undici error. */
export function failureKind(err: unknown): FailureKind {
  const code = (err as { code?: string }).code;
  if (code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === 'EHOSTUNREACH' || code === 'UND_ERR_SOCKET') return 'connect';
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || (err as Error).name === 'TimeoutError') return 'timeout';
  return 'status';
}

export function describeError(err: unknown): string {
  const e = err as { code?: string; message?: string };
  return e.code ? `${e.code} ${e.message ?? ''}`.trim() : String(e.message ?? err);
}
