/**
 * The gateway's admin API: workers added, listed, removed and set as a whole at run time, the router's stats,
 * a session's binding, and `POST /admin/explain`, which shows what routing would weigh for a
 * prompt without booking anything. Ids are exact JSON numbers (u64).
 * @internal
 * @module
 */

import type { FastifyInstance } from 'fastify';
import { KvRouteError } from '../errors.js';
import { stringifyLossless } from '../events/json.js';
import type { KvRouter } from '../router/kv-router.js';
import type { WorkerHealthState } from './breaker.js';
import type { CacheAccuracySnapshot } from './cache-accuracy.js';
import { explain } from './explain.js';
import type { Fleet } from './fleet.js';
import type { FleetWorker, ListenerStatus } from './fleet-worker.js';
import { parseWorkerIdValue, resolveWorker } from './options.js';
import { sessionKey } from './session-key.js';
import type { PromptTokenizer } from './tokenize.js';
import type { RestReason } from './worker-rest.js';
import type { WorkerRole } from './worker-role.js';
import type { WorkerSetChanges } from './worker-set.js';

export interface AdminContext {
  fleet: Fleet;
  router: KvRouter;
  tokenizer: PromptTokenizer;
  /** Whether the router keeps session affinity (`sessionAffinityTtlSecs`). */
  sessionAffinity: boolean;
  /** `Gateway.setWorkers` for `PUT /admin/workers`. */
  setWorkers: (workers: unknown) => WorkerSetChanges;
  /** `disaggregation.bypassBelowTokens`, and the block size it is counted in (for explain). */
  bypassBelowTokens: number | null;
  blockSize: number;
}

/**
 * A worker as `Gateway.workers()` and `GET /admin/workers` list it.
 * @group Gateway
 */
export interface WorkerView {
  /** Its id in the router. */
  id: bigint;
  /** Its HTTP API; null for an index-only worker (the indexer API's `/register` without a URL). */
  url: string | null;
  /** Who added it. */
  origin: FleetWorker['origin'];
  /** Its breaker's state. */
  health: WorkerHealthState;
  /** Why it is in that state (the last transition's reason). */
  healthReason: string;
  /** Failures in a row (probes, 5xx answers, timeouts) its breaker has counted. */
  consecutiveFailures: number;
  /** Whether requests may go to it now. */
  routable: boolean;
  /** Why it rests, out of routing until woken (asleep, paused, its memory released through the control routes); empty when it does not. */
  resting: RestReason[];
  /** The model it serves (the first name its `/v1/models` lists), once read. */
  model: string | null;
  /** Its data-parallel ranks. */
  dpSize: number;
  /** Its relative capacity (a worker of weight 2 is charged half the cost). */
  weight: number;
  /** What it serves: whole requests, or the prefill or decode legs of a disaggregated fleet's. */
  role: WorkerRole;
  /** A prefill worker's SGLang bootstrap port as configured, null when not (8998 is sent). */
  bootstrapPort: number | null;
  /** Its ranks' KV-event endpoints, or null without events. */
  kvEvents: string[] | null;
  /** Its ranks' replay endpoints, or null. */
  replay: string[] | null;
  /** Each rank's event listener, in the indexer API's words. */
  listeners: ListenerStatus[];
  /** Its engine's reported cached tokens against the predictions, since it joined. */
  cachePredictions: CacheAccuracySnapshot;
}

/** A worker as the admin API lists it. */
export function describeWorker(m: FleetWorker, fleet: Fleet): WorkerView {
  return {
    id: m.spec.id,
    url: m.spec.url ?? null,
    origin: m.origin,
    health: m.breaker.state,
    healthReason: m.breaker.reason,
    consecutiveFailures: m.breaker.failures,
    routable: m.inRouter && m.pool !== undefined && m.breaker.state !== 'down' && !m.rest.isResting,
    resting: m.rest.reasons,
    model: m.model ?? null,
    dpSize: m.spec.dpSize,
    weight: m.spec.weight,
    role: m.spec.role,
    bootstrapPort: m.spec.bootstrapPort ?? null,
    kvEvents: m.spec.kvEvents ?? null,
    replay: m.spec.replay ?? null,
    listeners: fleet.listenerStatus(m),
    cachePredictions: m.accuracy.snapshot(),
  };
}

export function adminRoutes(app: FastifyInstance, ctx: AdminContext): void {
  const json = (value: unknown) => stringifyLossless(value);
  app.get('/admin/workers', async (_req, reply) =>
    reply.type('application/json').send(json(ctx.fleet.list().map((m) => describeWorker(m, ctx.fleet)))),
  );
  app.post('/admin/workers', async (req, reply) => {
    const member = ctx.fleet.add(resolveWorker(req.body, 'body'), 'admin');
    return reply
      .code(201)
      .type('application/json')
      .send(json(describeWorker(member, ctx.fleet)));
  });
  // The whole list at once, as a config reload sets it (a body of `[{ id, url, … }, …]`, POST's entries).
  app.put('/admin/workers', async (req, reply) => reply.type('application/json').send(json(ctx.setWorkers(req.body))));
  app.delete('/admin/workers/:id', async (req, reply) => {
    const id = parseWorkerIdValue((req.params as { id: string }).id, 'id');
    if (!(await ctx.fleet.remove(id))) return reply.code(404).send({ error: `worker ${id} is not registered` });
    return reply.send({ status: 'ok' });
  });
  app.get('/admin/stats', async (_req, reply) => reply.type('application/json').send(json(ctx.router.stats())));
  // A session is bound per model (see session-key.ts): `?model=` names the one its requests named.
  app.get('/admin/sessions/:id', async (req, reply) => {
    const id = (req.params as { id: string }).id;
    const model = (req.query as { model?: unknown }).model;
    if (model !== undefined && typeof model !== 'string') throw new KvRouteError('ERR_INVALID_ARG', 'model must be given once');
    if (!ctx.sessionAffinity)
      return reply.code(404).send({ error: 'session affinity is off (set the router option sessionAffinityTtlSecs)' });
    const binding = ctx.router.session(sessionKey(id, model));
    const named = model === undefined ? '' : ` for model ${JSON.stringify(model)}`;
    if (!binding) return reply.code(404).send({ error: `session ${JSON.stringify(id)} is not bound${named}` });
    return reply.type('application/json').send(json({ sessionId: id, model: model ?? null, ...binding }));
  });
  app.post('/admin/explain', async (req, reply) => reply.type('application/json').send(json(await explain(ctx, req.body))));
}
