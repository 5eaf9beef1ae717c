/**
 * Dropping the engines' prefix caches through the gateway: vLLM's `POST /reset_prefix_cache`
 * (served in its dev mode; `?device=` passed on) and SGLang's `/flush_cache` (POST, or GET as
 * SGLang takes it too, sent on as POST). A client of one engine calls them at the address it
 * sends its requests to, as RL loops do after a weight update, when every cached prefix is stale;
 * behind the gateway the fleet is the engine, so the call goes to every healthy worker (those
 * serving the base model `?model=` names, in a fleet of several; the rest of the query string
 * goes on as it came). The engines then publish `AllBlocksCleared`, and the index forgets their
 * blocks from their own events: the gateway changes nothing itself, so an engine that refused
 * (it will not drop a cache its running requests hold) keeps its blocks in the index too.
 * The answer is the engines' when every worker agrees, else the first refusal's status saying
 * which workers did what (worker-broadcast.ts).
 * @internal
 * @module
 */

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { finishPassedOn, startPassedOn } from './passthrough.js';
import { type ProxyContext, reject } from './proxy.js';
import { answerAll, ask } from './worker-broadcast.js';

/** The engines' cache-reset routes: vLLM's and SGLang's. */
export const CACHE_RESET_PATHS = ['/reset_prefix_cache', '/flush_cache'] as const;

/** Registers the cache-reset routes on the proxy (behind its API-key check). */
export function registerCacheResets(proxy: FastifyInstance, ctx: ProxyContext): void {
  for (const path of CACHE_RESET_PATHS) proxy.post(path, (req, reply) => resetAll(ctx, req, reply, path));
  proxy.get('/flush_cache', (req, reply) => resetAll(ctx, req, reply, '/flush_cache'));
}

/** The query string to send on: the client's, without the gateway's own `model`. */
function forwardedQuery(req: FastifyRequest): string {
  const query = new URLSearchParams(req.url.includes('?') ? req.url.slice(req.url.indexOf('?') + 1) : '');
  query.delete('model');
  const rest = query.toString();
  return rest === '' ? '' : `?${rest}`;
}

async function resetAll(ctx: ProxyContext, req: FastifyRequest, reply: FastifyReply, path: string): Promise<FastifyReply> {
  const started = performance.now();
  const start = startPassedOn(ctx, req, reply, path);
  if (!start) return reply;
  const base = (req.query as { model?: unknown }).model;
  const workers = ctx.fleet.routableFor(typeof base === 'string' ? base : undefined);
  if (workers.length === 0) {
    finishPassedOn(ctx, { id: start.id, clientId: start.clientId, trace: start.trace, path, worker: undefined, status: 503, started }, {});
    return reject(ctx, reply, 503, 'no_worker', `no healthy worker to send ${path} to`);
  }
  const target = `${path}${forwardedQuery(req)}`;
  const headers = { 'x-request-id': start.clientId ?? start.id };
  const answers = await Promise.all(workers.map((worker) => ask(ctx, worker, target, undefined, headers, start.abort.signal, start.trace)));
  if (start.abort.signal.aborted) {
    start.trace.end('client_closed');
    return reply;
  }
  return answerAll(ctx, reply, { start, started, path, workers }, answers);
}
