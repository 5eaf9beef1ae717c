/**
 * A request the gateway sends to every healthy worker rather than to one, because each engine
 * keeps its own copy of what it changes: vLLM's runtime LoRA adapters (lora-updates.ts), the
 * engines' own state (fleet-commands.ts: prefix caches, sleep, aborts, weights). One try per
 * worker, each a `CLIENT` span of the client's request and counted in
 * `kvroute_gateway_passed_on_requests_total{path,worker,status}`; the client gets the engines'
 * answer when every worker agrees, else the first failure's status with a message saying which
 * workers did what, so that a change made on some workers is told from one made on none.
 * @internal
 * @module
 */

import type { FastifyReply, FastifyRequest } from 'fastify';
import { describeError, failureKind } from './failures.js';
import { finishPassedOn, type PassedOn, startPassedOn } from './passthrough.js';
import { openAiError, type ProxyContext, reject } from './proxy.js';
import { type RequestTrace, upstreamAttributes } from './tracing/request-trace.js';

/** One worker's answer: its status (`undefined` when it could not be reached) and its text. */
export interface WorkerAnswer {
  worker: bigint;
  status: number | undefined;
  text: string;
}

/** What the client's request was: its passed-on start, its start time, its path, and the workers it went to. */
export interface BroadcastRequest {
  start: PassedOn;
  started: number;
  path: string;
  workers: readonly bigint[];
}

/**
 * Starts a request for every healthy worker (those serving the base model `?model=` names, in a
 * fleet of several; with `restingToo`, resting workers as well, which a control route may wake);
 * undefined when it was answered already: 400 for a bad request id (or, with `objectBody`, a body
 * that is not a JSON object), 503 when no worker is healthy.
 */
export function startBroadcast(
  ctx: ProxyContext,
  req: FastifyRequest,
  reply: FastifyReply,
  path: string,
  objectBody: boolean,
  restingToo = false,
): BroadcastRequest | undefined {
  const started = performance.now();
  const start = startPassedOn(ctx, req, reply, path, objectBody);
  if (!start) return undefined;
  const base = (req.query as { model?: unknown }).model;
  const model = typeof base === 'string' ? base : undefined;
  const workers = restingToo ? ctx.fleet.reachableFor(model) : ctx.fleet.routableFor(model);
  if (workers.length > 0) return { start, started, path, workers };
  finishPassedOn(ctx, { id: start.id, clientId: start.clientId, trace: start.trace, path, worker: undefined, status: 503, started }, {});
  reject(ctx, reply, 503, 'no_worker', `no healthy worker to send ${path} to`);
  return undefined;
}

/**
 * Answers the client from every worker's answer (see the module's description), each counted.
 * `how.conflict`: the workers all answered but disagree (a question, not a change): 409 saying
 * how; `how.type`: the content type of the engines' answer (default text/plain).
 */
export function answerAll(
  ctx: ProxyContext,
  reply: FastifyReply,
  r: BroadcastRequest,
  answers: readonly WorkerAnswer[],
  how: { conflict?: string; type?: string } = {},
): FastifyReply {
  const { conflict } = how;
  const { start, started, path } = r;
  const failed = answers.filter((a) => a.status !== 200);
  const status = conflict !== undefined ? 409 : failed.length === 0 ? 200 : (failed[0].status ?? 502);
  // One span for the request, whose tries are the workers' answers (finishPassedOn counts each).
  start.trace.end(status);
  for (const a of answers)
    finishPassedOn(
      ctx,
      { id: start.id, clientId: start.clientId, trace: start.trace, path, worker: a.worker, status: a.status ?? 502, started },
      {},
    );
  void reply.header('x-kvroute-request-id', start.id).header('x-kvroute-workers', r.workers.join(','));
  if (conflict !== undefined) return reply.code(409).send(openAiError(conflict, 'ConflictError', 409));
  if (failed.length === 0)
    return reply
      .code(200)
      .type(how.type ?? 'text/plain')
      .send(answers[0].text);
  const done = answers.filter((a) => a.status === 200).map((a) => a.worker);
  const told = failed.map((a) => `worker ${a.worker} answered ${a.status ?? 'nothing'}: ${errorText(a.text)}`).join('; ');
  const message = `${done.length > 0 ? `done on workers ${done.join(', ')}, not on the others` : 'done on no worker'} (${told})`;
  return reply.code(status).send(openAiError(message, status >= 500 ? 'ServiceUnavailableError' : 'BadRequestError', status));
}

/**
 * POSTs `body` (JSON; none when undefined) to one worker's `path` (GETs it with `method` 'GET');
 * with `trace`, as a try (a `CLIENT` span) of the client's request.
 */
export async function ask(
  ctx: ProxyContext,
  worker: bigint,
  path: string,
  body: object | undefined,
  headers: Record<string, string>,
  signal: AbortSignal,
  trace?: RequestTrace,
  method: 'POST' | 'GET' = 'POST',
): Promise<WorkerAnswer> {
  const member = ctx.fleet.get(worker);
  const pool = member?.pool;
  if (!pool) return { worker, status: undefined, text: 'the worker was removed' };
  const attempt = trace?.attempt(`${method} ${path}`, () => upstreamAttributes(member.spec.url, path, method, worker, undefined, 0));
  try {
    // Cut, too, when the worker goes down (cut-off.ts).
    const res = await member.cutOff.request(pool, {
      method,
      path,
      headers: {
        ...ctx.fleet.upstreamHeaders,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
        ...attempt?.headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal,
    });
    const text = await res.body.text();
    attempt?.end(res.statusCode);
    if (res.statusCode >= 500) ctx.fleet.failure(worker, 'status', `answered ${res.statusCode}`);
    return { worker, status: res.statusCode, text };
  } catch (err) {
    attempt?.end(signal.aborted ? 'client_closed' : failureKind(err), describeError(err));
    if (!signal.aborted) ctx.fleet.failure(worker, failureKind(err), describeError(err));
    return { worker, status: undefined, text: describeError(err) };
  }
}

/**
 * The message of a worker's answer: an OpenAI error's `message` (or a bare `message`, or
 * FastAPI's `detail`, as for a route the worker does not serve), else the text as it came (cut
 * at 300 characters).
 */
export function errorText(text: string): string {
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown }; message?: unknown; detail?: unknown };
    const message = body.error?.message ?? body.message ?? body.detail;
    if (typeof message === 'string') return message;
  } catch {
    // Not JSON: the text itself.
  }
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}
