/**
 * Dynamo's standalone-indexer HTTP API (the Mooncake RFC #1403 shape) over the gateway's
 * router: `POST /query`, `POST /query_by_hash`, `GET /dump`, `GET /workers`, `POST /register`,
 * `POST /unregister`. Bodies are read and written without precision loss: u64 values (hashes,
 * instance ids) are exact JSON numbers both ways. One model and the `default` routing group per
 * gateway. `/query` reports each instance's reach per tier, cumulative as Dynamo's is: `gpu` the
 * device prefix, `cpu` that plus the host tier's run past it, `disk` that plus the disk and
 * external runs.
 * @internal
 * @module
 */

import type { FastifyInstance, FastifyReply } from 'fastify';
import { KvRouteError } from '../errors.js';
import { parseJsonLossless, stringifyLossless } from '../events/json.js';
import { blockHashes } from '../hashing.js';
import { checkEndpoint } from '../ingest/options.js';
import type { TieredScore } from '../kv-index.js';
import { snapshotDocument } from '../replicas/snapshot.js';
import type { KvRouter } from '../router/kv-router.js';
import { describe, isTokenId } from '../validate.js';
import type { Fleet } from './fleet.js';
import type { FleetWorker, ListenerStatus } from './fleet-worker.js';
import { statusOf } from './http-status.js';
import { parseWorkerIdValue } from './options.js';
import { namespaceOfSalt } from './scope.js';

export interface IndexerContext {
  fleet: Fleet;
  router: KvRouter;
  blockSize: number;
  /** The model name answered for (what the workers serve, or the configured one). */
  model: () => string;
}

class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function send(reply: FastifyReply, status: number, value: unknown): FastifyReply {
  return reply.code(status).type('application/json').send(stringifyLossless(value));
}

function body(value: unknown): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new ApiError(400, 'the body must be a JSON object');
  return value as Record<string, unknown>;
}

/** The models this gateway answers for: the configured (or first) name and every model a worker serves. */
function servedModels(ctx: IndexerContext): string[] {
  return [...new Set([ctx.model(), ...ctx.fleet.models()])];
}

/**
 * Checks a request's `model_name` and `routing_group`; returns the model named, if any. One
 * index holds every model's workers, so a model's answers are its workers' (see `ofModel`).
 */
function checkScope(b: Record<string, unknown>, ctx: IndexerContext, required: boolean): string | undefined {
  const model = b.model_name;
  if (model === undefined && !required) return undefined;
  if (typeof model !== 'string') throw new ApiError(400, 'model_name must be a string');
  const served = servedModels(ctx);
  if (!served.includes(model))
    throw new ApiError(404, `no indexer for model ${JSON.stringify(model)} (this gateway serves ${served.join(', ')})`);
  if (b.routing_group !== undefined && b.routing_group !== null && b.routing_group !== 'default') {
    throw new ApiError(400, 'routing groups other than "default" are not supported');
  }
  return model;
}

/** A worker's model: what its `/v1/models` lists, else what it was registered under, else the gateway's. */
function modelOf(m: FleetWorker, ctx: IndexerContext): string {
  return m.model ?? ctx.model();
}

/**
 * Every rank of the workers serving `model` (all workers when none is named), each with its
 * reach into the query per tier.
 */
function tieredScores(hashes: BigUint64Array | readonly bigint[], model: string | undefined, ctx: IndexerContext): TieredScore[] {
  const serving = model === undefined ? undefined : ctx.fleet.servingWorkers(model);
  const only = serving && !serving.adapter ? new Set(serving.workers) : undefined;
  const ranks = ctx.fleet
    .list()
    .filter((m) => !only || only.has(m.spec.id))
    .flatMap((m) => {
      const size = Math.max(1, m.spec.dpSize ?? 1, m.spec.kvEvents?.length ?? 0);
      return Array.from({ length: size }, (_, dpRank) => ({ workerId: m.spec.id, dpRank }));
    });
  return ctx.router.index.findTieredMatches(hashes, ranks);
}

/** `scores`, `frequencies` and `instances` in tokens, as Dynamo answers `/query`. */
function queryAnswer(scores: readonly TieredScore[], blockSize: number): unknown {
  const legacy: Record<string, Record<string, number>> = {};
  const instances: Record<string, { longest_matched: number; gpu: number; dp: Record<string, number>; cpu: number; disk: number }> = {};
  let depth = 0;
  for (const s of scores) {
    const cpuBlocks = s.device + s.hostPinned;
    const diskBlocks = cpuBlocks + s.disk + s.external;
    if (diskBlocks === 0) continue;
    const id = String(s.workerId);
    const tokens = s.device * blockSize;
    if (s.device > 0) {
      legacy[id] ??= {};
      legacy[id][String(s.dpRank)] = tokens;
    }
    instances[id] ??= { longest_matched: 0, gpu: 0, dp: {}, cpu: 0, disk: 0 };
    const inst = instances[id];
    inst.dp[String(s.dpRank)] = tokens;
    inst.gpu = Math.max(inst.gpu, tokens);
    inst.cpu = Math.max(inst.cpu, cpuBlocks * blockSize);
    inst.disk = Math.max(inst.disk, diskBlocks * blockSize);
    inst.longest_matched = inst.disk;
    depth = Math.max(depth, s.device);
  }
  // frequencies[i]: ranks holding block i of the query on the device.
  const frequencies = new Array<number>(depth).fill(0);
  for (const s of scores) for (let i = 0; i < s.device; i++) frequencies[i]++;
  return { scores: legacy, frequencies, instances };
}

function workerEntry(m: FleetWorker, ctx: IndexerContext): unknown {
  const status = ctx.fleet.listenerStatus(m);
  const endpoints: Record<string, string> = {};
  const listeners: Record<string, { endpoint: string; status: string }> = {};
  (m.spec.kvEvents ?? []).forEach((e, r) => {
    endpoints[String(r)] = e;
    listeners[String(r)] = { endpoint: e, status: status[r] };
  });
  const order: ListenerStatus[] = ['failed', 'pending', 'active', 'paused'];
  const aggregate = order.find((s) => status.includes(s)) ?? 'paused';
  return {
    instance_id: m.spec.id,
    source: 'zmq',
    status: aggregate,
    model_name: modelOf(m, ctx),
    routing_group: 'default',
    block_size: ctx.blockSize,
    endpoints,
    listeners,
    // kvroute's additions: the worker's URL and health.
    url: m.spec.url ?? null,
    health: m.breaker.state,
  };
}

function register(b: Record<string, unknown>, ctx: IndexerContext): number {
  const model = checkScope(b, ctx, true);
  if (b.block_size !== ctx.blockSize) throw new ApiError(400, `block_size must be ${ctx.blockSize}, this indexer's block size`);
  const id = parseWorkerIdValue(b.instance_id, 'instance_id');
  const rank = b.dp_rank === undefined ? 0 : b.dp_rank;
  if (typeof rank !== 'number' || !Number.isInteger(rank) || rank < 0 || rank >= 1024)
    throw new ApiError(400, 'dp_rank must be an integer in [0, 1023]');
  const endpoint = checkEndpoint(b.endpoint, 'endpoint');
  const replay =
    b.replay_endpoint === undefined || b.replay_endpoint === null ? undefined : checkEndpoint(b.replay_endpoint, 'replay_endpoint');
  const existing = ctx.fleet.get(id);
  if (!existing) {
    if (rank !== 0) throw new ApiError(400, `register dp_rank 0 of instance ${id} first (ranks are registered in order)`);
    const url = b.url === undefined ? undefined : new URL(String(b.url)).origin;
    const added = ctx.fleet.add(
      {
        id,
        url,
        kvEvents: [endpoint],
        replay: replay ? [replay] : undefined,
        dpSize: 1,
        maxNumBatchedTokens: undefined,
        weight: 1,
        role: 'aggregated',
        bootstrapPort: undefined,
      },
      'indexer',
    );
    // An index-only worker serves what it was registered under; one with a URL says itself (`/v1/models`).
    if (added.model === undefined && model !== undefined) added.modelNames = new Set([model]);
    return 201;
  }
  const ranks = existing.spec.kvEvents ?? [];
  if (rank < ranks.length) throw new ApiError(409, `instance ${id} dp_rank ${rank} is already registered; /unregister it first`);
  if (rank !== ranks.length) throw new ApiError(400, `instance ${id} has ${ranks.length} ranks; register dp_rank ${ranks.length} next`);
  const replays = existing.spec.replay;
  if ((replays === undefined) !== (replay === undefined) && ranks.length > 0) {
    throw new ApiError(400, `give replay_endpoint for every rank of instance ${id} or for none`);
  }
  ctx.fleet.resubscribe(existing, [...ranks, endpoint], replays && replay ? [...replays, replay] : undefined);
  return 201;
}

async function unregister(b: Record<string, unknown>, ctx: IndexerContext): Promise<number> {
  checkScope(b, ctx, true);
  const id = parseWorkerIdValue(b.instance_id, 'instance_id');
  const m = ctx.fleet.get(id);
  if (!m) throw new ApiError(404, `instance ${id} is not registered`);
  if (b.dp_rank === undefined || b.dp_rank === null) {
    await ctx.fleet.remove(id);
    return 200;
  }
  const ranks = m.spec.kvEvents ?? [];
  if (b.dp_rank !== ranks.length - 1) throw new ApiError(400, `only the last rank (${ranks.length - 1}) can be unregistered alone`);
  if (ranks.length === 1) await ctx.fleet.remove(id);
  else {
    ctx.router.index.removeWorker(id, ranks.length - 1);
    ctx.fleet.resubscribe(m, ranks.slice(0, -1), m.spec.replay?.slice(0, -1));
  }
  return 200;
}

function hashes(value: unknown): bigint[] {
  if (!Array.isArray(value)) throw new ApiError(400, 'block_hashes must be a list of u64 hashes');
  return value.map((h, i) => {
    try {
      return parseWorkerIdValue(h, `block_hashes[${i}]`);
    } catch {
      throw new ApiError(400, `block_hashes[${i}] must be a u64, got ${JSON.stringify(h)}`);
    }
  });
}

/** A LoRA name or cache salt: absent, null or a string. Anything else would silently be no scope at all. */
function optionalName(value: unknown, field: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw new ApiError(400, `${field} must be a string or null, got ${describe(value)}`);
  return value;
}

/** Registers the indexer routes on `app` (already guarded by the admin token, if any). */
export function indexerRoutes(app: FastifyInstance, ctx: IndexerContext): void {
  // Lossless JSON in this scope: hashes and ids above 2^53 stay exact.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, text, done) => {
    try {
      done(null, parseJsonLossless(text as string));
    } catch (err) {
      done(
        Object.assign(new Error((err as Error).message.replace(/^invalid JSON: /, 'the body is not JSON: ')), { statusCode: 400 }),
        undefined,
      );
    }
  });
  app.setErrorHandler((err: Error & { statusCode?: number }, _req, reply) => {
    // A status the error carries first (Fastify's, an engine's 404 for an unknown model), as the proxy's handler does.
    const status = err instanceof ApiError ? err.status : (err.statusCode ?? (err instanceof KvRouteError ? statusOf(err) : 500));
    return send(reply, status, { error: err.message });
  });
  app.post('/query', async (req, reply) => {
    const b = body(req.body);
    const model = checkScope(b, ctx, false);
    const ids = b.token_ids;
    if (!Array.isArray(ids) || !ids.every(isTokenId)) throw new ApiError(400, 'token_ids must be a list of token ids');
    const loraName = optionalName(b.lora_name, 'lora_name');
    const salt = optionalName(b.cache_salt, 'cache_salt');
    // As the engines' salted blocks are indexed: a `dynamo-cache-salt:` key names its rest.
    const cacheNamespace = salt ? namespaceOfSalt(salt) : undefined;
    const opts = { ...(loraName ? { loraName } : {}), ...(cacheNamespace ? { cacheNamespace } : {}) };
    const hashes = blockHashes(ids as number[], ctx.blockSize, { ...opts, backend: ctx.router.backend });
    return send(reply, 200, queryAnswer(tieredScores(hashes, model, ctx), ctx.blockSize));
  });
  app.post('/query_by_hash', async (req, reply) => {
    const b = body(req.body);
    const model = checkScope(b, ctx, false);
    if (b.cache_salt !== undefined && b.cache_salt !== null)
      throw new ApiError(400, 'cache_salt must be omitted: hashes already carry their salt');
    return send(reply, 200, queryAnswer(tieredScores(hashes(b.block_hashes), model, ctx), ctx.blockSize));
  });
  // Dynamo's dump shape, plus the engine seqs a replica warm-starting from it resumes after.
  app.get('/dump', async (_req, reply) => send(reply, 200, await snapshotDocument(ctx.router.index, ctx.model())));
  app.get('/workers', async (req, reply) => {
    const q = req.query as Record<string, unknown>;
    const group = q.routing_group === undefined || q.routing_group === 'default';
    const name = q.model_name;
    const workers = ctx.fleet.list().filter((m) => name === undefined || name === modelOf(m, ctx) || m.modelNames.has(String(name)));
    return send(reply, 200, group ? workers.map((m) => workerEntry(m, ctx)) : []);
  });
  app.post('/register', async (req, reply) => send(reply, register(body(req.body), ctx), { status: 'ok' }));
  app.post('/unregister', async (req, reply) => send(reply, await unregister(body(req.body), ctx), { status: 'ok' }));
}
