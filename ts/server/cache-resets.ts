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
import type { ProxyContext } from './proxy.js';
import { answerAll, ask, startBroadcast } from './worker-broadcast.js';

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
  const r = startBroadcast(ctx, req, reply, path, false);
  if (!r) return reply;
  const target = `${path}${forwardedQuery(req)}`;
  const headers = { 'x-request-id': r.start.clientId ?? r.start.id };
  const answers = await Promise.all(
    r.workers.map((worker) => ask(ctx, worker, target, undefined, headers, r.start.abort.signal, r.start.trace)),
  );
  if (r.start.abort.signal.aborted) {
    r.start.trace.end('client_closed');
    return reply;
  }
  return answerAll(ctx, reply, r, answers);
}
