/**
 * Routing a request and reaching a worker: the route (queued when the router queues), the
 * request sent to the chosen worker and rank, and a new route among the workers not tried yet
 * when one fails before it answers. Each route is a `route` span and each try a `CLIENT` span of
 * the request's trace (`tracing/request-trace.ts`).
 * @internal
 * @module
 */

import { SpanStatusCode } from '@opentelemetry/api';
import type { Dispatcher } from 'undici';
import { KvRouteError } from '../errors.js';
import type { RouteDecision, RouteRequest } from '../router/types.js';
import type { FailureKind } from './breaker.js';
import { describeError, failureKind, workerGone } from './failures.js';
import type { ReadRequest } from './prompt.js';
import type { Outcome, ProxyContext, Refusal } from './proxy.js';
import { batchPromptsOf, inScope, type RoutingScope, routingScope } from './scope.js';
import { sessionKey } from './session-key.js';
import { type Attempt, type TraceStatus, upstreamAttributes } from './tracing/request-trace.js';

/** What a route asks of the router besides the tokens and workers (see {@link routeFields}). */
export type RouteFields = Pick<RouteRequest, 'loraName' | 'cacheNamespace' | 'priority' | 'maxOutputTokens' | 'sessionId'>;

/**
 * Routes one try of a request among `allowed`, booked under `requestId` (the request's id; a
 * leg sent beside another has its own), queued when the router queues.
 */
export async function routeOnce(
  ctx: ProxyContext,
  tokens: number[],
  allowed: readonly bigint[],
  fields: RouteFields,
  queueKey: string,
  signal: AbortSignal,
  outcome: Outcome,
  requestId = outcome.id,
): Promise<RouteDecision | Refusal> {
  const waiting = ctx.routing.get(queueKey) ?? 0;
  if (waiting >= ctx.opts.queue.maxQueued) {
    const what = queueKey === '' ? 'requests are' : `requests for model ${JSON.stringify(queueKey)} are`;
    return { refused: 429, reason: 'queue_full', message: `${waiting} ${what} waiting for a worker; retry later` };
  }
  const t = performance.now();
  ctx.routing.set(queueKey, waiting + 1);
  const step = outcome.trace.step('route', { 'kvroute.candidate_workers': allowed.length });
  // A router that queues gets one controller for both reasons to stop waiting: the client left,
  // or the queue timed out. One that never queues answers at once, and needs neither.
  const queues = ctx.opts.router.routerQueueThreshold !== undefined && ctx.opts.router.routerQueueThreshold !== null;
  const stop = queues ? new AbortController() : undefined;
  const onClientGone = () => stop?.abort();
  if (stop) signal.addEventListener('abort', onClientGone, { once: true });
  const timer = stop ? setTimeout(() => stop.abort(), ctx.opts.queue.timeoutMs) : undefined;
  try {
    const decision = await ctx.router.route({
      requestId,
      tokens,
      allowedWorkers: allowed,
      signal: stop?.signal ?? signal,
      ...fields,
    });
    ctx.metrics.routing.observe(Math.max(0, performance.now() - t - decision.queuedMs) / 1000);
    if (decision.queuedMs > 0) ctx.metrics.queueWait.observe({ model: outcome.model }, decision.queuedMs / 1000);
    step?.setAttributes({
      'kvroute.worker': String(decision.workerId),
      'kvroute.dp_rank': decision.dpRank,
      'kvroute.overlap_blocks': decision.overlapBlocks,
      'kvroute.cached_tokens': decision.cachedTokens,
      'kvroute.queued_ms': decision.queuedMs,
    });
    return decision;
  } catch (err) {
    const refusal = routeRefusal(ctx, err, signal);
    step?.setAttribute('error.type', refusal.reason ?? String(refusal.refused));
    if (refusal.refused !== 'client_closed') step?.setStatus({ code: SpanStatusCode.ERROR, message: refusal.message });
    return refusal;
  } finally {
    step?.end();
    const left = (ctx.routing.get(queueKey) ?? 1) - 1;
    if (left > 0) ctx.routing.set(queueKey, left);
    else ctx.routing.delete(queueKey);
    if (stop) {
      clearTimeout(timer);
      signal.removeEventListener('abort', onClientGone);
    }
  }
}

/** Why a route gave no worker, as the client is told. */
function routeRefusal(ctx: ProxyContext, err: unknown, signal: AbortSignal): Refusal {
  if (signal.aborted) return { refused: 'client_closed', message: 'the client went away' };
  if (err instanceof KvRouteError && err.code === 'ERR_ABORTED')
    return { refused: 503, reason: 'queue_timeout', message: `no worker could take the request within ${ctx.opts.queue.timeoutMs} ms` };
  if (err instanceof KvRouteError && err.code === 'ERR_NO_WORKERS') return { refused: 503, reason: 'no_worker', message: err.message };
  return { refused: 400, message: (err as Error).message };
}

/**
 * Why a leg sent beside another (SGLang's protocol) was cut: its peer failed, so it would wait in
 * vain. Its abort reason, and its try's end.
 */
export const LEG_ABANDONED = 'leg_abandoned';

/**
 * What a worker is sent, and which workers may take it: the request as the client sent it
 * (`whole`), or one leg of a disaggregated request (`prefill`, `decode`; see disaggregation.ts).
 */
export interface Leg {
  kind: 'whole' | 'prefill' | 'decode';
  /** The JSON body sent to the worker. */
  body: string;
  /**
   * For a leg that cannot finish without a peer leg on another worker (SGLang's decode leg waits
   * in its prefill worker's room): where that peer stands once this leg's worker failed in this
   * way (see {@link PeerState}).
   */
  peer?: (failure: FailureKind) => Promise<PeerState>;
  /** Told each worker the leg is routed to, before it is sent (its peer leg's failure may ask after that worker). */
  routed?: (worker: bigint) => void;
  /** Workers the leg must not go to: found silent by a peer leg's failure earlier in the request. */
  avoid?: ReadonlySet<bigint>;
}

/**
 * A paired leg's peer, as a failure of this leg finds it: still waiting for this leg (another
 * worker may take this one's place), ended (its part done, or failed in a way that does not
 * explain this failure: the failure counts, and no other worker can take the place), or failed
 * in a way that explains a 5xx or a timeout here, its worker found silent included (counted
 * apart, against no worker: the caller sends the pair again). A refused or reset connection, or a worker its probes found down, is
 * always the worker's own.
 */
export type PeerState = 'waiting' | 'ended' | 'failed';

/** The route's fields of a request's leg: its cache scope, priority, session and output length. */
export function routeFields(read: ReadRequest, scope: RoutingScope, kind: Leg['kind']): RouteFields {
  // The router's queue serves higher priorities first; vLLM's `priority` is the other way round.
  return {
    ...scope.hash,
    ...(read.priority === undefined ? {} : { priority: -read.priority }),
    // A session keeps to the workers holding its prefix: the prefill workers, when the request
    // is split (binding its decode legs too would move the binding at every leg).
    ...(read.sessionId === undefined || kind === 'decode' ? {} : { sessionId: sessionKey(read.sessionId, read.model) }),
    // An SGLang batch runs whole on the worker chosen (never split into legs).
    ...(read.batchTokens ? { batchPrompts: batchPromptsOf(read.batchTokens, scope) } : {}),
    // `n` samples generate up to n × max_tokens in all, and the stream's tokens are counted over
    // all of them (see `eventWatcher`). A prefill leg generates one token.
    ...(kind === 'prefill'
      ? { maxOutputTokens: 1 }
      : read.maxOutputTokens === undefined
        ? {}
        : { maxOutputTokens: Math.min(read.maxOutputTokens * read.choicesPerPrompt, Number.MAX_SAFE_INTEGER) }),
  };
}

/** Which of `ctx.routing`'s counts a route waits under: its model's when only some workers serve it. */
export function queueKeyOf(read: ReadRequest, scope: RoutingScope): string {
  return scope.workers ? (read.model ?? '') : '';
}

/**
 * One try of a leg: its `CLIENT` span, and the worker's answer (its headers read) to await. Not
 * itself async, so that a whole request's try awaits the worker's answer alone, as before the
 * legs had a function of their own.
 */
interface SentLeg {
  attempt: Attempt;
  response: Promise<Dispatcher.ResponseData>;
}

/** Sends a leg to the routed worker and rank, as one try of the request (a `CLIENT` span of its trace). */
export function sendLeg(
  ctx: ProxyContext,
  decision: RouteDecision,
  path: string,
  leg: Leg,
  signal: AbortSignal,
  outcome: Outcome,
): SentLeg {
  const member = ctx.fleet.get(decision.workerId);
  const pool = member?.pool;
  const resend = outcome.attempts - 1;
  const attempt = outcome.trace.attempt(`POST ${path}`, () => ({
    ...upstreamAttributes(member?.spec.url, path, 'POST', decision.workerId, decision.dpRank, resend),
    ...(leg.kind === 'whole' ? {} : { 'kvroute.leg': leg.kind }),
  }));
  let response: Promise<Dispatcher.ResponseData>;
  try {
    if (!pool) throw Object.assign(new Error('the worker was removed'), { code: 'ECONNREFUSED' });
    // Cut, too, when the worker goes down (cut-off.ts).
    response = member.cutOff.request(pool, {
      method: 'POST',
      path,
      headers: {
        ...ctx.fleet.upstreamHeaders,
        'content-type': 'application/json',
        'x-data-parallel-rank': String(decision.dpRank),
        'x-request-id': outcome.clientId ?? outcome.id,
        ...attempt.headers,
      },
      body: leg.body,
      signal,
    });
  } catch (err) {
    // Whatever stops the request being sent is its try's failure, as a refused connection is.
    response = Promise.reject(err);
  }
  return { attempt, response };
}

/**
 * A request being routed: what each of its legs is routed and sent with (its tokens, the path
 * it goes to on the worker, the signal that ends it, and the outcome its log line and metrics
 * are made of).
 */
export interface Routed {
  ctx: ProxyContext;
  read: ReadRequest;
  tokens: number[];
  path: string;
  signal: AbortSignal;
  outcome: Outcome;
}

/** A worker's answer to a routed request, its status and headers read, its body not yet. */
export interface Upstream {
  decision: RouteDecision;
  res: Dispatcher.ResponseData;
}

/**
 * Routes the request and sends it to the chosen worker; a worker that fails before it answers
 * (no connection, 5xx) is reported to the fleet and the request is routed again among the
 * workers not tried yet. On success the request stays booked: the caller frees it. A Responses
 * API request answered is remembered under its response id.
 * @param only the one worker that may take the request (the one holding the response it continues)
 */
export async function connect(r: Routed, only?: bigint, leg: Leg = { kind: 'whole', body: r.read.forward }): Promise<Upstream | Refusal> {
  const { ctx, read, tokens, path, signal, outcome } = r;
  const tried = new Set<bigint>(leg.avoid);
  const scope = routingScope(read.model, read.cacheSalt, ctx.fleet, read.batchModels);
  if (only !== undefined) scope.workers = new Set([only]);
  const fields = routeFields(read, scope, leg.kind);
  const queueKey = queueKeyOf(read, scope);
  let lastFailure = '';
  for (let attempt = 0; attempt <= ctx.opts.upstream.retries; attempt++) {
    const routable = ctx.fleet.routableByRole()[leg.kind];
    const allowed = tried.size === 0 && !scope.workers ? routable : routable.filter((id) => !tried.has(id) && inScope(scope, id));
    if (allowed.length === 0) break;
    const decision = await routeOnce(ctx, tokens, allowed, fields, queueKey, signal, outcome);
    if ('refused' in decision) {
      outcome.status = decision.refused;
      return decision;
    }
    // A decode worker pulls the prompt's KV rather than compute it: its booking carries no prefill work.
    if (leg.kind === 'decode') ctx.router.markPrefillCompleted(outcome.id);
    outcome.attempts++;
    outcome.worker = decision.workerId;
    outcome.dpRank = decision.dpRank;
    // A follow-up's prediction covers its own turn only (the earlier ones are on its worker, which
    // the gateway did not tokenize): compared with the engine's count it would read as a miss.
    outcome.expected = expectedCachedTokens(decision, ctx.opts.blockSize, tokens.length);
    // Nor is a decode leg's (its prefill worker's report is compared instead: disaggregation.ts).
    outcome.predicted = only === undefined && leg.kind !== 'decode' ? outcome.expected : undefined;
    tried.add(decision.workerId);
    leg.routed?.(decision.workerId);
    const { attempt, response } = sendLeg(ctx, decision, path, leg, signal, outcome);
    const answer = await answerOf(response);
    if ('failure' in answer) {
      const { kind, status, detail, thrown } = answer.failure;
      ctx.router.free(outcome.id);
      if (thrown && signal.aborted) {
        attempt.end(signal.reason === LEG_ABANDONED ? LEG_ABANDONED : 'client_closed');
        outcome.status = 'client_closed';
        return { refused: 'client_closed', message: 'the client went away' };
      }
      const peer = leg.peer === undefined ? 'waiting' : await leg.peer(kind);
      // A failure its peer's explains counts against no worker here: the caller sends the pair again.
      if (peer === 'failed' && !workerGone(kind)) return peerFailure(ctx, outcome, attempt, leg, decision.workerId, status, detail);
      attempt.end(status, thrown ? detail : undefined);
      lastFailure = `worker ${decision.workerId}${thrown ? ': ' : ' '}${detail}`;
      ctx.fleet.failure(decision.workerId, kind, detail);
      ctx.metrics.retries.inc({ reason: kind });
      // Another worker can take this leg's place only while its peer still waits for it.
      if (peer !== 'waiting') break;
      continue;
    }
    const { res } = answer;
    if (read.responseId !== undefined && res.statusCode === 200) ctx.owners.remember(read.responseId, decision.workerId);
    // The try that got the answer lasts as long as the answer: it ends with the request (finish()).
    outcome.attempt = attempt;
    return { decision, res };
  }
  const refused = lastFailure ? 502 : 503;
  outcome.status = refused;
  return {
    refused,
    reason: lastFailure ? 'upstream_failed' : 'no_worker',
    message: `no worker could serve the request (${lastFailure || noneHealthy(ctx, leg.kind)})`,
  };
}

/** How a try failed before its answer: no answer (`thrown`: why), or a 5xx (its body dropped). */
interface TryFailure {
  kind: FailureKind;
  status: TraceStatus;
  detail: string;
  thrown: boolean;
}

/** A try's answer (its headers read), or how it failed. */
async function answerOf(response: Promise<Dispatcher.ResponseData>): Promise<{ res: Dispatcher.ResponseData } | { failure: TryFailure }> {
  let res: Dispatcher.ResponseData;
  try {
    res = await response;
  } catch (err) {
    const kind = failureKind(err);
    return { failure: { kind, status: kind, detail: describeError(err), thrown: true } };
  }
  if (res.statusCode < 500) return { res };
  await res.body.dump().catch(() => undefined);
  return { failure: { kind: 'status', status: res.statusCode, detail: `answered ${res.statusCode}`, thrown: false } };
}

/** Ends a leg whose worker failed because its peer leg did: counted apart, not against the worker, and not retried. */
function peerFailure(
  ctx: ProxyContext,
  outcome: Outcome,
  attempt: Attempt,
  leg: Leg,
  worker: bigint,
  status: TraceStatus,
  detail: string,
): Refusal {
  attempt.end(status, `${detail}, after its peer leg failed`);
  ctx.metrics.peerFailedLegs.inc({ worker: String(worker), leg: leg.kind });
  outcome.status = 502;
  return { refused: 502, reason: 'upstream_failed', message: `worker ${worker} ${detail} after its peer leg failed` };
}

/**
 * Why no worker was tried: none healthy (saying how many rest, put to sleep or paused through the
 * control routes), or (a whole request) only workers that serve one leg of disaggregated requests.
 */
function noneHealthy(ctx: ProxyContext, kind: Leg['kind']): string {
  const routable = ctx.fleet.routableByRole();
  if (kind === 'whole' && routable.whole.length === 0 && routable.all.length > 0) {
    const legs = ctx.opts.disaggregation.protocol === 'sglang' ? 'prefill and decode workers (SGLang’s)' : 'prefill workers';
    return `no healthy worker takes whole requests: ${legs} serve one leg of a disaggregated request`;
  }
  const resting = ctx.fleet.restingCount();
  if (resting === 0) return 'no healthy worker';
  return `no healthy worker: ${resting} resting (put to sleep, paused or their memory released through the control routes) until /wake_up, /continue_generation or /resume_memory_occupation`;
}

/**
 * The prompt tokens the chosen worker should report as cached: its device prefix and, past it,
 * the blocks its lower tiers hold, unweighted, since an engine that loads a block back from host
 * memory or disk counts it as cached. `decision.cachedTokens` weighs those blocks for the cost
 * (`hostCacheHitWeight`, `diskCacheHitWeight`), as Dynamo's effective cached tokens do, so with
 * offloading engines it reads below what they report. An engine computes at least the prompt's
 * last token (its logits sample the first output), so a prompt it holds whole and that ends on a
 * block boundary reports one block less.
 */
export function expectedCachedTokens(decision: RouteDecision, blockSize: number, promptTokens: number): number {
  const chosen = decision.candidates.find((c) => c.workerId === decision.workerId && c.dpRank === decision.dpRank);
  const lower = chosen === undefined ? 0 : chosen.hostBlocks + chosen.diskBlocks;
  const cached = lower === 0 ? decision.cachedTokens : (decision.overlapBlocks + lower) * blockSize;
  return Math.min(cached, Math.floor(Math.max(0, promptTokens - 1) / blockSize) * blockSize);
}
