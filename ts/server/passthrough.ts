/**
 * The engines' endpoints besides completions, passed on unchanged to a worker serving the
 * request's `model`: vLLM's tokenizing (`/tokenize`, `/detokenize`) and pooling APIs
 * (embeddings, scores, reranking, classification), and the engines' descriptions of themselves
 * (GET `/version`, SGLang's `/get_model_info` and `/get_server_info`). Clients of an engine call
 * them at the same address as the completions, so a gateway in front of it that answered 404
 * would break them. They carry no
 * generation whose KV cache routing could reuse, so each goes to the worker with the fewest
 * passed-on requests in flight (then in turn), not through the router. A worker that fails
 * before it answers (no connection, 5xx) counts against its health and the request goes to the
 * next, as completions do; any other answer is the client's, status and body, with the
 * engine's content type.
 * @internal
 * @module
 */

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Dispatcher } from 'undici';
import { anthropicErrorBodies } from './api-errors.js';
import type { InFlightCutOff } from './cut-off.js';
import { describeError, failureKind } from './failures.js';
import { clientRequestId, contentType, openAiError, type ProxyContext, reject, requestTrace } from './proxy.js';
import { type RequestTrace, upstreamAttributes } from './tracing/request-trace.js';

/** The POST routes passed on (vLLM's paths; the pooling ones under both names vLLM serves). */
export const PASSTHROUGH_PATHS = [
  '/tokenize',
  '/detokenize',
  '/v1/embeddings',
  '/pooling',
  '/classify',
  '/score',
  '/v1/score',
  '/rerank',
  '/v1/rerank',
  '/v2/rerank',
  // Anthropic's token count (vLLM's), which runs no model.
  '/v1/messages/count_tokens',
] as const;

/**
 * The GET routes passed on, query string and all: the engine's version (vLLM's and SGLang's
 * `/version`) and SGLang's model and server descriptions, which its own clients read when they
 * connect (SGLang's `RuntimeEndpoint` asks `/get_model_info` first).
 */
export const PASSTHROUGH_GET_PATHS = ['/version', '/get_model_info', '/get_server_info', '/server_info'] as const;

/** Registers the passed-on routes on the proxy (behind its API-key check). */
export function registerPassthrough(proxy: FastifyInstance, ctx: ProxyContext): void {
  const inFlight = new Map<bigint, number>();
  let turn = 0;
  /** The workers to try, fewest passed-on requests in flight first, ties in turn. */
  const order = (model: unknown): bigint[] => {
    const ids = ctx.fleet.routableFor(model);
    const start = turn++;
    const rotated = ids.map((_, i) => ids[(start + i) % ids.length]);
    return rotated.sort((a, b) => (inFlight.get(a) ?? 0) - (inFlight.get(b) ?? 0));
  };
  for (const path of PASSTHROUGH_PATHS) {
    // The Messages API's clients read Anthropic's error shape.
    const options = path.startsWith('/v1/messages') ? { onSend: anthropicErrorBodies } : {};
    proxy.post(path, options, (req, reply) => passOn(ctx, req, reply, 'POST', path, order, inFlight));
  }
  for (const path of PASSTHROUGH_GET_PATHS) proxy.get(path, (req, reply) => passOn(ctx, req, reply, 'GET', path, order, inFlight));
}

async function passOn(
  ctx: ProxyContext,
  req: FastifyRequest,
  reply: FastifyReply,
  method: 'GET' | 'POST',
  path: string,
  order: (model: unknown) => bigint[],
  inFlight: Map<bigint, number>,
): Promise<FastifyReply> {
  const started = performance.now();
  // A POST's JSON body, or a GET's query string, goes on as it came.
  const body = method === 'POST' ? (req.body as object) : undefined;
  const target = method === 'POST' ? path : req.url;
  const start = startPassedOn(ctx, req, reply, path, method === 'POST');
  if (!start) return reply;
  const { clientId, id, abort, trace } = start;
  const model = body === undefined ? (req.query as { model?: unknown }).model : (body as { model?: unknown }).model;
  const candidates = order(model);
  let worker: bigint | undefined;
  let status: number | 'client_closed' | undefined;
  let lastFailure = '';
  let tries = 0;
  try {
    for (const candidate of candidates.slice(0, ctx.opts.upstream.retries + 1)) {
      const member = ctx.fleet.get(candidate);
      const pool = member?.pool;
      if (!pool) continue;
      const resend = tries++;
      worker = candidate;
      inFlight.set(candidate, (inFlight.get(candidate) ?? 0) + 1);
      const url = member.spec.url;
      const attempt = trace.attempt(`${method} ${path}`, () => upstreamAttributes(url, path, method, candidate, undefined, resend));
      try {
        const res = await request(
          ctx,
          member.cutOff,
          pool,
          target,
          body,
          { 'x-request-id': clientId ?? id, ...attempt.headers },
          abort.signal,
        );
        if (res.statusCode >= 500) {
          await res.body.dump().catch(() => undefined);
          attempt.end(res.statusCode);
          lastFailure = `worker ${candidate} answered ${res.statusCode}`;
          ctx.fleet.failure(candidate, 'status', `answered ${res.statusCode}`);
          ctx.metrics.retries.inc({ reason: 'status' });
          continue;
        }
        ctx.fleet.success(candidate);
        status = res.statusCode;
        const text = await res.body.text();
        attempt.end(res.statusCode);
        return reply
          .code(res.statusCode)
          .header('x-kvroute-request-id', id)
          .header('x-kvroute-worker', String(candidate))
          .type(contentType(res.headers, 'application/json'))
          .send(text);
      } catch (err) {
        if (abort.signal.aborted) {
          attempt.end('client_closed');
          status = 'client_closed';
          return reply;
        }
        attempt.end(failureKind(err), describeError(err));
        lastFailure = `worker ${candidate}: ${describeError(err)}`;
        ctx.fleet.failure(candidate, failureKind(err), describeError(err));
        ctx.metrics.retries.inc({ reason: failureKind(err) });
      } finally {
        const left = (inFlight.get(candidate) ?? 1) - 1;
        if (left > 0) inFlight.set(candidate, left);
        else inFlight.delete(candidate);
      }
    }
    status = lastFailure ? 502 : 503;
    if (!lastFailure) worker = undefined;
    return reject(
      ctx,
      reply,
      status,
      lastFailure ? 'upstream_failed' : 'no_worker',
      `no worker could serve ${path} (${lastFailure || 'no healthy worker'})`,
    );
  } finally {
    finishPassedOn(ctx, { id, clientId, trace, path, worker, status, started }, { model: typeof model === 'string' ? model : null });
  }
}

/** A passed-on request under way: the client's `X-Request-Id` and trace context, the gateway's id, and the abort of its upstream request when the client leaves. */
export interface PassedOn {
  clientId: string | undefined;
  /** The request's spans (the client's trace context, passed on, when there are none). */
  trace: RequestTrace;
  id: string;
  abort: AbortController;
}

/**
 * Starts a passed-on request; undefined when it was answered 400 (an `X-Request-Id` too long, or
 * with `objectBody` a body that is not a JSON object).
 */
export function startPassedOn(
  ctx: ProxyContext,
  req: FastifyRequest,
  reply: FastifyReply,
  route: string,
  objectBody = false,
): PassedOn | undefined {
  const body = req.body;
  const trace = requestTrace(ctx, req, route);
  if (objectBody && (body === null || typeof body !== 'object' || Array.isArray(body))) {
    trace.end(400);
    void reply.code(400).send(openAiError('the request body must be a JSON object', 'BadRequestError', 400));
    return undefined;
  }
  let clientId: string | undefined;
  try {
    clientId = clientRequestId(req);
  } catch (err) {
    trace.end(400);
    void reply.code(400).send(openAiError((err as Error).message, 'BadRequestError', 400));
    return undefined;
  }
  const abort = new AbortController();
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) abort.abort();
  });
  return { clientId, trace, id: `kvr-${ctx.nextId++}`, abort };
}

/** What a passed-on request did, for its count and log line. */
export interface PassedOnOutcome {
  id: string;
  clientId: string | undefined;
  trace: RequestTrace;
  /** The route, as the metric labels it. */
  path: string;
  worker: bigint | undefined;
  status: number | string | undefined;
  started: number;
}

/** Counts a passed-on request, ends its span (unless ended before) and writes its log line (with `extra` fields). */
export function finishPassedOn(ctx: ProxyContext, o: PassedOnOutcome, extra: Record<string, unknown>): void {
  if (o.worker !== undefined) o.trace.set(() => ({ 'kvroute.worker': String(o.worker) }));
  o.trace.end(o.status);
  ctx.metrics.passedOn.inc({
    path: o.path,
    worker: o.worker === undefined ? 'none' : String(o.worker),
    status: String(o.status ?? 'none'),
  });
  if (ctx.logRequests)
    ctx.log.info(
      {
        reqId: o.id,
        ...(o.clientId === undefined ? {} : { clientRequestId: o.clientId }),
        ...(o.trace.traceId === undefined ? {} : { traceId: o.trace.traceId }),
        ...(o.trace.spanId === undefined ? {} : { spanId: o.trace.spanId }),
        path: o.path,
        ...extra,
        worker: o.worker === undefined ? null : String(o.worker),
        status: o.status ?? null,
        durationMs: Math.round((performance.now() - o.started) * 100) / 100,
      },
      'request',
    );
}

/** POSTs `body` as JSON, or GETs `path` when there is none; cut, too, when the worker goes down (cut-off.ts). */
function request(
  ctx: ProxyContext,
  cutOff: InFlightCutOff,
  pool: Dispatcher,
  path: string,
  body: object | undefined,
  headers: Record<string, string>,
  signal: AbortSignal,
): Promise<Dispatcher.ResponseData> {
  if (body === undefined)
    return cutOff.request(pool, { method: 'GET', path, headers: { ...ctx.fleet.upstreamHeaders, ...headers }, signal });
  return cutOff.request(pool, {
    method: 'POST',
    path,
    headers: { ...ctx.fleet.upstreamHeaders, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
    signal,
  });
}
