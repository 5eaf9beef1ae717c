/**
 * The HTTP status of a typed error, one mapping for every route of the gateway (the proxy's
 * own answers aside, which carry OpenAI's error shape and a Retry-After).
 * @internal
 * @module
 */

import type { KvRouteError } from '../errors.js';

/**
 * The caller's mistake is a 400, but a fleet that cannot serve (no worker could tokenize,
 * closing) is a 503 to retry, as the proxy answers the same condition, and a fault of ours a 500.
 */
export function statusOf(err: KvRouteError): number {
  switch (err.code) {
    case 'ERR_INVALID_ARG':
    case 'ERR_INVALID_EVENT':
      return 400;
    case 'ERR_DUPLICATE_REQUEST':
      return 409;
    case 'ERR_NO_WORKERS':
    case 'ERR_CLOSED':
    case 'ERR_ABORTED':
      return 503;
    default:
      return 500;
  }
}

/** OpenAI's error `type` for a status the gateway answers with (what clients' SDKs raise). */
export function errorType(status: number): string {
  if (status === 404) return 'NotFoundError';
  if (status === 413) return 'RequestTooLarge';
  return status < 500 ? 'BadRequestError' : 'InternalServerError';
}
