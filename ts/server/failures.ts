/**
 * How a call to a worker failed: in the breaker's terms ({@link failureKind}), and in words for
 * the logs, traces and answers ({@link describeError}). Every path that calls a worker (the proxy,
 * the legs, the probes, the passed-on and broadcast routes) reads its undici errors through these.
 * @internal
 * @module
 */

import type { FailureKind } from './breaker.js';
import { WorkerCutOff } from './cut-off.js';

/**
 * Classifies an undici error; a request cut because its worker went down is the verdict's:
 * `probe` when the probes found it down, `cut` when its other requests' timeouts did.
 */
export function failureKind(err: unknown): FailureKind {
  if (err instanceof WorkerCutOff) return err.verdict === 'probe' ? 'probe' : 'cut';
  const code = (err as { code?: string }).code;
  if (code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === 'EHOSTUNREACH' || code === 'UND_ERR_SOCKET') return 'connect';
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || (err as Error).name === 'TimeoutError') return 'timeout';
  return 'status';
}

/**
 * Whether a failure of this kind is the worker's own whatever its peer leg did: its connection
 * refused or reset, or the worker went down (its probes' verdict, or its requests' timeouts).
 */
export function workerGone(kind: FailureKind): boolean {
  return kind === 'connect' || kind === 'probe' || kind === 'cut';
}

/** An error in a line: its code, when it has one (`ECONNREFUSED …`, `KVROUTE_WORKER_DOWN …`), then its message. */
export function describeError(err: unknown): string {
  const e = err as { code?: string; message?: string };
  return e.code ? `${e.code} ${e.message ?? ''}`.trim() : String(e.message ?? err);
}
