/**
 * The Responses API's routes besides creation: `GET /v1/responses/{id}` (a stored response, or
 * with `?stream=true` its events) and `POST /v1/responses/{id}/cancel`. Each goes to the worker
 * holding the response (see `response-owners.ts`), with its query string, and that worker's
 * answer, status and body, goes back as it comes (a stream is not buffered). Creation
 * (`POST /v1/responses`) is routed like a chat completion, in `proxy.ts`.
 * @internal
 * @module
 */

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { describeError, failureKind } from './failures.js';
import { finishPassedOn, startPassedOn } from './passthrough.js';
import { MAX_RESPONSE_ID } from './prompt.js';
import { contentType, openAiError, type ProxyContext, refuse } from './proxy.js';
import { findOwner } from './response-owners.js';
import { upstreamAttributes } from './tracing/request-trace.js';

/** Registers the retrieval and cancel routes on the proxy (behind its API-key check). */
export function registerResponses(proxy: FastifyInstance, ctx: ProxyContext): void {
  proxy.get('/v1/responses/:id', (req, reply) => toOwner(ctx, req, reply, 'GET', ''));
  proxy.post('/v1/responses/:id/cancel', (req, reply) => toOwner(ctx, req, reply, 'POST', '/cancel'));
}

async function toOwner(ctx: ProxyContext, req: FastifyRequest, reply: FastifyReply, method: 'GET' | 'POST', suffix: string) {
  const started = performance.now();
  const { id } = req.params as { id: string };
  if (id.length > MAX_RESPONSE_ID)
    return reply
      .code(400)
      .send(openAiError(`a response id must be at most ${MAX_RESPONSE_ID} characters, got ${id.length}`, 'BadRequestError', 400));
  const label = `/v1/responses/{id}${suffix}`;
  const start = startPassedOn(ctx, req, reply, label);
  if (!start) return reply;
  const { clientId, id: reqId, abort, trace } = start;
  let worker: bigint | undefined;
  let status: number | 'client_closed' | 'upstream_error' | undefined;
  try {
    const found = await findOwner(ctx, id, undefined, abort.signal);
    if (typeof found !== 'bigint') {
      status = found.refused;
      return refuse(ctx, reply, found);
    }
    worker = found;
    const member = ctx.fleet.get(worker);
    const pool = member?.pool;
    const query = req.url.includes('?') ? req.url.slice(req.url.indexOf('?')) : '';
    const path = `/v1/responses/${encodeURIComponent(id)}${suffix}${query}`;
    const owner = worker;
    const attempt = trace.attempt(`${method} ${label}`, () => upstreamAttributes(member?.spec.url, path, method, owner, undefined, 0));
    try {
      if (!pool) throw Object.assign(new Error('the worker was removed'), { code: 'ECONNREFUSED' });
      // Cut, too, when the worker goes down (cut-off.ts).
      const res = await member.cutOff.request(pool, {
        method,
        path,
        headers: { ...ctx.fleet.upstreamHeaders, 'x-request-id': clientId ?? reqId, ...attempt.headers },
        signal: abort.signal,
      });
      status = res.statusCode;
      attempt.end(status);
      if (res.statusCode >= 500) ctx.fleet.failure(worker, 'status', `answered ${res.statusCode}`);
      else ctx.fleet.success(worker);
      // The worker no longer has it (restarted): the next lookup asks them all.
      if (res.statusCode === 404) ctx.owners.forget(id);
      return reply
        .code(res.statusCode)
        .header('x-kvroute-request-id', reqId)
        .header('x-kvroute-worker', String(worker))
        .type(contentType(res.headers, 'application/json'))
        .send(res.body);
    } catch (err) {
      if (abort.signal.aborted) {
        attempt.end('client_closed');
        status = 'client_closed';
        return reply;
      }
      attempt.end(failureKind(err), describeError(err));
      status = 502;
      ctx.fleet.failure(worker, failureKind(err), describeError(err));
      return refuse(ctx, reply, {
        refused: 502,
        reason: 'upstream_failed',
        message: `worker ${worker}, which holds response ${id}, failed: ${describeError(err)}`,
      });
    }
  } finally {
    finishPassedOn(ctx, { id: reqId, clientId, trace, path: label, worker, status, started }, { responseId: id });
  }
}
