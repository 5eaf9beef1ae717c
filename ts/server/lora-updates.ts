/**
 * vLLM's runtime LoRA routes through the gateway: `POST /v1/load_lora_adapter` and
 * `/v1/unload_lora_adapter` (served by workers started with `VLLM_ALLOW_RUNTIME_LORA_UPDATING`).
 * A client of one vLLM server loads an adapter there and then names it as its `model`; behind
 * the gateway the fleet is the server, so the call goes to every healthy worker (those serving
 * the base model `?model=` names, in a fleet of several), and the gateway then reads their model
 * lists at once, so that requests naming the adapter are routed to the workers holding it from
 * the next request on (not after the next periodic refresh).
 *
 * The answer is vLLM's when every worker agrees (its text, status 200). Otherwise it is the first
 * failure's status, with a message saying which workers did what, so that a client can tell an
 * adapter loaded on some workers from one loaded on none. Each worker's answer is counted in
 * `kvroute_gateway_passed_on_requests_total{path,worker,status}`.
 *
 * The gateway remembers the adapters loaded through it (until unloaded through it). vLLM forgets
 * runtime adapters when it restarts, so whenever the gateway reads a worker's model list (when it
 * joins, comes back into routing, when its KV events show a new engine, and every 15 s) and an
 * adapter is missing there, it loads it
 * again, with the body it was first loaded with: a restarted or newly added worker serves the
 * fleet's adapters without the client doing anything. A failed reload is retried a minute later
 * at the soonest. `kvroute_gateway_lora_restores_total{worker,result}` counts them.
 * @internal
 * @module
 */

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ProxyContext } from './proxy.js';
import { answerAll, ask, errorText, startBroadcast } from './worker-broadcast.js';

const PATHS = ['/v1/load_lora_adapter', '/v1/unload_lora_adapter'] as const;

/** A failed reload on a worker is tried again no sooner than this, ms. */
const RETRY_RESTORE_MS = 60_000;

/** An adapter loaded through the gateway: the body it was loaded with, and the base model `?model=` named. */
interface Loaded {
  body: object;
  base: string | undefined;
}

/** Registers the runtime LoRA routes on the proxy (behind its API-key check), and the reloads on workers that lack an adapter. */
export function registerLoraUpdates(proxy: FastifyInstance, ctx: ProxyContext): void {
  const loaded = new Map<string, Loaded>();
  for (const path of PATHS) proxy.post(path, (req, reply) => broadcast(ctx, req, reply, path, loaded));
  const restoring = new Set<string>();
  const failedAt = new Map<string, number>();
  ctx.fleet.onModelsRead((m) => {
    for (const [name, { body, base }] of loaded) {
      const key = `${m.spec.id}/${name}`;
      if (m.adapters.has(name) || (base !== undefined && !m.modelNames.has(base)) || restoring.has(key)) continue;
      if (performance.now() - (failedAt.get(key) ?? Number.NEGATIVE_INFINITY) < RETRY_RESTORE_MS) continue;
      restoring.add(key);
      void ask(
        ctx,
        m.spec.id,
        PATHS[0],
        body,
        { 'x-request-id': `kvr-${ctx.nextId++}` },
        AbortSignal.timeout(ctx.opts.upstream.headersTimeoutMs),
      )
        .then(async (a) => {
          const ok = a.status === 200;
          ctx.metrics.loraRestores.inc({ worker: String(m.spec.id), result: ok ? 'loaded' : 'failed' });
          if (ok) {
            failedAt.delete(key);
            ctx.log.info({ worker: String(m.spec.id), adapter: name }, 'LoRA adapter loaded again on a worker that lacked it');
            await ctx.fleet.refreshModels([m.spec.id]);
          } else {
            failedAt.set(key, performance.now());
            ctx.log.warn(
              { worker: String(m.spec.id), adapter: name, status: a.status ?? null, error: errorText(a.text) },
              'LoRA adapter reload failed',
            );
          }
        })
        .finally(() => restoring.delete(key));
    }
  });
}

async function broadcast(
  ctx: ProxyContext,
  req: FastifyRequest,
  reply: FastifyReply,
  path: string,
  loaded: Map<string, Loaded>,
): Promise<FastifyReply> {
  const r = startBroadcast(ctx, req, reply, path, true);
  if (!r) return reply;
  const { start, workers } = r;
  const body = req.body as object;
  const base = (req.query as { model?: unknown }).model;
  const name = (body as { lora_name?: unknown }).lora_name;
  // Forgotten before the unload goes out, so that no model-list read meanwhile loads it again.
  const unloading = path === PATHS[1] && typeof name === 'string' ? loaded.get(name) : undefined;
  if (unloading) loaded.delete(name as string);
  const answers = await Promise.all(
    workers.map((worker) => ask(ctx, worker, path, body, { 'x-request-id': start.clientId ?? start.id }, start.abort.signal, start.trace)),
  );
  const anyDone = answers.some((a) => a.status === 200);
  if (typeof name === 'string') {
    if (path === PATHS[0] && anyDone) loaded.set(name, { body, base: typeof base === 'string' ? base : undefined });
    // Unloaded nowhere: still the fleet's.
    if (unloading && !anyDone) loaded.set(name, unloading);
  }
  if (start.abort.signal.aborted) {
    start.trace.end('client_closed');
    return reply;
  }
  // Requests naming the adapter go to the workers holding it from now on.
  await ctx.fleet.refreshModels(workers);
  return answerAll(ctx, reply, r, answers);
}
