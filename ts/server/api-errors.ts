/**
 * The gateway's own errors in the shape of the API a client speaks. Anthropic's SDKs read
 * `{type: "error", error: {type, message}}` with Anthropic's error types, and a stream's failure
 * as an `error` event; OpenAI's read `{error: {message, type, param, code}}`. A worker's own
 * answers pass as they came (vLLM answers the Messages API in Anthropic's shape itself).
 * @internal
 * @module
 */

import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ReadRequest } from './prompt.js';

/** OpenAI's error body. */
export function openAiError(message: string, type: string, code: number): unknown {
  return { error: { message, type, param: null, code } };
}

/** Anthropic's error type for an HTTP status. */
export function anthropicErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 413) return 'request_too_large';
  if (status === 429) return 'rate_limit_error';
  if (status === 503 || status === 529) return 'overloaded_error';
  if (status >= 500) return 'api_error';
  return 'invalid_request_error';
}

export function anthropicError(message: string, status: number): unknown {
  return { type: 'error', error: { type: anthropicErrorType(status), message } };
}

/** An error body for `read`'s client: Anthropic's shape for the Messages API, OpenAI's otherwise. */
export function apiError(read: Pick<ReadRequest, 'api'>, message: string, type: string, status: number): unknown {
  return read.api === 'anthropic' ? anthropicError(message, status) : openAiError(message, type, status);
}

/** A stream's last event when its worker fails mid-way: Anthropic's `error` event, or an OpenAI error chunk. */
export function streamErrorEvent(read: Pick<ReadRequest, 'api'>, message: string): string {
  if (read.api === 'anthropic') return `event: error\ndata: ${JSON.stringify(anthropicError(message, 502))}\n\n`;
  return `data: ${JSON.stringify(openAiError(message, 'ServiceUnavailableError', 502))}\n\n`;
}

/** Whether `body` is the gateway's OpenAI error (`{error: {message, type, param, code}}` and nothing else). */
function gatewayOpenAiError(body: unknown): body is { error: { message: string } } {
  if (body === null || typeof body !== 'object' || Object.keys(body).length !== 1) return false;
  const e = (body as { error?: unknown }).error;
  return e !== null && typeof e === 'object' && typeof (e as { message?: unknown }).message === 'string' && 'param' in e && 'code' in e;
}

/**
 * An `onSend` hook for the Messages API's routes: the gateway's refusals there (no key, a bad
 * body, no worker, a full queue), written in OpenAI's shape by the code every route shares, are
 * sent in Anthropic's. Anything else (a worker's own answer) passes unchanged.
 */
export async function anthropicErrorBodies(_req: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> {
  if (reply.statusCode < 400 || typeof payload !== 'string' || !payload.startsWith('{"error":')) return payload;
  let body: unknown;
  try {
    body = JSON.parse(payload);
  } catch {
    return payload;
  }
  if (!gatewayOpenAiError(body)) return payload;
  void reply.type('application/json');
  return JSON.stringify(anthropicError(body.error.message, reply.statusCode));
}
