/**
 * Options of the gateway ({@link createGateway}, `kvroute serve`): their types, defaults and
 * validation. Every mistake is an `ERR_INVALID_ARG` naming the key (`workers[1].url`), so a
 * config file is checked as strictly as code.
 * @module
 */

import type { BackendName } from '../backend-types.js';
import { KvRouteError } from '../errors.js';
import { checkEndpoint, endpointForRank } from '../ingest/options.js';
import type { WorkerId } from '../kv-index.js';
import type { SnapshotWriterOptions } from '../replicas/snapshot-store.js';
import type { WarmStartOptions } from '../replicas/warm-start.js';
import type { KvRouterOptions } from '../router/options.js';
import { describe, optionalBoolean } from '../validate.js';
import { type CorsOptions, type ResolvedCors, resolveCors } from './cors.js';
import { type DiscoveryOptions, type ResolvedDiscovery, resolveDiscovery } from './discovery-options.js';
import { int, invalid, object, record, str } from './option-checks.js';
import { type ResolvedTls, resolveTls, type TlsOptions } from './tls.js';
import { type ResolvedTracing, resolveTracing, type TracingOptions } from './tracing/options.js';
import { type ResolvedUpstreamTls, resolveUpstreamTls, type UpstreamTlsOptions } from './upstream-tls.js';
import { bootstrapPort, DISAGGREGATION_PROTOCOLS, type DisaggregationProtocol, type WorkerRole, workerRole } from './worker-role.js';

/**
 * One worker behind the gateway.
 * @group Gateway
 */
export interface GatewayWorker {
  /** The worker's id in the router (a u64: number, bigint, or decimal string in a config file). */
  id: WorkerId | string;
  /** Base URL of its OpenAI-compatible HTTP API, e.g. `http://127.0.0.1:8001`. */
  url: string;
  /** Rank 0's KV-event PUB endpoint (rank r: port + r), or one per rank. Omitted: no KV events (approximate routing needs `router.useKvEvents: false`). */
  kvEvents?: string | readonly string[];
  /** Rank 0's replay ROUTER endpoint (rank r: port + r), or one per rank. */
  replay?: string | readonly string[];
  /** Data-parallel ranks. Default: the number of endpoints listed, else 1. */
  dpSize?: number;
  /** The engine's `max_num_batched_tokens` (the router's queue threshold is a fraction of it). */
  maxNumBatchedTokens?: number;
  /** Relative capacity: a worker of weight 2 is charged half the cost of one of weight 1. Default 1. */
  weight?: number;
  /**
   * What the worker does in a disaggregated fleet (vLLM's NixlConnector): `'prefill'` workers
   * take only the prefill leg of a request, `'decode'` workers its decode leg (and whole
   * requests), `'aggregated'` workers whole requests. Default `'aggregated'`. See
   * {@link WorkerRole}.
   */
  role?: WorkerRole;
  /**
   * A prefill worker's SGLang bootstrap port (`--disaggregation-bootstrap-port`), sent as
   * `bootstrap_port` to both legs with `disaggregation.protocol: 'sglang'`. Prefill workers only.
   * Default 8998 (SGLang's).
   */
  bootstrapPort?: number;
}

/**
 * How prompts become token ids: `'engine'`, the path of a `tokenizer.json`, or a path with a chat template.
 * @group Gateway
 */
export type TokenizerOption =
  | 'engine'
  | (string & {})
  | {
      /** Path of the model's `tokenizer.json`, or of the model directory holding it. */
      path: string;
      /** A chat template (Jinja) instead of the `chat_template` of the `tokenizer_config.json` beside `path`. */
      chatTemplate?: string;
      /**
       * Render a request's own `chat_template`, as vLLM does with `--trust-request-chat-template`
       * (a template is a program, run on the gateway's event loop). Default false: such requests get 400.
       */
      trustRequestChatTemplate?: boolean;
      /**
       * vLLM's `--chat-template-content-format`: the shape of message content the template is
       * given, OpenAI's list of parts (`openai`) or the parts' text joined (`string`). Default
       * `auto`, which detects it from the template as vLLM does (a template that loops over a
       * message's content gets the list); set it as the workers' flag is set.
       */
      chatTemplateContentFormat?: 'auto' | 'string' | 'openai';
    };

/**
 * Active and passive health checking, and the circuit breaker per worker.
 * @group Gateway
 */
export interface HealthOptions {
  /** Interval of `GET /health` probes, ms; 0 turns active probes off. Default 2000. */
  intervalMs?: number;
  /** A probe slower than this fails, ms. Default 1000. */
  timeoutMs?: number;
  /** Consecutive failures (probes, 5xx, timeouts) that open the breaker. Connect errors open it at once. Default 3. */
  failureThreshold?: number;
  /** Consecutive successful probes that close it again. Default 1. */
  recoveryThreshold?: number;
}

/**
 * Forwarding limits.
 * @group Gateway
 */
export interface UpstreamOptions {
  /** Retries on another worker when one fails before its first byte. Default 2. */
  retries?: number;
  /** Time to the worker's response headers, ms. Default 60000. */
  headersTimeoutMs?: number;
  /** Longest silence inside a response body, ms. Default 60000. */
  bodyTimeoutMs?: number;
  /** Connections per worker. Default 128. */
  connections?: number;
  /**
   * The workers' API key (vLLM's `--api-key`), sent as `Authorization: Bearer` with every request
   * to them; the command also reads `KVROUTE_UPSTREAM_API_KEY`. Default none. Clients' own
   * credentials are never passed on.
   */
  apiKey?: string;
  /** TLS towards workers whose URLs are `https://`: their CAs, and a client certificate for those that require one. */
  tls?: UpstreamTlsOptions;
}

/**
 * Admission when every worker a request may go to is busy (needs `router.routerQueueThreshold`).
 * A request waits only for its own model's workers: in a fleet of several models, one whose
 * workers are all busy does not hold up the others.
 * @group Gateway
 */
export interface QueueOptions {
  /**
   * Requests waiting for a worker before new ones get 429: per model when only some workers
   * serve it (a fleet of several models, a LoRA adapter), else for the whole fleet. Default 1024.
   */
  maxQueued?: number;
  /** A request waiting longer gets 503, ms. Default 30000. */
  timeoutMs?: number;
  /** `Retry-After` of 429 and 503 answers, s. Default 1. */
  retryAfterSecs?: number;
}

/**
 * The Responses API (`/v1/responses`): vLLM keeps each response on the worker that answered it,
 * so the gateway remembers which one did, to send a follow-up (`previous_response_id`), a
 * retrieval or a cancel there.
 * @group Gateway
 */
export interface ResponsesOptions {
  /** Response ids whose worker is remembered, least recently used out first; 0 remembers none (every lookup asks the workers). Default 100000. */
  maxRemembered?: number;
  /** How long asking the workers for an id not remembered may take, ms. Default 2000. */
  lookupTimeoutMs?: number;
}

/**
 * Disaggregated serving (workers with `role` `prefill` and `decode`; see {@link WorkerRole}).
 * @group Gateway
 */
export interface DisaggregationOptions {
  /**
   * Skip the prefill leg of a request whose prompt a decode worker already holds all but at most
   * this many tokens of (by the index: the decode worker caching the longest prefix): the request
   * goes whole to the decode workers, which compute those tokens themselves rather than wait for
   * a prefill worker and a KV transfer. Dynamo's conditional prefill (`token_cap` policy,
   * `conditional_prefill_bypass_below_tokens`). Default `null`: every request that can be split
   * is.
   */
  bypassBelowTokens?: number | null;
  /**
   * How the engines pass the KV between the legs: vLLM's KV connectors (`'vllm'`: the prefill
   * leg, then the decode leg with its `kv_transfer_params`), TensorRT-LLM's (`'trtllm'`: the
   * context leg, then the generation leg with its `disaggregated_params`) or SGLang's bootstrap
   * protocol (`'sglang'`: both legs at once, meeting in a `bootstrap_room`). See
   * {@link DisaggregationProtocol}. Default `'vllm'`.
   */
  protocol?: DisaggregationProtocol;
}

/**
 * How `close()` (SIGTERM for `kvroute serve`) ends the gateway. Behind a load balancer that
 * learns of a replica's end late (a Kubernetes Service's endpoints follow a pod's termination by a
 * few seconds), closing the listener at once refuses the requests still sent to it: `delayMs`
 * keeps serving meanwhile, with `/ready` answering 503 and every answer closing its connection,
 * so that clients and balancers move to the other replicas first.
 * @group Gateway
 */
export interface ShutdownOptions {
  /** How long `close()` keeps serving, not ready, before it stops accepting, ms. Default 0 (at once). */
  delayMs?: number;
  /**
   * How long requests in flight may then take to finish before their connections are cut, ms
   * (streams can run for minutes; a pod is killed at its grace period anyway). Default 0: no limit.
   */
  drainTimeoutMs?: number;
}

/**
 * The `engine` tokenizer's cache of token ids by prompt (the request's prompt fields): clients
 * resend the same prompts, and each miss is a round trip to a worker's `/tokenize`.
 * @group Gateway
 */
export interface TokenizeCacheOptions {
  /** Prompts kept, least recently used out first; 0 turns the cache off. Default 4096. */
  maxPrompts?: number;
  /** Bytes kept (a prompt as UTF-16 text plus 8 per token); a prompt over a quarter of it is not cached. Default 64 MiB. */
  maxBytes?: number;
  /**
   * The local tokenizer's prefix cache (`TextTokenizer`'s `prefixCache`): bytes of token ids kept
   * for prompt beginnings that end at a special token, so a conversation's next turn encodes only
   * what it adds. Default 64 MiB; 0 turns it off. The `engine` tokenizer has none.
   */
  prefixMaxBytes?: number;
}

/**
 * Access control. Tokens are compared in constant time.
 * @group Gateway
 */
export interface AuthOptions {
  /** Bearer keys the proxy (`/v1/*`) accepts; empty or omitted: no key needed. */
  apiKeys?: readonly string[];
  /** Bearer token of the admin and indexer endpoints and `/metrics`; omitted: open. */
  adminToken?: string;
}

/**
 * A separate listener for the admin and indexer API and `/metrics`.
 * @group Gateway
 */
export interface AdminListenOptions {
  /** Port (0: any free one). */
  port: number;
  /** Host. Default `127.0.0.1`. */
  host?: string;
}

/**
 * Options of {@link createGateway}. Only `blockSize` is required.
 * @group Gateway
 */
export interface GatewayOptions {
  /** Tokens per KV block, as the engines use. */
  blockSize: number;
  /** The workers at start (more can be added through the admin API). Default none. */
  workers?: readonly GatewayWorker[];
  /** KvRouter options except `blockSize` (Dynamo's defaults). */
  router?: Omit<KvRouterOptions, 'blockSize' | 'backend'>;
  /** Backend of the router; default the process-wide one. */
  backend?: BackendName;
  /** `engine` (the worker's `/tokenize`, exact; default) or a local `tokenizer.json`. */
  tokenizer?: TokenizerOption;
  /** Bounds of the tokenizer's cache of prompts already tokenized (either tokenizer: a hit skips `/tokenize` or the local encode). */
  tokenizeCache?: TokenizeCacheOptions;
  /** Model name the gateway answers for (`/v1/models`, the indexer API). Default: what the first healthy worker serves. */
  model?: string;
  /** Health probes and the breaker. */
  health?: HealthOptions;
  /** Forwarding. */
  upstream?: UpstreamOptions;
  /** Admission control. */
  queue?: QueueOptions;
  /** Where Responses API follow-ups go. */
  responses?: ResponsesOptions;
  /** Disaggregated serving's choices (when some workers have the `prefill` and `decode` roles). */
  disaggregation?: DisaggregationOptions;
  /** Largest request body, bytes. Default 8 MiB. */
  bodyLimitBytes?: number;
  /** How `close()` ends the gateway: a delay while not ready, a bound on the drain. Default: at once, no bound. */
  shutdown?: ShutdownOptions;
  /** Workers found in DNS (a Kubernetes headless Service's SRV records or addresses; a list for several, one per model, say), besides `workers`. Default: none. */
  discovery?: DiscoveryOptions | readonly DiscoveryOptions[];
  /** Access control. */
  auth?: AuthOptions;
  /** Serve the admin and indexer API and `/metrics` on their own listener instead of the proxy's. */
  admin?: AdminListenOptions;
  /** TLS of the proxy listener: PEM text, or files served anew when they change. */
  tls?: TlsOptions;
  /**
   * Cross-origin (CORS) answers of the proxy's routes, as vLLM gives them (`--allowed-origins`
   * and the flags beside it); never the admin API's. Default vLLM's: any origin, method and
   * header, no credentials. `false`: none.
   */
  cors?: CorsOptions | false;
  /** Where the gateway's spans go. Default: the global OpenTelemetry API's tracer provider (nothing recorded until an SDK is registered). */
  tracing?: TracingOptions;
  /** Log level (pino), or `false` for none. Default `'info'`. */
  logLevel?: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | false;
  /** Log prompt text in the request lines. Default false. */
  logPrompts?: boolean;
  /**
   * Fill the index from a running peer's `/dump` or a snapshot before subscribing to the workers
   * (see {@link warmStart}); `listen()` waits for it. On failure the gateway starts cold and logs
   * why. Default: cold start.
   */
  warmStart?: WarmStartOptions;
  /** Write index snapshots to a NATS object store (see {@link IndexSnapshotWriter}). Default: none. */
  snapshots?: SnapshotWriterOptions;
}

/** @internal a worker with every default filled in. */
export interface ResolvedWorker {
  id: bigint;
  /** Undefined for an index-only worker (registered through the indexer API without a URL). */
  url: string | undefined;
  kvEvents: string[] | undefined;
  replay: string[] | undefined;
  dpSize: number;
  maxNumBatchedTokens: number | undefined;
  weight: number;
  role: WorkerRole;
  /** SGLang's bootstrap port of a prefill worker, when given (8998 otherwise). */
  bootstrapPort: number | undefined;
}

/** @internal */
export interface ResolvedGatewayOptions {
  blockSize: number;
  workers: ResolvedWorker[];
  router: Omit<KvRouterOptions, 'blockSize' | 'backend'>;
  backend: BackendName | undefined;
  tokenizer:
    | 'engine'
    | { path: string; chatTemplate?: string; trustRequestChatTemplate: boolean; chatTemplateContentFormat: 'auto' | 'string' | 'openai' };
  tokenizeCache: Required<TokenizeCacheOptions>;
  model: string | undefined;
  health: Required<HealthOptions>;
  upstream: Required<Omit<UpstreamOptions, 'apiKey' | 'tls'>> & { apiKey: string | undefined; tls: ResolvedUpstreamTls | undefined };
  queue: Required<QueueOptions>;
  responses: Required<ResponsesOptions>;
  disaggregation: { bypassBelowTokens: number | null; protocol: DisaggregationProtocol };
  shutdown: Required<ShutdownOptions>;
  discovery: ResolvedDiscovery[];
  bodyLimitBytes: number;
  apiKeys: string[];
  adminToken: string | undefined;
  admin: Required<AdminListenOptions> | undefined;
  tls: ResolvedTls | undefined;
  cors: ResolvedCors;
  tracing: ResolvedTracing;
  logLevel: NonNullable<GatewayOptions['logLevel']>;
  logPrompts: boolean;
  warmStart: WarmStartOptions | undefined;
  snapshots: SnapshotWriterOptions | undefined;
}

const TOP_KEYS = [
  'blockSize',
  'workers',
  'router',
  'backend',
  'tokenizer',
  'tokenizeCache',
  'warmStart',
  'snapshots',
  'model',
  'health',
  'upstream',
  'queue',
  'responses',
  'disaggregation',
  'bodyLimitBytes',
  'shutdown',
  'discovery',
  'auth',
  'admin',
  'tls',
  'cors',
  'tracing',
  'logLevel',
  'logPrompts',
];
const UPSTREAM_LIMITS: Required<Omit<UpstreamOptions, 'apiKey' | 'tls'>> = {
  retries: 2,
  headersTimeoutMs: 60_000,
  bodyTimeoutMs: 60_000,
  connections: 128,
};
const WORKER_KEYS = ['id', 'url', 'kvEvents', 'replay', 'dpSize', 'maxNumBatchedTokens', 'weight', 'role', 'bootstrapPort'];
const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'];

/** A worker id from a number, bigint or decimal string, as a u64. */
export function parseWorkerIdValue(value: unknown, at: string): bigint {
  const ok = (v: bigint) => v >= 0n && v < 1n << 64n;
  if (typeof value === 'bigint' && ok(value)) return value;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return BigInt(value);
  if (typeof value === 'string' && /^\d{1,20}$/.test(value) && ok(BigInt(value))) return BigInt(value);
  throw invalid(`${at} must be a u64 worker id (integer or decimal string), got ${describe(value)}`);
}

/** One endpoint per rank: a list as given, or rank 0's endpoint with rank r at port + r (ipc: path + `_dp<r>`), as the engines publish. */
function endpointList(value: unknown, at: string, dpSize: number): string[] | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'string') return Array.from({ length: dpSize }, (_, r) => endpointForRank(value, r, at));
  if (!Array.isArray(value) || value.length !== dpSize) throw invalid(`${at} must be an endpoint or a list of ${dpSize} endpoints`);
  return value.map((e, i) => checkEndpoint(e, `${at}[${i}]`));
}

/** @internal validates one worker. */
export function resolveWorker(value: unknown, at: string): ResolvedWorker {
  const w = record(value, at, WORKER_KEYS);
  let url: URL;
  try {
    url = new URL(str(w.url, `${at}.url`));
  } catch (err) {
    if (err instanceof KvRouteError) throw err;
    throw invalid(`${at}.url must be an http(s) URL, got ${JSON.stringify(w.url)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw invalid(`${at}.url must be an http(s) URL, got ${JSON.stringify(w.url)}`);
  if (url.pathname !== '/' || url.search || url.hash)
    throw invalid(`${at}.url must be a base URL without a path, got ${JSON.stringify(w.url)}`);
  const listed = [w.kvEvents, w.replay].find(Array.isArray)?.length;
  const dpSize = int(w.dpSize, `${at}.dpSize`, 1, 1024, listed ?? 1);
  const weight = w.weight ?? 1;
  if (typeof weight !== 'number' || !(weight > 0) || !Number.isFinite(weight)) {
    throw invalid(`${at}.weight must be a positive number, got ${describe(weight)}`);
  }
  const replay = endpointList(w.replay, `${at}.replay`, dpSize);
  const kvEvents = endpointList(w.kvEvents, `${at}.kvEvents`, dpSize);
  if (replay && !kvEvents) throw invalid(`${at}.replay needs ${at}.kvEvents`);
  const role = workerRole(w.role, `${at}.role`);
  return {
    id: parseWorkerIdValue(w.id, `${at}.id`),
    url: url.origin,
    kvEvents,
    replay,
    dpSize,
    maxNumBatchedTokens:
      w.maxNumBatchedTokens === undefined ? undefined : int(w.maxNumBatchedTokens, `${at}.maxNumBatchedTokens`, 1, 2 ** 31),
    weight,
    role,
    bootstrapPort: bootstrapPort(w.bootstrapPort, role, `${at}.bootstrapPort`),
  };
}

/** `discovery`: one Service's names or a list of them, each checked (the message names `discovery[i]`). */
function discoveryList(value: unknown): ResolvedDiscovery[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) return [resolveDiscovery(value)];
  const list = value.map((d, i) => resolveDiscovery(d, `discovery[${i}]`));
  // The name is each one's label in the metrics, and owns what it found: one name, one discovery.
  const names = list.map((d) => d.name.toLowerCase());
  const twice = names.find((n, i) => names.indexOf(n) !== i);
  if (twice !== undefined) throw invalid(`discovery lists ${twice} twice`);
  return list;
}

/** A section of integer settings: unknown keys refused, each value checked, the rest defaulted. */
function section<T extends object>(value: unknown, at: string, defaults: Required<T>): Required<T> {
  if (value === undefined) return { ...defaults };
  const given = record(value, at, Object.keys(defaults));
  const out: Record<string, number> = { ...(defaults as Record<string, number>) };
  for (const k of Object.keys(defaults)) {
    if (given[k] !== undefined) out[k] = int(given[k], `${at}.${k}`, k.endsWith('Threshold') ? 1 : 0, 2 ** 31);
  }
  return out as Required<T>;
}

function disaggregation(value: unknown): ResolvedGatewayOptions['disaggregation'] {
  const d = value === undefined ? {} : record(value, 'disaggregation', ['bypassBelowTokens', 'protocol']);
  const bypass = d.bypassBelowTokens;
  const protocol = d.protocol ?? 'vllm';
  if (!DISAGGREGATION_PROTOCOLS.includes(protocol as DisaggregationProtocol))
    throw invalid(
      `disaggregation.protocol must be one of ${DISAGGREGATION_PROTOCOLS.map((p) => `'${p}'`).join(', ')}, got ${describe(protocol)}`,
    );
  const bypassBelowTokens = bypass === undefined || bypass === null ? null : int(bypass, 'disaggregation.bypassBelowTokens', 0, 2 ** 31);
  // A bypassed request goes whole to the decode workers, which SGLang's cannot serve.
  if (bypassBelowTokens !== null && protocol === 'sglang')
    throw invalid("disaggregation.bypassBelowTokens needs decode workers that serve requests whole: not with protocol 'sglang'");
  return { bypassBelowTokens, protocol: protocol as DisaggregationProtocol };
}

function upstream(value: unknown): ResolvedGatewayOptions['upstream'] {
  const { apiKey, tls, ...limits } =
    value === undefined ? {} : record(value, 'upstream', [...Object.keys(UPSTREAM_LIMITS), 'apiKey', 'tls']);
  return {
    ...section<Omit<UpstreamOptions, 'apiKey' | 'tls'>>(limits, 'upstream', UPSTREAM_LIMITS),
    apiKey: apiKey === undefined ? undefined : str(apiKey, 'upstream.apiKey'),
    tls: resolveUpstreamTls(tls),
  };
}

function tokenizer(value: unknown): ResolvedGatewayOptions['tokenizer'] {
  if (value === undefined || value === 'engine') return 'engine';
  if (typeof value === 'string') return { path: value, trustRequestChatTemplate: false, chatTemplateContentFormat: 'auto' };
  const t = record(value, 'tokenizer', ['path', 'chatTemplate', 'trustRequestChatTemplate', 'chatTemplateContentFormat']);
  const trust = optionalBoolean(t.trustRequestChatTemplate, 'tokenizer.trustRequestChatTemplate') ?? false;
  const format = t.chatTemplateContentFormat ?? 'auto';
  if (format !== 'auto' && format !== 'string' && format !== 'openai')
    throw new KvRouteError(
      'ERR_INVALID_ARG',
      `tokenizer.chatTemplateContentFormat must be 'auto', 'string' or 'openai', got ${describe(format)}`,
    );
  return {
    path: str(t.path, 'tokenizer.path'),
    ...(t.chatTemplate === undefined ? {} : { chatTemplate: str(t.chatTemplate, 'tokenizer.chatTemplate') }),
    trustRequestChatTemplate: trust,
    chatTemplateContentFormat: format,
  };
}

/** @internal validates the options and fills in the defaults. */
export function resolveGatewayOptions(value: unknown): ResolvedGatewayOptions {
  const o = record(value, 'options', TOP_KEYS);
  const blockSize = int(o.blockSize, 'blockSize', 1, 2 ** 20);
  if (o.workers !== undefined && !Array.isArray(o.workers)) throw invalid(`workers must be a list, got ${describe(o.workers)}`);
  const workers = ((o.workers as unknown[] | undefined) ?? []).map((w, i) => resolveWorker(w, `workers[${i}]`));
  const seen = new Set<bigint>();
  for (const [i, w] of workers.entries()) {
    if (seen.has(w.id)) throw invalid(`workers[${i}].id ${w.id} is listed twice`);
    seen.add(w.id);
  }
  const router = o.router === undefined ? {} : (object(o.router, 'router') as ResolvedGatewayOptions['router']);
  if ('blockSize' in router || 'backend' in router) throw invalid('router: set blockSize and backend at the top level, not in router');
  if (o.backend !== undefined && o.backend !== 'native' && o.backend !== 'js')
    throw invalid(`backend must be "native" or "js", got ${describe(o.backend)}`);
  const auth = o.auth === undefined ? {} : record(o.auth, 'auth', ['apiKeys', 'adminToken']);
  const apiKeys = auth.apiKeys === undefined ? [] : auth.apiKeys;
  if (!Array.isArray(apiKeys)) throw invalid(`auth.apiKeys must be a list of strings, got ${describe(apiKeys)}`);
  for (const [i, k] of apiKeys.entries()) str(k, `auth.apiKeys[${i}]`);
  let admin: ResolvedGatewayOptions['admin'];
  if (o.admin !== undefined) {
    const a = record(o.admin, 'admin', ['port', 'host']);
    admin = { port: int(a.port, 'admin.port', 0, 65535), host: a.host === undefined ? '127.0.0.1' : str(a.host, 'admin.host') };
  }
  const logLevel = o.logLevel ?? 'info';
  if (logLevel !== false && !LEVELS.includes(logLevel as string)) throw invalid(`logLevel must be one of ${LEVELS.join(', ')} or false`);
  if (o.logPrompts !== undefined && typeof o.logPrompts !== 'boolean') throw invalid(`logPrompts must be a boolean`);
  return {
    blockSize,
    workers,
    router,
    backend: o.backend as BackendName | undefined,
    tokenizer: tokenizer(o.tokenizer),
    tokenizeCache: section<TokenizeCacheOptions>(o.tokenizeCache, 'tokenizeCache', {
      maxPrompts: 4096,
      maxBytes: 64 << 20,
      prefixMaxBytes: 64 << 20,
    }),
    model: o.model === undefined ? undefined : str(o.model, 'model'),
    health: section<HealthOptions>(o.health, 'health', { intervalMs: 2000, timeoutMs: 1000, failureThreshold: 3, recoveryThreshold: 1 }),
    upstream: upstream(o.upstream),
    queue: section<QueueOptions>(o.queue, 'queue', { maxQueued: 1024, timeoutMs: 30_000, retryAfterSecs: 1 }),
    responses: section<ResponsesOptions>(o.responses, 'responses', { maxRemembered: 100_000, lookupTimeoutMs: 2000 }),
    disaggregation: disaggregation(o.disaggregation),
    shutdown: section<ShutdownOptions>(o.shutdown, 'shutdown', { delayMs: 0, drainTimeoutMs: 0 }),
    discovery: discoveryList(o.discovery),
    bodyLimitBytes: int(o.bodyLimitBytes, 'bodyLimitBytes', 1, 2 ** 30, 8 << 20),
    apiKeys: apiKeys as string[],
    adminToken: auth.adminToken === undefined ? undefined : str(auth.adminToken, 'auth.adminToken'),
    admin,
    tls: resolveTls(o.tls),
    cors: resolveCors(o.cors),
    tracing: resolveTracing(o.tracing),
    logLevel: logLevel as ResolvedGatewayOptions['logLevel'],
    logPrompts: o.logPrompts === true,
    // Checked in full by warmStart / IndexSnapshotWriter, which name the bad key.
    warmStart:
      o.warmStart === undefined
        ? undefined
        : (record(o.warmStart, 'warmStart', ['peer', 'snapshot', 'model', 'headers', 'tls', 'timeoutMs']) as WarmStartOptions),
    snapshots: o.snapshots === undefined ? undefined : (object(o.snapshots, 'snapshots') as unknown as SnapshotWriterOptions),
  };
}
