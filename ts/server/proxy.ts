/**
 * One proxied completion: tokenize, route, forward to the chosen worker and rank (vLLM's
 * `X-data-parallel-rank`), mark the prefill complete at the first token, free at the end
 * (completion, error or client disconnect, which aborts the upstream request too). A worker that
 * fails before its first byte is reported to the fleet and the request is routed again among
 * the workers not tried yet. Only the content type of a worker's answer is copied; every other
 * response header is the gateway's own.
 * @internal
 * @module
 */

import type { ServerResponse } from 'node:http';
import { type Attributes, SpanStatusCode, type Tracer } from '@opentelemetry/api';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import type { Dispatcher } from 'undici';
import { KvRouteError } from '../errors.js';
import { MAX_SESSION_ID_LENGTH } from '../limits.js';
import type { KvRouter } from '../router/kv-router.js';
import type { RouteDecision } from '../router/types.js';
import { apiError, openAiError, streamErrorEvent } from './api-errors.js';
import { proxyBatch } from './batch.js';
import { connect } from './connect.js';
import { firstLeg, type PrefillLeg, splits } from './disaggregation.js';
import { EngineRefusal } from './engine-tokenize.js';
import { describeError, failureKind } from './failures.js';
import type { Fleet } from './fleet.js';
import type { GatewayMetrics } from './gateway-metrics.js';
import { withPrefillInputLogprobs } from './generate-facts.js';
import { errorType } from './http-status.js';
import { WHOLE } from './legs.js';
import type { ResolvedGatewayOptions } from './options.js';
import { BadRequest, engineTokens, type ReadRequest, type RequestKind, readRequest } from './prompt.js';
import { findOwner, type ResponseOwners } from './response-owners.js';
import { answerCachedTokens, SseSplitter, withoutUsage } from './sse.js';
import { eventWatcher, firstToken, reported } from './stream-watch.js';
import type { PromptInput, PromptTokenizer } from './tokenize.js';
import { readTraceContext } from './tracing/context.js';
import { type Attempt, RequestTrace } from './tracing/request-trace.js';

export interface ProxyContext {
  router: KvRouter;
  fleet: Fleet;
  tokenizer: PromptTokenizer;
  metrics: GatewayMetrics;
  /** Makes the requests' spans (see `tracing/`). */
  tracer: Tracer;
  opts: ResolvedGatewayOptions;
  log: FastifyBaseLogger;
  /** Whether the one-line-per-request log is on (level info or finer). */
  logRequests: boolean;
  /**
   * Requests inside `route()` now (waiting in the queue, mostly), by the workers they wait for:
   * the model's name when only some workers serve it, '' for a request any worker may take.
   * `queue.maxQueued` bounds each, so a model whose workers are all busy does not fill the queue
   * for the others.
   */
  routing: Map<string, number>;
  /** The workers holding Responses API responses, by response id. */
  owners: ResponseOwners;
  nextId: number;
}

/** Where each kind of routed request goes on the worker. */
const PATHS: Record<RequestKind, string> = {
  completion: '/v1/completions',
  chat: '/v1/chat/completions',
  responses: '/v1/responses',
  messages: '/v1/messages',
  generate: '/generate',
};

export { openAiError } from './api-errors.js';

/** The longest client `X-Request-Id` passed on (vLLM keys its logs and metrics by it). */
const MAX_CLIENT_REQUEST_ID = 512;

/**
 * The client's `X-Request-Id`, which vLLM takes as the request's id: passed on to the worker, so
 * that the client's id finds the request in the engine's logs, as it would without the gateway.
 * The router keeps its own ids, which stay unique when clients reuse theirs.
 * @throws {BadRequest} for a value longer than 512 characters.
 */
export function clientRequestId(req: FastifyRequest): string | undefined {
  const id = headerValue(req, 'x-request-id');
  if (id === undefined) return undefined;
  if (id.length > MAX_CLIENT_REQUEST_ID)
    throw new BadRequest(`X-Request-Id must be at most ${MAX_CLIENT_REQUEST_ID} characters, got ${id.length}`);
  return id;
}

/**
 * The client's session: `X-Kvroute-Session-Id`, or Dynamo's `X-Dynamo-Session-ID`, else what
 * coding agents send of their own accord: Claude Code's `X-Claude-Code-Session-Id` on every
 * request, or an OpenAI client's `prompt_cache_key` (Codex CLI's), which OpenAI defines as a hint
 * for routing to its cache. The router keeps a session's requests on one worker when
 * `sessionAffinityTtlSecs` is set.
 * @throws {BadRequest} for a session header meant for the gateway longer than `MAX_SESSION_ID_LENGTH`
 * (1024) characters; an agent's own id that long is passed over (it was not sent for the gateway).
 */
export function clientSessionId(req: FastifyRequest): string | undefined {
  for (const name of ['x-kvroute-session-id', 'x-dynamo-session-id']) {
    const id = headerValue(req, name);
    if (id === undefined) continue;
    if (id.length > MAX_SESSION_ID_LENGTH)
      throw new BadRequest(`${name} must be at most ${MAX_SESSION_ID_LENGTH} characters, got ${id.length}`);
    return id;
  }
  const claude = headerValue(req, 'x-claude-code-session-id');
  if (claude !== undefined && claude.length <= MAX_SESSION_ID_LENGTH) return claude;
  const key = (req.body as { prompt_cache_key?: unknown } | null | undefined)?.prompt_cache_key;
  return typeof key === 'string' && key !== '' && key.length <= MAX_SESSION_ID_LENGTH ? key : undefined;
}

/** A request header's first value, when not empty. */
function headerValue(req: FastifyRequest, name: string): string | undefined {
  const value = req.headers[name];
  const first = Array.isArray(value) ? value[0] : value;
  return first === undefined || first === '' ? undefined : first;
}

/**
 * Starts a request's trace: its `SERVER` span, under the client's W3C trace context when it sent
 * a valid one (counted by what became of it), which the request's tries pass on to the workers.
 */
export function requestTrace(ctx: ProxyContext, req: FastifyRequest, route: string): RequestTrace {
  const { context, result } = readTraceContext(req.headers);
  if (result) ctx.metrics.traceContexts.inc({ result });
  return RequestTrace.start(ctx.tracer, `${req.method} ${route}`, context, {
    'http.request.method': req.method,
    'http.route': route,
  });
}

/** What one request did, for its log line and metrics. */
export interface Outcome {
  id: string;
  /** The client's `X-Request-Id`, when it sent one. */
  clientId: string | undefined;
  /** The request's spans (the client's trace context, passed on, when there are none). */
  trace: RequestTrace;
  /** The try that got the worker's answer, ended with the request. */
  attempt: Attempt | undefined;
  /** The prefill worker of a request served in two legs (see disaggregation.ts). */
  prefill: PrefillLeg | undefined;
  /** The metrics' `model` label: the model the request named when a worker serves it, `none` or `unknown`. */
  model: string;
  status: number | 'client_closed' | 'upstream_error';
  worker: bigint | undefined;
  dpRank: number | undefined;
  /** The prompt tokens the chosen worker should report cached (see {@link expectedCachedTokens}). */
  expected: number | undefined;
  /** The same, when its engine's report is comparable (not for a Responses follow-up). */
  predicted: number | undefined;
  reported: number | undefined;
  /** The request's prompt tokens (all its prompts', for an SGLang batch sent whole). */
  promptTokens: number;
  attempts: number;
  ttftMs: number | undefined;
}

const SAFE_CONTENT_TYPE = /^[\w!#$&^.+-]+\/[\w!#$&^.+-]+(;\s*[\w-]+=[\w"./+-]+)*$/;

/** The worker's content type when well-formed, else `fallback`. */
export function contentType(headers: Dispatcher.ResponseData['headers'], fallback: string): string {
  const v = headers['content-type'];
  return typeof v === 'string' && SAFE_CONTENT_TYPE.test(v) ? v : fallback;
}

/**
 * Why a request got no worker's answer, and what its client is told: `reason` counts it among
 * the gateway's rejections (429, 502 and 503, with `Retry-After`); without one it is the
 * request's own fault (400) or the gateway's configuration (500).
 */
export interface Refusal {
  refused: number | 'client_closed';
  reason?: string;
  message: string;
}

/** Answers a refused request (a client that left is answered nothing). */
export function refuse(ctx: ProxyContext, reply: FastifyReply, r: Refusal): FastifyReply {
  if (r.refused === 'client_closed') return reply;
  if (r.reason) return reject(ctx, reply, r.refused, r.reason, r.message);
  return reply.code(r.refused).send(openAiError(r.message, errorType(r.refused), r.refused));
}

/** What a failed tokenization tells the client. */
export function tokenizeRefusal(err: unknown): Refusal {
  if (err instanceof KvRouteError && err.code === 'ERR_NO_WORKERS') return { refused: 503, reason: 'no_worker', message: err.message };
  // The engine's 404 for a model it does not serve, in its words (vLLM's answer on every route).
  if (err instanceof EngineRefusal && err.unknownModel) return { refused: 404, message: err.message };
  // The gateway's own configuration (a worker without /tokenize), not the request.
  if (err instanceof KvRouteError && err.code === 'ERR_DEPENDENCY_MISSING')
    return { refused: 500, message: `cannot tokenize the prompt: ${err.message}` };
  return { refused: 400, message: `cannot tokenize the prompt: ${(err as Error).message}` };
}

/** Answers a request the gateway refuses (counted by reason; 429, 502 and 503 with `Retry-After`). */
export function reject(ctx: ProxyContext, reply: FastifyReply, code: number, reason: string, message: string): FastifyReply {
  ctx.metrics.rejected.inc({ reason });
  if (code === 429 || code === 502 || code === 503) void reply.header('retry-after', String(ctx.opts.queue.retryAfterSecs));
  return reply.code(code).send(openAiError(message, code === 429 ? 'RateLimitError' : 'ServiceUnavailableError', code));
}

export async function proxyCompletion(
  ctx: ProxyContext,
  req: FastifyRequest,
  reply: FastifyReply,
  kind: RequestKind,
): Promise<FastifyReply> {
  const started = performance.now();
  const path = PATHS[kind];
  const trace = requestTrace(ctx, req, path);
  const failure: { status?: Outcome['status'] } = {};
  try {
    return await routed(ctx, req, reply, kind, trace, started, failure);
  } finally {
    // A stream already answered 200 may still fail or lose its client.
    trace.end(typeof failure.status === 'string' ? failure.status : reply.raw.headersSent ? reply.raw.statusCode : reply.statusCode);
  }
}

async function routed(
  ctx: ProxyContext,
  req: FastifyRequest,
  reply: FastifyReply,
  kind: RequestKind,
  trace: RequestTrace,
  started: number,
  failure: { status?: Outcome['status'] },
): Promise<FastifyReply> {
  const path = PATHS[kind];
  let read: ReadRequest;
  let clientId: string | undefined;
  try {
    clientId = clientRequestId(req);
    read = readRequest(req.body, kind, ctx.opts.router.routerTrackOutputBlocks === true);
    read.sessionId = clientSessionId(req);
  } catch (err) {
    if (err instanceof BadRequest) return reply.code(400).send(openAiError(err.message, 'BadRequestError', 400));
    throw err;
  }
  trace.set(() => ({
    ...(read.model === undefined ? {} : { 'gen_ai.request.model': read.model }),
    'kvroute.stream': read.stream,
    ...(read.batch ? { 'kvroute.prompts': read.batch.length } : {}),
    ...(read.wholeBatch ? { 'kvroute.prompts': read.wholeBatch } : {}),
  }));
  // The client going away aborts the queue wait and the upstream request.
  const abort = new AbortController();
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) abort.abort();
  });
  if (read.batch) return proxyBatch(ctx, reply, read, read.batch, path, abort.signal, { clientId, trace, failure }, started);
  // A follow-up can only go where the response it continues is kept.
  let owner: bigint | undefined;
  if (read.previousResponseId !== undefined) {
    const found = await findOwner(ctx, read.previousResponseId, read.model, abort.signal);
    if (typeof found !== 'bigint') return refuse(ctx, reply, found);
    owner = found;
  }
  let tokens: number[];
  try {
    tokens = await tokenize(ctx, read, trace);
    if (read.batchInputs) read.batchTokens = await batchTokens(ctx, read, read.batchInputs, trace);
  } catch (err) {
    return refuse(ctx, reply, tokenizeRefusal(err));
  }
  const outcome = newOutcome(ctx, { id: `kvr-${ctx.nextId++}`, clientId, trace, tokens, model: read.model });
  // An SGLang batch's log line and span count all its prompts.
  outcome.promptTokens = (read.batchTokens ?? []).reduce((n, t) => n + t.length, tokens.length);
  trace.set(() => ({ 'kvroute.request_id': outcome.id, 'gen_ai.usage.input_tokens': outcome.promptTokens }));
  ctx.metrics.inFlight.inc();
  try {
    await forward(ctx, reply, read, tokens, path, abort.signal, outcome, started, owner, kind);
  } finally {
    ctx.metrics.inFlight.dec();
    finish(ctx, outcome, read, path, started);
    if (typeof outcome.status === 'string') failure.status = outcome.status;
    trace.set(() => outcomeAttributes(outcome));
  }
  return reply;
}

/** What routing decided and the engine reported, for the request's span and its successful try's. */
export function outcomeAttributes(outcome: Outcome): Attributes {
  const a: Attributes = { 'kvroute.attempts': outcome.attempts };
  if (outcome.worker !== undefined) a['kvroute.worker'] = String(outcome.worker);
  if (outcome.dpRank !== undefined) a['kvroute.dp_rank'] = outcome.dpRank;
  if (outcome.predicted !== undefined) a['kvroute.predicted_cached_tokens'] = outcome.predicted;
  if (outcome.reported !== undefined) a['kvroute.reported_cached_tokens'] = outcome.reported;
  if (outcome.ttftMs !== undefined) a['kvroute.ttft_ms'] = Math.round(outcome.ttftMs * 100) / 100;
  return a;
}

/** The request's engine tokens, timed (and a `tokenize` span of its trace). */
export async function tokenize(ctx: ProxyContext, read: ReadRequest, trace: RequestTrace): Promise<number[]> {
  const t0 = performance.now();
  const step = trace.step('tokenize', { 'kvroute.tokenizer': ctx.tokenizer.kind });
  try {
    // Only an engine asked to tokenize receives the step's context (a local tokenizer has no use for it).
    const tokens = await engineTokens(ctx.tokenizer, read, ctx.tokenizer.kind === 'engine' ? trace.headersOf(step) : undefined);
    ctx.metrics.tokenizing.observe({ tokenizer: ctx.tokenizer.kind }, (performance.now() - t0) / 1000);
    step?.setAttribute('kvroute.prompt_tokens', tokens.length);
    return tokens;
  } catch (err) {
    step?.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
    throw err;
  } finally {
    step?.end();
  }
}

/**
 * The other prompts of an SGLang `/generate` batch tokenized as its first was, each failure
 * naming its prompt (`text[i]`; `input_ids` need no tokenizer).
 */
async function batchTokens(ctx: ProxyContext, read: ReadRequest, inputs: PromptInput[], trace: RequestTrace): Promise<number[][]> {
  return Promise.all(
    inputs.map((input, i) =>
      tokenize(ctx, { ...read, input }, trace).catch((err: unknown) => Promise.reject(ofPrompt(err, `text[${i + 1}]`))),
    ),
  );
}

/** A prompt's tokenizer error, naming the prompt (its kind kept: it decides the answer's status). */
export function ofPrompt(err: unknown, prompt: string): Error {
  // An unknown model is the request's, not one prompt's: passed on as the engine said it.
  if (err instanceof EngineRefusal && err.unknownModel) return err;
  const message = `${prompt}: ${(err as Error).message}`;
  return err instanceof KvRouteError ? new KvRouteError(err.code, message) : new Error(message);
}

/** What a request's outcome starts from: its ids, the client's trace context, its tokens and the model it names. */
export interface OutcomeStart {
  id: string;
  clientId: string | undefined;
  trace: RequestTrace;
  tokens: readonly number[];
  model: string | undefined;
}

/**
 * The metrics' `model` label of a request naming `model`: the name when a worker serves it (a
 * base model or an adapter), else `unknown`, so that clients cannot add series at will; `none`
 * when it names no model.
 */
export function modelLabel(ctx: ProxyContext, model: string | undefined): string {
  if (model === undefined) return 'none';
  return ctx.fleet.serves(model) ? model : 'unknown';
}

export function newOutcome(ctx: ProxyContext, { id, clientId, trace, tokens, model }: OutcomeStart): Outcome {
  return {
    id,
    clientId,
    trace,
    attempt: undefined,
    prefill: undefined,
    model: modelLabel(ctx, model),
    status: 0,
    worker: undefined,
    dpRank: undefined,
    expected: undefined,
    predicted: undefined,
    reported: undefined,
    promptTokens: tokens.length,
    attempts: 0,
    ttftMs: undefined,
  };
}

/** Counts a proxied request and writes its log line. */
export function finish(ctx: ProxyContext, outcome: Outcome, read: ReadRequest, path: string, started: number): void {
  if (outcome.attempt) {
    outcome.attempt.set(() => outcomeAttributes(outcome));
    outcome.attempt.end(outcome.status);
  }
  const status = String(outcome.status);
  ctx.metrics.requests.inc({ worker: outcome.worker === undefined ? 'none' : String(outcome.worker), status, model: outcome.model });
  ctx.metrics.duration.observe({ model: outcome.model }, (performance.now() - started) / 1000);
  if (ctx.logRequests)
    ctx.log.info(
      {
        reqId: outcome.id,
        ...(outcome.clientId === undefined ? {} : { clientRequestId: outcome.clientId }),
        ...(outcome.trace.traceId === undefined ? {} : { traceId: outcome.trace.traceId }),
        ...(outcome.trace.spanId === undefined ? {} : { spanId: outcome.trace.spanId }),
        ...(read.sessionId === undefined ? {} : { sessionId: read.sessionId }),
        path,
        worker: outcome.worker === undefined ? null : String(outcome.worker),
        dpRank: outcome.dpRank ?? null,
        ...(outcome.prefill ? { prefillWorker: String(outcome.prefill.worker), prefillDpRank: outcome.prefill.dpRank } : {}),
        model: read.model ?? null,
        // Whether a salt scoped it; never the salt, which keeps tenants' caches apart.
        salted: read.cacheSalt !== undefined,
        promptTokens: outcome.promptTokens,
        predictedCachedTokens: outcome.predicted ?? null,
        reportedCachedTokens: outcome.reported ?? null,
        ttftMs: outcome.ttftMs === undefined ? null : Math.round(outcome.ttftMs * 100) / 100,
        durationMs: Math.round((performance.now() - started) * 100) / 100,
        attempts: outcome.attempts,
        stream: read.stream,
        status: outcome.status,
        ...(ctx.opts.logPrompts ? { prompt: read.input } : {}),
      },
      'request',
    );
}

async function forward(
  ctx: ProxyContext,
  reply: FastifyReply,
  read: ReadRequest,
  tokens: number[],
  path: string,
  signal: AbortSignal,
  outcome: Outcome,
  started: number,
  only: bigint | undefined,
  kind: RequestKind,
): Promise<void> {
  // Only a request that is split waits for its first leg; a whole one goes on at once.
  const decoders = splits(ctx.fleet, read, kind, only);
  const routed = { ctx, read, tokens, path, signal, outcome };
  const first = decoders ? await firstLeg(routed, decoders) : WHOLE;
  if ('refusal' in first) {
    refuse(ctx, reply, first.refusal);
    return;
  }
  const up = 'answer' in first ? first.answer : await connect(routed, only, first.leg);
  if ('refused' in up) {
    refuse(ctx, reply, up);
    return;
  }
  const prefillLogprobs = 'answer' in first ? first.prefillInputLogprobs : undefined;
  try {
    await deliver(ctx, reply, read, up.decision, up.res, signal, outcome, started, prefillLogprobs);
  } finally {
    ctx.router.free(outcome.id);
  }
}

export function ourHeaders(decision: RouteDecision, outcome: Outcome): Record<string, string> {
  const headers: Record<string, string> = {
    'x-kvroute-request-id': outcome.id,
    'x-kvroute-worker': String(decision.workerId),
    'x-kvroute-dp-rank': String(decision.dpRank),
    // A request served in two legs finds its cache on the prefill worker.
    'x-kvroute-cached-tokens': String(outcome.prefill?.cachedTokens ?? outcome.expected ?? decision.cachedTokens),
    'x-kvroute-attempts': String(outcome.attempts),
  };
  if (outcome.prefill) {
    headers['x-kvroute-prefill-worker'] = String(outcome.prefill.worker);
    headers['x-kvroute-prefill-dp-rank'] = String(outcome.prefill.dpRank);
  }
  return headers;
}

/** Writes to a client's response, waiting while its buffer is full (or until it closes). */
export function writerOf(out: ServerResponse): (text: string) => Promise<void> {
  return async (text) => {
    if (out.write(text)) return;
    // A response whose 'close' was emitted (the client's leaving aborted the request then) emits
    // neither event again: waiting would hold the request forever.
    if (out.closed) throw new Error('the client went away');
    await new Promise<void>((resolve) => out.once('drain', resolve).once('close', resolve));
  };
}

async function deliver(
  ctx: ProxyContext,
  reply: FastifyReply,
  read: ReadRequest,
  decision: RouteDecision,
  res: Dispatcher.ResponseData,
  signal: AbortSignal,
  outcome: Outcome,
  started: number,
  prefillLogprobs?: unknown[],
): Promise<void> {
  const worker = decision.workerId;
  const streaming = read.stream && res.statusCode === 200;
  if (!streaming) {
    let text: string;
    try {
      text = await res.body.text();
    } catch (err) {
      outcome.status = signal.aborted ? 'client_closed' : 'upstream_error';
      if (!signal.aborted) {
        ctx.fleet.failure(worker, failureKind(err), describeError(err));
        void reply
          .code(502)
          .send(apiError(read, `worker ${worker} failed mid-response: ${describeError(err)}`, 'ServiceUnavailableError', 502));
      }
      return;
    }
    if (res.statusCode === 200) {
      firstToken(ctx, outcome, started);
      try {
        const answer: unknown = JSON.parse(text);
        reported(ctx, outcome, answerCachedTokens(answer));
        const merged = prefillLogprobs && withPrefillInputLogprobs(answer, prefillLogprobs);
        if (merged) text = JSON.stringify(merged);
      } catch {
        // Not JSON: passed on as is.
      }
    }
    ctx.fleet.success(worker);
    outcome.status = res.statusCode;
    void reply.code(res.statusCode).headers(ourHeaders(decision, outcome)).type(contentType(res.headers, 'application/json')).send(text);
    return;
  }
  reply.hijack();
  const out = reply.raw;
  out.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    ...ourHeaders(decision, outcome),
  });
  outcome.status = 200;
  const splitter = new SseSplitter();
  const watch = eventWatcher(ctx, outcome, started);
  const write = writerOf(out);
  try {
    for await (const chunk of res.body) {
      for (const event of splitter.push(chunk as Uint8Array)) {
        const facts = watch(event);
        // The usage the gateway asked for on the client's behalf is not the client's.
        if (facts.usageOnly && !read.clientWantsUsage) continue;
        const merged = prefillLogprobs && facts.chunk && withPrefillInputLogprobs(facts.chunk, prefillLogprobs);
        if (merged) {
          await write(`data: ${JSON.stringify(merged)}\n\n`);
          continue;
        }
        await write(facts.chunkUsage && read.ownChunkUsage && facts.chunk ? withoutUsage(facts.chunk) : event);
      }
    }
    const tail = splitter.flush();
    if (tail) await write(tail);
    ctx.fleet.success(worker);
    out.end();
  } catch (err) {
    if (signal.aborted) {
      outcome.status = 'client_closed';
    } else {
      outcome.status = 'upstream_error';
      ctx.fleet.failure(worker, failureKind(err), describeError(err));
      out.end(streamErrorEvent(read, `worker ${worker} failed mid-stream: ${describeError(err)}`));
    }
    if (!out.writableEnded) out.destroy();
  }
}
