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
import { skipsPrefill, splits } from './disaggregation.js';
import { EngineRefusal } from './engine-tokenize.js';
import type { Fleet, FleetWorker, ListenerStatus } from './fleet.js';
import { parseWorkerIdValue, resolveWorker } from './options.js';
import { BadRequest, engineTokens, readRequest } from './prompt.js';
import { batchPromptsOf, inScope, routingScope } from './scope.js';
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
  app.post('/admin/explain', async (req, reply) => {
    const b = (req.body ?? {}) as Record<string, unknown>;
    let read: ReturnType<typeof readRequest>;
    const kind =
      b.input !== undefined
        ? 'responses'
        : b.messages !== undefined
          ? 'chat'
          : b.text !== undefined || b.input_ids !== undefined
            ? 'generate'
            : 'completion';
    try {
      read = readRequest(b, kind);
    } catch (err) {
      if (err instanceof BadRequest) throw new KvRouteError('ERR_INVALID_ARG', err.message);
      throw err;
    }
    // The proxy routes each prompt of a batch on its own; explaining one of them silently would mislead.
    if (read.batch) throw new KvRouteError('ERR_INVALID_ARG', 'explain takes one prompt; send each prompt of a batch on its own');
    // The engine tokenizer gets the workers' own refusal; a local one asks their model lists, as the proxy's answer would come from a worker.
    if (ctx.tokenizer.kind === 'local' && read.model !== undefined && ctx.fleet.servedByNone(read.model))
      throw new EngineRefusal(404, `The model \`${read.model}\` does not exist.`);
    const tokens = await engineTokens(ctx.tokenizer, read);
    // An SGLang batch is weighed whole, as the proxy routes it.
    const batch = read.batchInputs && (await Promise.all(read.batchInputs.map((input) => engineTokens(ctx.tokenizer, { ...read, input }))));
    const scope = routingScope(read.model, read.cacheSalt, ctx.fleet, read.batchModels);
    const pools = ctx.fleet.routableByRole();
    const weigh = (workers: readonly bigint[]) =>
      ctx.router.potentialLoads({
        requestId: 'explain',
        tokens,
        ...(batch ? { batchPrompts: batchPromptsOf(batch, scope) } : {}),
        allowedWorkers: workers.filter((id) => inScope(scope, id)),
        ...scope.hash,
      });
    // As the proxy serves it: in a prefill and a decode leg, or whole.
    const decoders = splits(ctx.fleet, read, kind, undefined);
    const decodeCandidates = decoders ? weigh(decoders) : [];
    const split = decoders !== undefined && !skipsPrefill(tokens.length, decodeCandidates, ctx.blockSize, ctx.bypassBelowTokens);
    const candidates = weigh(split ? pools.prefill : pools.whole);
    const legs = split ? { split, decodeCandidates } : { split };
    return reply
      .type('application/json')
      .send(json({ promptTokens: tokens.length, tokens, ...(batch ? { batchTokens: batch } : {}), candidates, ...legs }));
  });
}
