/**
 * The engines' control routes through the gateway: each acts on one engine's own state, so
 * behind the gateway, where the fleet is the engine, the call goes to every healthy worker (those
 * serving the base model `?model=` names, in a fleet of several), its JSON body and the rest of
 * its query string as they came. RL loops drive their engines with these between rollouts:
 * - vLLM's (served in its dev mode): `/reset_prefix_cache` (`?device=`), `/sleep` (`?level=`) and
 *   `/wake_up` (`?tags=`), and the question `GET /is_sleeping` (is-sleeping.ts);
 * - SGLang's: `/flush_cache` (POST, or GET as SGLang takes it too, sent on as POST),
 *   `/abort_request` (`rid`, or `abort_all`: a worker not running the request answers 200 all the
 *   same), `/pause_generation`, `/continue_generation`, `/release_memory_occupation`,
 *   `/resume_memory_occupation` and `/update_weights_from_disk`.
 * The calls go to resting workers too: a worker that answered 200 to `/sleep`,
 * `/pause_generation` or `/release_memory_occupation` is out of routing until it answers 200 to
 * the call that undoes it (worker-rest.ts).
 * A cache dropped this way is announced by its engine with `AllBlocksCleared`, and the index
 * forgets its blocks from that event: the gateway changes nothing itself, so an engine that
 * refused (none drops a cache its running requests hold) keeps its blocks in the index too.
 * The answer is the engines' when every worker agrees, else the first refusal's status, saying
 * which workers did what (worker-broadcast.ts).
 * @internal
 * @module
 */

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { askIsSleeping } from './is-sleeping.js';
import type { ProxyContext } from './proxy.js';
import { answerAll, ask, startBroadcast } from './worker-broadcast.js';
import { restChange } from './worker-rest.js';

/** The engines' control routes (POST), vLLM's then SGLang's. */
export const FLEET_COMMAND_PATHS = [
  '/reset_prefix_cache',
  '/sleep',
  '/wake_up',
  '/flush_cache',
  '/abort_request',
  '/pause_generation',
  '/continue_generation',
  '/release_memory_occupation',
  '/resume_memory_occupation',
  '/update_weights_from_disk',
] as const;

/** Registers the control routes on the proxy (behind its API-key check). */
export function registerFleetCommands(proxy: FastifyInstance, ctx: ProxyContext): void {
  for (const path of FLEET_COMMAND_PATHS) proxy.post(path, (req, reply) => sendToAll(ctx, req, reply, path));
  proxy.get('/flush_cache', (req, reply) => sendToAll(ctx, req, reply, '/flush_cache'));
  proxy.get('/is_sleeping', (req, reply) => askIsSleeping(ctx, req, reply));
}

/** The query string to send on: the client's, without the gateway's own `model`. */
function forwardedQuery(req: FastifyRequest): string {
  const query = new URLSearchParams(req.url.includes('?') ? req.url.slice(req.url.indexOf('?') + 1) : '');
  query.delete('model');
  const rest = query.toString();
  return rest === '' ? '' : `?${rest}`;
}

async function sendToAll(ctx: ProxyContext, req: FastifyRequest, reply: FastifyReply, path: string): Promise<FastifyReply> {
  const body = req.method === 'POST' && req.body !== undefined && req.body !== null ? req.body : undefined;
  // A body, when there is one, is an engine request's: a JSON object.
  const r = startBroadcast(ctx, req, reply, path, body !== undefined, true);
  if (!r) return reply;
  const query = forwardedQuery(req);
  const target = `${path}${query}`;
  const headers = { 'x-request-id': r.start.clientId ?? r.start.id };
  const answers = await Promise.all(
    r.workers.map((worker) => ask(ctx, worker, target, body as object | undefined, headers, r.start.abort.signal, r.start.trace)),
  );
  if (r.start.abort.signal.aborted) {
    r.start.trace.end('client_closed');
    return reply;
  }
  // A worker put to sleep or paused rests (out of routing) until it answers the call that wakes it.
  const change = restChange(path, new URLSearchParams(query.slice(1)), body);
  if (change) for (const a of answers) if (a.status === 200) ctx.fleet.rested(a.worker, change);
  return answerAll(ctx, reply, r, answers);
}
