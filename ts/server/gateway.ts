/**
 * `createGateway`: kvroute as an OpenAI-compatible KV-aware gateway (what `kvroute serve`
 * runs), built from parts a service can also use on their own: a Fastify app with the proxy,
 * `/health`, `/ready`, `/v1/models`, `/metrics`, the admin API and Dynamo's indexer API (on
 * their own listener when `admin` is set), over one {@link KvRouter} fed by the workers' KV events.
 * @module
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import { Registry } from 'prom-client';
import { KvRouteError, renameOptions } from '../errors.js';
import { SeededRandom } from '../random.js';
import { IndexSnapshotWriter, type SnapshotWriterOptions } from '../replicas/snapshot-store.js';
import { type WarmStartOptions, type WarmStartResult, warmStart } from '../replicas/warm-start.js';
import { KvRouter } from '../router/kv-router.js';
import { chooseCandidate, type Selector } from '../router/select.js';
import { checkOptions, describe } from '../validate.js';
import { adminRoutes, describeWorker, type WorkerView } from './admin-api.js';
import { anthropicErrorBodies } from './api-errors.js';
import { bearerGuard } from './auth.js';
import { corsMetrics, registerCors } from './cors.js';
import { Discovery, DiscoveryMetrics } from './discovery.js';
import { askWorkersToTokenize } from './engine-tokenize.js';
import { Fleet } from './fleet.js';
import { registerFleetCommands } from './fleet-commands.js';
import { buildInfo, GatewayMetrics } from './gateway-metrics.js';
import { errorType, statusOf } from './http-status.js';
import { indexerRoutes } from './indexer-api.js';
import { registerLoraUpdates } from './lora-updates.js';
import {
  type GatewayOptions,
  type GatewayWorker,
  parseWorkerIdValue,
  type ResolvedGatewayOptions,
  type ResolvedWorker,
  resolveGatewayOptions,
  resolveWorker,
  type ShutdownOptions,
} from './options.js';
import { registerPassthrough } from './passthrough.js';
import { openAiError, type ProxyContext, proxyCompletion } from './proxy.js';
import { logReplicaChanges } from './replica-log.js';
import { ResponseOwners } from './response-owners.js';
import { registerResponses } from './responses.js';
import { metrics } from './router-metrics.js';
import { Shutdown } from './shutdown.js';
import { snapshotMetrics } from './snapshot-metrics.js';
import { listenerTls, serveTls } from './tls.js';
import { engineTokenizer, localTokenizer, type PromptTokenizer } from './tokenize.js';
import { tokenizeCacheMetrics } from './tokenize-metrics.js';
import { type GatewayTracer, gatewayTracer } from './tracing/provider.js';
import { UpstreamTls } from './upstream-tls.js';
import { planWorkerSet, setFleetWorkers, type WorkerSetChanges } from './worker-set.js';

/**
 * Where a started gateway listens.
 * @group Gateway
 */
export interface GatewayAddress {
  /** The proxy's base URL. */
  url: string;
  /** The admin listener's base URL (the proxy's when `admin` is not set). */
  adminUrl: string;
}

/**
 * A gateway: Fastify apps over one router.
 * @group Gateway
 */
export interface Gateway {
  /** The proxy's Fastify instance (with the admin API too unless `admin` is set): mount or `inject` it. */
  readonly app: FastifyInstance;
  /** The admin listener's Fastify instance, when `admin` is set. */
  readonly adminApp: FastifyInstance | undefined;
  /** A plain `(req, res)` handler of `app`, for a `node:http` server of your own. */
  readonly handler: (req: IncomingMessage, res: ServerResponse) => void;
  /** The router (its index is fed by the workers' KV events). */
  readonly router: KvRouter;
  /** The registry `/metrics` serves (router, index, event sources, gateway). */
  readonly registry: Registry;
  /**
   * The warm start's outcome (see `warmStart` in the options): what was loaded, an error when the
   * gateway had to start cold, or undefined without a warm start. `listen()` waits for it.
   */
  readonly warmStart: Promise<WarmStartResult | Error | undefined>;
  /** The index snapshot writer of the `snapshots` option (its `stats()`, `write()`), or undefined without it. */
  readonly snapshots: IndexSnapshotWriter | undefined;
  /**
   * Starts listening, once (port 0: any free port; host default `127.0.0.1`), after the warm start.
   * @throws {KvRouteError} (as a rejection) `ERR_INVALID_ARG` for a bad argument, a second call, or
   * a port that cannot be bound (in use, no permission): when the proxy's port fails nothing
   * changed and `listen()` may be called again; when the admin port fails, the proxy was
   * already serving and the gateway is closed. `ERR_CLOSED` after `close()`.
   */
  listen(opts?: { port?: number; host?: string }): Promise<GatewayAddress>;
  /**
   * Adds a worker at run time (as `POST /admin/workers` does).
   * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument (the message names the key; an id already registered); `ERR_CLOSED` after `close()`.
   */
  addWorker(worker: GatewayWorker): void;
  /**
   * Removes a worker; false when it was not registered.
   * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument for a malformed id.
   */
  removeWorker(id: GatewayWorker['id']): Promise<boolean>;
  /**
   * Makes the gateway's workers those of `workers`, as `PUT /admin/workers` and `kvroute serve`'s
   * config reload do: workers not listed are removed (whichever API added them; the indexer API's
   * index-only workers and DNS discovery's stay), new ones added. A listed worker whose URL, endpoints and `dpSize`
   * are unchanged keeps its index and load (a new `weight` or `maxNumBatchedTokens` is applied in
   * place); one whose URL, endpoints or `dpSize` changed is replaced.
   * @throws {KvRouteError} `ERR_INVALID_ARG` naming the entry at fault (a bad worker, an id listed
   * twice or added by the indexer API or DNS discovery), with nothing changed; `ERR_CLOSED` after `close()`.
   */
  setWorkers(workers: readonly GatewayWorker[]): WorkerSetChanges;
  /** The workers with their health, as `GET /admin/workers` lists them. */
  workers(): WorkerView[];
  /**
   * Stops accepting requests, lets in-flight ones finish, then closes the router. Idempotent.
   * With `shutdown.delayMs`, a listening gateway first serves on for that long, not ready (see
   * {@link ShutdownOptions}); `close({ now: true })`, also while an earlier call waits, skips
   * what is left of the delay.
   * @throws nothing; calling it again returns the same promise.
   */
  close(options?: { now?: boolean }): Promise<void>;
}

/**
 * The default choice on costs divided by each worker's weight (weight 2: half the cost), with
 * the router's temperature and seed; with every weight 1 it is the router's own choice.
 */
function weightedSelector(o: ResolvedGatewayOptions, weight: (id: bigint) => number): Selector {
  // Made at the first choice: the router checks the seed (and the temperature) when it is built.
  let rng: SeededRandom | undefined;
  return (candidates) => {
    rng ??= new SeededRandom(o.router.seed ?? 0);
    return chooseCandidate(
      candidates.map((c) => ({ ...c, cost: c.cost / weight(c.workerId) })),
      o.router.routerTemperature ?? 0,
      rng,
    );
  };
}

/** Says whether the local tokenizer's prefix cache can help this model (it needs special tokens to cut prompts after). */
function logPrefixCache(tokenizer: PromptTokenizer, log: FastifyBaseLogger): void {
  const stats = tokenizer.prefixCacheStats?.();
  if (stats === undefined) return;
  if (stats.boundaryTokens === 0)
    log.info({ prefixCache: stats }, 'the local tokenizer has no special token to cut prompts after: its prefix cache will not help');
  else log.info({ prefixCache: stats }, `local tokenizer: prompts cut after ${stats.boundaryTokens} special tokens (prefix cache)`);
}

function makeTokenizer(o: ResolvedGatewayOptions, fleet: Fleet, log: FastifyBaseLogger): PromptTokenizer {
  if (o.tokenizer !== 'engine') return localTokenizer(o.backend, o.tokenizer, o.tokenizeCache);
  return engineTokenizer(askWorkersToTokenize(fleet, log), o.tokenizeCache);
}

/**
 * A peer warm start's request carries the gateway's own admin token unless its headers give an
 * `authorization`: the replicas of one fleet share it, and a peer that has one guards `/dump` with it.
 */
function withAdminToken(opts: WarmStartOptions, adminToken: string | undefined): WarmStartOptions {
  if (opts.peer === undefined || adminToken === undefined) return opts;
  const headers = opts.headers ?? {};
  if (Object.keys(headers).some((name) => name.toLowerCase() === 'authorization')) return opts;
  return { ...opts, headers: { ...headers, authorization: `Bearer ${adminToken}` } };
}

/** Runs the configured warm start; a failure is logged and the gateway starts cold. */
async function warmUp(router: KvRouter, opts: WarmStartOptions, log: FastifyBaseLogger): Promise<WarmStartResult | Error> {
  try {
    const r = await warmStart(router, opts);
    log.info(
      { warmStart: r },
      `warm start from ${r.from}: ${r.blocks} blocks (${r.lowerTierBlocks} in lower tiers), ${r.resumableRanks} engine streams resumable`,
    );
    return r;
  } catch (err) {
    log.warn({ err }, `warm start failed, starting cold: ${(err as Error).message}`);
    return err as Error;
  }
}

/**
 * The gateway's router, from the `router` section; the router's own checks name its options
 * `opts.*`, which in a config file is the `router` section, so its errors say so.
 */
function routerFor(o: ResolvedGatewayOptions, fleetRef: { fleet?: Fleet }): KvRouter {
  try {
    return new KvRouter({
      ...o.router,
      blockSize: o.blockSize,
      ...(o.backend ? { backend: o.backend } : {}),
      selector: o.router.selector ?? weightedSelector(o, (id) => fleetRef.fleet?.get(id)?.spec.weight ?? 1),
    });
  } catch (err) {
    throw renameOptions(err, 'router');
  }
}

interface ListenAddress {
  port: number;
  host: string;
}

/** `listen()`'s argument, checked: any free port on 127.0.0.1 unless told otherwise. */
function listenAddress(value: unknown): ListenAddress {
  const l = checkOptions(value, 'listen options', ['port', 'host']);
  const port = l.port ?? 0;
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > 65535)
    throw new KvRouteError('ERR_INVALID_ARG', `listen options.port must be an integer in [0, 65535], got ${describe(port)}`);
  const host = l.host ?? '127.0.0.1';
  if (typeof host !== 'string' || host === '')
    throw new KvRouteError('ERR_INVALID_ARG', `listen options.host must be a host name or address, got ${describe(host)}`);
  return { port, host };
}

/** Starts one Fastify listener; a port in use or not allowed is the caller's ERR_INVALID_ARG. */
async function bind(app: FastifyInstance, at: ListenAddress, what: string): Promise<string> {
  try {
    return await app.listen({ port: at.port, host: at.host });
  } catch (err) {
    throw new KvRouteError('ERR_INVALID_ARG', `${what} cannot listen on ${at.host}:${at.port}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * The index snapshot writer of the `snapshots` option, with its metrics and its failures logged:
 * they never reach a request, so without this a store that is down would go unnoticed.
 */
function startSnapshots(router: KvRouter, opts: SnapshotWriterOptions, registry: Registry, log: FastifyBaseLogger): IndexSnapshotWriter {
  const writer = new IndexSnapshotWriter(router, opts);
  snapshotMetrics(writer, registry);
  let failing = false;
  writer.on('failed', (err) => {
    failing = true;
    log.warn({ err }, `${err.message}; retried at the next period`);
  });
  writer.on('written', (stats) => {
    if (failing)
      log.info({ snapshot: stats }, `index snapshot stored again (${stats.lastBytes} bytes) after ${stats.failures} failed writes`);
    failing = false;
  });
  return writer;
}

/**
 * Builds a gateway over `opts.workers`: subscribes to their KV events, probes their health and
 * serves the proxy. Call `listen()` to serve it, or mount `app`/`handler` yourself.
 *
 * @example
 * ```ts
 * const gw = createGateway({ blockSize: 16, workers: [{ id: 1, url: 'http://127.0.0.1:8001', kvEvents: 'tcp://127.0.0.1:5557' }] });
 * const { url } = await gw.listen({ port: 8000 });
 * ```
 * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad option (the message names the key) or an
 * unreadable tokenizer; `ERR_DEPENDENCY_MISSING` on the JS backend without `zeromq`/`msgpackr`, or with `tracing.otlpEndpoint` without the OpenTelemetry SDK packages.
 * @group Gateway
 */
export function createGateway(opts: GatewayOptions): Gateway {
  const o = resolveGatewayOptions(opts);
  const appOptions = {
    logger: o.logLevel === false ? false : { level: o.logLevel },
    // One line per request is logged by the proxy itself, with the routing facts.
    logController: new LogController({ disableRequestLogging: true }),
    // No per-request child logger: the proxy logs its own line with the request id in it.
    childLoggerFactory: (logger: FastifyBaseLogger) => logger,
    bodyLimit: o.bodyLimitBytes,
    return503OnClosing: true,
    // Response ids in paths (`/v1/responses/{id}`) may be as long as the ids the proxy takes
    // (512 characters; Fastify's default stops at 100 with 414): longer ones get the proxy's 400.
    routerOptions: { maxParamLength: 1024 },
  } as const;
  const app = (o.tls ? Fastify({ ...appOptions, https: listenerTls(o.tls) }) : Fastify(appOptions)) as unknown as FastifyInstance;
  const adminApp = o.admin ? Fastify({ ...appOptions, bodyLimit: o.bodyLimitBytes }) : undefined;
  const shutdown = new Shutdown(o.shutdown, app.log);
  shutdown.attach(app.server);
  if (adminApp) shutdown.attach(adminApp.server);
  const fleetRef: { fleet?: Fleet } = {};
  const router = routerFor(o, fleetRef);
  const stopReplicaLog = logReplicaChanges(router, app.log);
  const registry = new Registry();
  const upstreamTls = o.upstream.tls ? new UpstreamTls(o.upstream.tls, registry, app.log) : undefined;
  const fleet = new Fleet(router, o, app.log, upstreamTls?.connect);
  fleetRef.fleet = fleet;
  metrics(router, registry);
  const gm = new GatewayMetrics(registry);
  buildInfo(registry, router.backend);
  const stopTls = o.tls ? serveTls(app.server as HttpsServer, o.tls, registry, app.log) : () => {};
  // Every way in or out (config, admin API, indexer API, setWorkers) passes here.
  fleet.onMembership((id, present) => {
    gm.setHealth(id, present ? 'healthy' : undefined);
    if (!present) gm.setResting(id, []);
  });
  fleet.onRestChange((id, reasons) => gm.setResting(id, reasons));
  fleet.onHealthChange((c) => {
    gm.setHealth(c.workerId, c.state);
    gm.transitions.inc({ worker: String(c.workerId), state: c.state });
  });
  let tokenizer: PromptTokenizer;
  let tracing: GatewayTracer | undefined;
  let snapshots: IndexSnapshotWriter | undefined;
  // Set by close(): a warm start that ends after it must not subscribe workers only to close them.
  let stopping = false;
  // The configured workers join once the warm start is over; until then setWorkers() edits this list.
  let pending: ResolvedWorker[] | undefined = o.workers;
  const discoveryMetrics = o.discovery.length > 0 ? new DiscoveryMetrics(registry) : undefined;
  const discoveries = o.discovery.map((d) => new Discovery(d, fleet, app.log, discoveryMetrics as DiscoveryMetrics));
  const addWorkers = () => {
    const workers = pending ?? [];
    pending = undefined;
    if (stopping) return;
    for (const w of workers) fleet.add(w, 'config');
    fleet.start();
    for (const d of discoveries) d.start();
  };
  const setWorkers = (workers: unknown, origin: 'config' | 'admin', at: string): WorkerSetChanges => {
    if (!pending) return setFleetWorkers(fleet, workers, origin, at);
    if (stopping) throw new KvRouteError('ERR_CLOSED', 'the gateway is closed');
    const plan = planWorkerSet(new Map(pending.map((spec) => [spec.id, { spec, origin: 'config' }])), workers, at);
    pending = plan.wanted;
    return plan.changes;
  };
  try {
    tracing = gatewayTracer(o.tracing, gm.spans, { registry, log: app.log });
    tokenizer = makeTokenizer(o, fleet, app.log);
    tokenizeCacheMetrics(tokenizer, registry);
    logPrefixCache(tokenizer, app.log);
    if (o.snapshots) snapshots = startSnapshots(router, o.snapshots, registry, app.log);
    // Without a warm start the workers are added now, so a bad worker option throws here.
    if (!o.warmStart) addWorkers();
  } catch (err) {
    stopReplicaLog();
    stopTls();
    upstreamTls?.stop();
    // Made when a later step threw: its SDK (if any) has nothing to export yet.
    void tracing?.shutdown();
    router.close();
    void fleet.close();
    void snapshots?.close();
    throw err;
  }
  // Made in the try above, which throws otherwise.
  const spans = tracing as GatewayTracer;
  const warm = o.warmStart
    ? warmUp(router, withAdminToken(o.warmStart, o.adminToken), app.log).finally(addWorkers)
    : Promise.resolve(undefined);
  const model = () => o.model ?? fleet.list().find((m) => m.model)?.model ?? 'unknown';
  const logRequests = o.logLevel !== false && ['info', 'debug', 'trace'].includes(o.logLevel);
  const ctx: ProxyContext = {
    router,
    fleet,
    tokenizer,
    metrics: gm,
    tracer: spans.tracer,
    opts: o,
    log: app.log,
    logRequests,
    routing: new Map(),
    owners: new ResponseOwners(o.responses.maxRemembered),
    nextId: 1,
  };

  app.register(async (proxy) => {
    const routes: string[] = [];
    proxy.addHook('onRoute', (route) => {
      if (route.method !== 'OPTIONS') routes.push(route.url);
    });
    // First: a preflight is answered before the API-key check (browsers send it without the key).
    if (o.cors) await registerCors(proxy, o.cors, corsMetrics(registry), () => routes);
    proxy.addHook(
      'onRequest',
      bearerGuard(o.apiKeys, (reply) => reply.send(openAiError('a valid API key is required', 'AuthenticationError', 401)), true),
    );
    proxy.post('/v1/completions', (req, reply) => proxyCompletion(ctx, req, reply, 'completion'));
    proxy.post('/v1/chat/completions', (req, reply) => proxyCompletion(ctx, req, reply, 'chat'));
    proxy.post('/v1/responses', (req, reply) => proxyCompletion(ctx, req, reply, 'responses'));
    // Anthropic's Messages API, as vLLM serves it: routed by the chat it becomes; refusals in Anthropic's shape.
    proxy.post('/v1/messages', { onSend: anthropicErrorBodies }, (req, reply) => proxyCompletion(ctx, req, reply, 'messages'));
    // SGLang's native generation API, routed by its prompt as a completion is.
    proxy.post('/generate', (req, reply) => proxyCompletion(ctx, req, reply, 'generate'));
    registerResponses(proxy, ctx);
    registerPassthrough(proxy, ctx);
    registerLoraUpdates(proxy, ctx);
    registerFleetCommands(proxy, ctx);
    // The base models (the configured name first), then the LoRA adapters the workers list: a
    // request naming one is routed to the workers serving it.
    proxy.get('/v1/models', async () => {
      const created = Math.floor(Date.now() / 1000);
      // vLLM's card: `root` and `max_model_len` as the workers list them (the smallest length, which fits them all).
      const card = (id: string, parent: string | null) => {
        const facts = fleet.modelCard(id);
        return {
          id,
          object: 'model',
          created,
          owned_by: 'kvroute',
          ...(facts.root === undefined ? {} : { root: facts.root }),
          parent,
          ...(facts.maxModelLen === undefined ? {} : { max_model_len: facts.maxModelLen }),
        };
      };
      const bases = [...new Set([model(), ...fleet.models()])];
      return {
        object: 'list',
        data: [...bases.map((id) => card(id, null)), ...fleet.adapters().map((a) => card(a.id, a.parent ?? model()))],
      };
    });
  });
  app.get('/health', async () => ({ status: 'ok' }));
  app.get('/ready', async (_req, reply) => {
    if (shutdown.draining) return reply.code(503).send({ status: 'shutting down', routableWorkers: fleet.routable().length });
    const routable = fleet.routable().length;
    return reply.code(routable > 0 ? 200 : 503).send({ status: routable > 0 ? 'ready' : 'no healthy worker', routableWorkers: routable });
  });
  app.setErrorHandler((err: Error & { statusCode?: number }, _req, reply) => {
    const status = err.statusCode ?? (err instanceof KvRouteError ? statusOf(err) : 500);
    if (status === 413) gm.rejected.inc({ reason: 'body_too_large' });
    return reply.code(status).send(openAiError(err.message, errorType(status), status));
  });
  // An endpoint the gateway does not serve (vLLM's audio, say) gets OpenAI's error shape, which
  // clients' SDKs read, naming the route, and is counted rather than lost in Fastify's default.
  app.setNotFoundHandler((req, reply) => {
    gm.rejected.inc({ reason: 'not_found' });
    return reply.code(404).send(openAiError(`kvroute serve has no route ${req.method} ${req.url.split('?')[0]}`, 'NotFoundError', 404));
  });
  const adminTarget = adminApp ?? app;
  adminTarget.register(async (admin) => {
    admin.addHook(
      'onRequest',
      bearerGuard(o.adminToken ? [o.adminToken] : [], (reply) => reply.send({ error: 'a valid admin token is required' })),
    );
    admin.get('/metrics', async (_req, reply) => reply.header('content-type', registry.contentType).send(await registry.metrics()));
    adminRoutes(admin, {
      fleet,
      router,
      tokenizer,
      sessionAffinity: (o.router.sessionAffinityTtlSecs ?? null) !== null,
      setWorkers: (workers) => setWorkers(workers, 'admin', 'body'),
      bypassBelowTokens: o.disaggregation.bypassBelowTokens,
      blockSize: o.blockSize,
    });
    indexerRoutes(admin, { fleet, router, blockSize: o.blockSize, model });
  });
  if (adminApp) adminApp.get('/health', async () => ({ status: 'ok' }));

  let closed: Promise<void> | undefined;
  let listening: Promise<GatewayAddress> | undefined;
  const close = (options?: { now?: boolean }): Promise<void> => {
    if (options?.now === true) shutdown.hurry();
    stopping = true;
    closed ??= (async () => {
      await shutdown.delay(app.server.listening);
      stopReplicaLog();
      stopTls();
      upstreamTls?.stop();
      await Promise.all(discoveries.map((d) => d.stop()));
      await shutdown.close(app);
      if (adminApp) await shutdown.close(adminApp);
      await warm;
      await snapshots?.close();
      await fleet.close();
      await router.closeAsync();
      // The spans of the last requests go out before close() resolves; an unreachable collector is logged, not thrown.
      await spans.shutdown().catch((err) => app.log.warn({ err }, 'could not export the last spans'));
    })();
    return closed;
  };
  return {
    app,
    adminApp,
    handler: (req, res) => {
      void app.ready().then(() => app.routing(req, res));
    },
    router,
    registry,
    warmStart: warm,
    snapshots,
    listen(l) {
      let proxyAt: ListenAddress;
      try {
        proxyAt = listenAddress(l);
      } catch (err) {
        return Promise.reject(err);
      }
      if (closed) return Promise.reject(new KvRouteError('ERR_CLOSED', 'the gateway is closed'));
      if (listening) return Promise.reject(new KvRouteError('ERR_INVALID_ARG', 'the gateway is already listening: call listen() once'));
      const started = (async () => {
        await warm;
        const url = (await bind(app, proxyAt, 'the proxy')).replace('[::1]', '127.0.0.1');
        if (!adminApp || !o.admin) return { url, adminUrl: url };
        try {
          return { url, adminUrl: await bind(adminApp, o.admin, 'the admin listener') };
        } catch (err) {
          // The proxy is serving and Fastify cannot stop one listener alone: close it all.
          await close({ now: true });
          throw new KvRouteError('ERR_INVALID_ARG', `${(err as Error).message}; the gateway is closed`, { cause: err });
        }
      })();
      listening = started;
      // A proxy that could not bind changed nothing: listen() may be called again.
      started.catch(() => {
        if (!closed) listening = undefined;
      });
      return started;
    },
    addWorker(w) {
      fleet.add(resolveWorker(w, 'worker'), 'admin');
    },
    async removeWorker(id) {
      return fleet.remove(parseWorkerIdValue(id, 'id'));
    },
    setWorkers: (workers) => setWorkers(workers, 'config', 'workers'),
    workers: () => fleet.list().map((m) => describeWorker(m, fleet)),
    close,
  };
}
