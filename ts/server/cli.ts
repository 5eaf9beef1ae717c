/**
 * `kvroute serve`: {@link createGateway} as a command, from a config file, flags, or both
 * (flags win). Runs until SIGINT or SIGTERM, then drains in-flight requests and exits 0; SIGHUP
 * (and `--watch-config`) reloads the workers (config-reload.ts).
 * @internal
 * @module
 */

import { existsSync, readFileSync } from 'node:fs';
import { collectDefaultMetrics } from 'prom-client';
import { type Flags, helpText, parseCommand, UsageError } from '../cli-args.js';
import { KvRouteError } from '../errors.js';
import { readTlsFiles } from '../tls-files.js';
import { parseWorkerFlag, readConfigFile } from './config-file.js';
import { reloadConfigOnSignal } from './config-reload.js';
import { createGateway } from './gateway.js';
import type { GatewayOptions } from './options.js';

const FLAGS: Flags = {
  config: { kind: 'string', value: 'file', help: 'YAML or JSON file with the options of createGateway (see the README)' },
  'watch-config': {
    kind: 'boolean',
    help: 'reload the workers whenever the config file changes (SIGHUP always reloads them)',
  },
  port: { kind: 'number', help: 'proxy port (0: any free port)', default: '8000' },
  host: { kind: 'string', help: 'proxy host', default: '127.0.0.1' },
  'ssl-certfile': {
    kind: 'string',
    value: 'file',
    help: "serve the proxy over HTTPS with this PEM certificate chain, read again when it changes (vLLM's flag)",
  },
  'ssl-keyfile': { kind: 'string', value: 'file', help: "the certificate's PEM private key (vLLM's flag)" },
  'allowed-origins': {
    kind: 'string',
    value: 'json',
    help: "origins the proxy's routes answer cross-origin requests from, e.g. '[\"https://app.example.com\"]' ('[]': none; vLLM's flag)",
    default: '["*"]',
  },
  'allowed-methods': { kind: 'string', value: 'json', help: "methods CORS preflights allow (vLLM's flag)", default: '["*"]' },
  'allowed-headers': { kind: 'string', value: 'json', help: "request headers CORS preflights allow (vLLM's flag)", default: '["*"]' },
  'allow-credentials': { kind: 'boolean', help: "let cross-origin pages send credentials (vLLM's flag)" },
  'ssl-ca-certs': {
    kind: 'string',
    value: 'file',
    help: "PEM CAs that sign clients' certificates: clients must present one (mutual TLS; vLLM's flag)",
  },
  'block-size': { kind: 'number', help: 'tokens per KV block of the engines (required here or in the config)' },
  worker: {
    kind: 'string',
    value:
      'id=1,url=http://…,kv-events=tcp://…,replay=tcp://…,dp-size=N,max-num-batched-tokens=N,weight=W,role=aggregated|prefill|decode,bootstrap-port=N',
    help: 'a worker; repeat for several',
    multiple: true,
  },
  tokenizer: {
    kind: 'string',
    value: 'engine|path',
    help: "the workers' /tokenize, or a local tokenizer.json (or the model directory holding it)",
    default: 'engine',
  },
  'chat-template': {
    kind: 'string',
    value: 'file|template',
    help: "the local tokenizer's chat template, a file or the template itself (vLLM's flag)",
    default: "the model's",
  },
  'chat-template-content-format': {
    kind: 'string',
    value: 'auto|string|openai',
    help: "message content as OpenAI's list of parts or the joined text, for the local tokenizer (vLLM's flag)",
    default: 'auto',
  },
  'trust-request-chat-template': { kind: 'boolean', help: "let the local tokenizer render a request's own chat_template (vLLM's flag)" },
  'router-config': { kind: 'string', value: 'json', help: 'KvRouter options as JSON, e.g. \'{"routerQueueThreshold":2}\'' },
  'metrics-port': { kind: 'number', help: 'serve /metrics, the admin and the indexer API on this port instead of the proxy port' },
  'metrics-host': { kind: 'string', help: 'host of that listener', default: '127.0.0.1' },
  model: { kind: 'string', help: 'model name answered for', default: 'what the workers serve' },
  backend: { kind: 'string', value: 'native|js', help: 'the backend to run on', default: 'the process default' },
  'log-level': { kind: 'string', value: 'level|off', help: 'pino log level', default: 'info' },
  replicas: { kind: 'string', value: 'nats://host:port[,…]', help: 'share in-flight load with the other gateway replicas over NATS' },
  'replica-id': { kind: 'string', help: "this replica's id (unique in the fleet)", default: '<hostname>-<pid>-<random>' },
  'warm-start-from': { kind: 'string', value: 'url', help: "fill the index from a running replica's /dump before subscribing" },
  'warm-start-snapshot': { kind: 'string', value: 'nats://…', help: 'fill the index from the snapshot in this NATS object store' },
  'snapshot-to': { kind: 'string', value: 'nats://…', help: 'write index snapshots to this NATS object store (bucket kvroute-index)' },
  'snapshot-every-secs': { kind: 'number', help: 'how often --snapshot-to writes', default: '30' },
  'nats-ca-file': { kind: 'string', value: 'file', help: "PEM CAs of the NATS server's certificate (TLS) for the NATS flags above" },
  'nats-cert-file': { kind: 'string', value: 'file', help: 'a PEM client certificate for a NATS server that verifies clients' },
  'nats-key-file': { kind: 'string', value: 'file', help: "that certificate's PEM private key" },
  'discover-srv': {
    kind: 'string',
    value: '_http._tcp.<service>…',
    help: "find workers in DNS: the SRV name of their HTTP API (a Kubernetes headless Service's named port)",
  },
  'discover-kv-events-srv': { kind: 'string', value: 'name', help: 'the SRV name of their KV-event sockets, matched by target' },
  'discover-replay-srv': { kind: 'string', value: 'name', help: 'the SRV name of their replay sockets, matched by target' },
  'discover-host': {
    kind: 'string',
    value: '<service>…',
    help: 'or find them by the addresses of this name, one per pod (a headless Service without port names)',
  },
  'discover-port': { kind: 'number', help: "with --discover-host: every worker's HTTP port", default: '8000' },
  'discover-kv-events-port': { kind: 'number', help: "with --discover-host: every worker's KV-event port" },
  'discover-replay-port': { kind: 'number', help: "with --discover-host: every worker's replay port" },
  'dns-server': { kind: 'string', value: 'ip[:port][,…]', help: 'the DNS servers discovery asks (addresses)', default: "the system's" },
  'shutdown-delay-secs': {
    kind: 'number',
    help: 'on SIGTERM, serve on this long with /ready answering 503 before closing (a second signal ends it)',
    default: '0',
  },
  'disaggregation-bypass-below-tokens': {
    kind: 'number',
    help: "with prefill and decode workers: serve a request whole on the decode workers when one holds all but at most this many of its prompt's tokens",
    default: 'never',
  },
  'disaggregation-protocol': {
    kind: 'string',
    value: 'vllm|trtllm|sglang',
    help: "how prefill and decode workers pass the KV: vLLM's kv_transfer_params or TensorRT-LLM's disaggregated_params (prefill leg, then decode leg), or SGLang's bootstrap room (both legs at once)",
    default: 'vllm',
  },
  'drain-timeout-secs': { kind: 'number', help: 'then cut requests still in flight after this long (0: no limit)', default: '0' },
  'otlp-traces-endpoint': {
    kind: 'string',
    value: 'url',
    help: "export the gateway's spans to this OTLP traces endpoint, e.g. http://collector:4318/v1/traces (vLLM's flag; see --otlp-traces-protocol); an https one's TLS from OTEL_EXPORTER_OTLP_CERTIFICATE, _CLIENT_CERTIFICATE and _CLIENT_KEY",
    default: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT (+ /v1/traces over HTTP), else none',
  },
  'otlp-traces-protocol': {
    kind: 'string',
    value: 'http/json|http/protobuf|grpc',
    help: "how the spans are sent (grpc: to a collector's :4317)",
    default: 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL, else http/json',
  },
};
const USAGE = helpText(
  'kvroute serve [--config fleet.yaml] [options]',
  "Runs an OpenAI-compatible KV-aware gateway in front of vLLM-like workers: /v1/completions,\n/v1/chat/completions, /v1/responses and Anthropic's /v1/messages (streaming or not), vLLM's tokenizing, pooling and runtime-LoRA\nroutes, /v1/models, /health, /ready, /metrics, /admin/* and Dynamo's indexer API. Keys: KVROUTE_API_KEYS (comma-separated) and KVROUTE_ADMIN_TOKEN, or auth in the config;\nthe workers' own key (vLLM's --api-key): KVROUTE_UPSTREAM_API_KEY, or upstream.apiKey.",
  FLAGS,
);

const servers = (flag: unknown) => String(flag).split(',').filter(Boolean);

/** --replicas, --warm-start-*, --snapshot-*: the router's replica sync, warm start and snapshots. */
function replicaFlags(v: Record<string, unknown>, o: Record<string, unknown>): void {
  const tls = natsTlsFlags(v);
  if (v.replicas !== undefined || v['replica-id'] !== undefined) {
    const router = { ...((o.router as Record<string, unknown>) ?? {}) };
    const replicas = { ...((router.replicas as Record<string, unknown>) ?? {}) };
    if (v.replicas !== undefined) replicas.nats = { ...((replicas.nats as object) ?? {}), servers: servers(v.replicas), ...tls };
    if (v['replica-id'] !== undefined) replicas.replicaId = v['replica-id'];
    router.replicas = replicas;
    o.router = router;
  }
  if (v['warm-start-from'] !== undefined && v['warm-start-snapshot'] !== undefined)
    throw new UsageError('give --warm-start-from or --warm-start-snapshot, not both', USAGE);
  if (v['warm-start-from'] !== undefined) o.warmStart = { peer: v['warm-start-from'] };
  if (v['warm-start-snapshot'] !== undefined) o.warmStart = { snapshot: { servers: servers(v['warm-start-snapshot']), ...tls } };
  if (v['snapshot-to'] !== undefined) {
    o.snapshots = { servers: servers(v['snapshot-to']), everyMs: Number(v['snapshot-every-secs'] ?? 30) * 1000, ...tls };
  }
}

/** --nats-ca-file, --nats-cert-file, --nats-key-file: the `tls` of every NATS connection the flags make. */
function natsTlsFlags(v: Record<string, unknown>): { tls?: Record<string, unknown> } {
  const tls: Record<string, unknown> = {};
  if (v['nats-ca-file'] !== undefined) tls.caFile = v['nats-ca-file'];
  if (v['nats-cert-file'] !== undefined) tls.certFile = v['nats-cert-file'];
  if (v['nats-key-file'] !== undefined) tls.keyFile = v['nats-key-file'];
  if (Object.keys(tls).length === 0) return {};
  if (v.replicas === undefined && v['warm-start-snapshot'] === undefined && v['snapshot-to'] === undefined)
    throw new UsageError(
      '--nats-ca-file, --nats-cert-file and --nats-key-file go with --replicas, --warm-start-snapshot or --snapshot-to',
      USAGE,
    );
  return { tls };
}

/**
 * vLLM's chat-template flags: a `--chat-template` file is read (vLLM also takes the template
 * itself, told apart by its `{`, `}` or newline). They shape the local tokenizer only.
 */
function chatFlags(v: Record<string, unknown>, o: Record<string, unknown>): void {
  const given = ['chat-template', 'chat-template-content-format', 'trust-request-chat-template'].filter((f) => v[f] !== undefined);
  if (given.length === 0) return;
  if (o.tokenizer === undefined || o.tokenizer === 'engine')
    throw new UsageError(`--${given[0]} shapes a local tokenizer: give --tokenizer <tokenizer.json or model directory>`, USAGE);
  const t: Record<string, unknown> = typeof o.tokenizer === 'string' ? { path: o.tokenizer } : { ...(o.tokenizer as object) };
  const template = v['chat-template'] as string | undefined;
  if (template !== undefined) {
    if (existsSync(template)) t.chatTemplate = readFileSync(template, 'utf8');
    else if (/[{}\n]/.test(template)) t.chatTemplate = template;
    else throw new UsageError(`--chat-template ${template} looks like a file, but there is none`, USAGE);
  }
  if (v['chat-template-content-format'] !== undefined) t.chatTemplateContentFormat = v['chat-template-content-format'];
  if (v['trust-request-chat-template'] !== undefined) t.trustRequestChatTemplate = true;
  o.tokenizer = t;
}

/** vLLM's CORS flags (JSON lists, as vLLM takes them): the `cors` option, over the config's. */
function corsFlags(v: Record<string, unknown>, o: Record<string, unknown>): void {
  const given: Record<string, unknown> = {};
  for (const [flag, key] of [
    ['allowed-origins', 'allowedOrigins'],
    ['allowed-methods', 'allowedMethods'],
    ['allowed-headers', 'allowedHeaders'],
  ]) {
    if (v[flag] === undefined) continue;
    try {
      given[key] = JSON.parse(String(v[flag]));
    } catch (err) {
      throw new UsageError(`--${flag} is not JSON (a list such as '["*"]'): ${(err as Error).message}`, USAGE);
    }
  }
  if (v['allow-credentials'] !== undefined) given.allowCredentials = true;
  if (Object.keys(given).length === 0) return;
  if (o.cors === false) throw new UsageError('the config turns CORS off (cors: false); the CORS flags cannot set it', USAGE);
  o.cors = { ...((o.cors as object) ?? {}), ...given };
}

/** --discover-*, --dns-server: the `discovery` option, over the config's. */
function discoveryFlags(v: Record<string, unknown>, o: Record<string, unknown>): void {
  const given: Record<string, unknown> = {};
  if (v['discover-srv'] !== undefined) given.srv = v['discover-srv'];
  if (v['discover-kv-events-srv'] !== undefined) given.kvEventsSrv = v['discover-kv-events-srv'];
  if (v['discover-replay-srv'] !== undefined) given.replaySrv = v['discover-replay-srv'];
  if (v['discover-host'] !== undefined) given.host = v['discover-host'];
  if (v['discover-port'] !== undefined) given.port = v['discover-port'];
  if (v['discover-kv-events-port'] !== undefined) given.kvEventsPort = v['discover-kv-events-port'];
  if (v['discover-replay-port'] !== undefined) given.replayPort = v['discover-replay-port'];
  if (v['dns-server'] !== undefined) given.servers = servers(v['dns-server']);
  if (Object.keys(given).length === 0) return;
  if (Array.isArray(o.discovery))
    throw new UsageError(
      'the config lists several discovery entries; --discover-* and --dns-server set one: give them in the config',
      USAGE,
    );
  o.discovery = { ...((o.discovery as object) ?? {}), ...given };
}

/**
 * The share of traces recorded that OpenTelemetry's `OTEL_TRACES_SAMPLER` (and
 * `OTEL_TRACES_SAMPLER_ARG`) asks for, or `undefined` when unset. The gateway's sampler always
 * follows a client's sampled flag, so the samplers that would not (`always_on`, `always_off`,
 * `traceidratio`) act as their parent-based forms.
 */
function envSampleRatio(env: NodeJS.ProcessEnv): number | undefined {
  const sampler = env.OTEL_TRACES_SAMPLER?.trim().toLowerCase();
  if (!sampler) return undefined;
  if (sampler === 'always_on' || sampler === 'parentbased_always_on') return 1;
  if (sampler === 'always_off' || sampler === 'parentbased_always_off') return 0;
  if (sampler === 'traceidratio' || sampler === 'parentbased_traceidratio') {
    const arg = env.OTEL_TRACES_SAMPLER_ARG?.trim();
    const ratio = arg ? Number(arg) : 1;
    if (!(ratio >= 0 && ratio <= 1))
      throw new UsageError(`OTEL_TRACES_SAMPLER_ARG must be a number in [0, 1], got ${JSON.stringify(arg)}`, USAGE);
    return ratio;
  }
  throw new UsageError(
    `OTEL_TRACES_SAMPLER ${JSON.stringify(sampler)} is not one kvroute serve takes: always_on, always_off, traceidratio or their parentbased_ forms`,
    USAGE,
  );
}

/**
 * --otlp-traces-endpoint, or OpenTelemetry's own variables where neither it nor the config sets
 * tracing (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`; `OTEL_EXPORTER_OTLP_ENDPOINT`, the base the
 * traces path is added to over HTTP, used as it is over gRPC; `OTEL_SERVICE_NAME`;
 * `OTEL_SDK_DISABLED=true` turns them off), as an OpenTelemetry SDK reads them: an operator that
 * injects them into every pod traces the gateway too. --otlp-traces-protocol,
 * `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` or `OTEL_EXPORTER_OTLP_PROTOCOL`, and `OTEL_TRACES_SAMPLER`
 * set the protocol and the sample ratio the config does not, and OpenTelemetry's certificate
 * variables the TLS of an `https` endpoint ({@link otlpTlsFromEnv}).
 */
function tracingFlags(v: Record<string, unknown>, o: Record<string, unknown>): void {
  const env = process.env;
  const flag = v['otlp-traces-endpoint'] as string | undefined;
  const protocol =
    (v['otlp-traces-protocol'] as string | undefined) ??
    (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim() || env.OTEL_EXPORTER_OTLP_PROTOCOL?.trim() || undefined);
  if (flag !== undefined) {
    o.tracing = { ...((o.tracing as object) ?? {}), otlpEndpoint: flag };
  } else if (o.tracing === undefined && env.OTEL_SDK_DISABLED?.trim().toLowerCase() !== 'true') {
    const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
    const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
    const endpoint = traces || (base && protocol !== 'grpc' ? `${base.replace(/\/+$/, '')}/v1/traces` : base);
    if (endpoint)
      o.tracing = { otlpEndpoint: endpoint, ...(env.OTEL_SERVICE_NAME?.trim() ? { serviceName: env.OTEL_SERVICE_NAME.trim() } : {}) };
  }
  const tracing = o.tracing as Record<string, unknown> | undefined;
  if (tracing?.otlpEndpoint === undefined) {
    if (v['otlp-traces-protocol'] !== undefined) throw new UsageError('--otlp-traces-protocol needs an OTLP endpoint to send to', USAGE);
    return;
  }
  if (protocol !== undefined && (v['otlp-traces-protocol'] !== undefined || tracing.otlpProtocol === undefined))
    tracing.otlpProtocol = protocol;
  const ratio = tracing.sampleRatio === undefined ? envSampleRatio(env) : undefined;
  if (ratio !== undefined) tracing.sampleRatio = ratio;
  if (tracing.otlpTls === undefined && String(tracing.otlpEndpoint).startsWith('https:')) {
    const tls = otlpTlsFromEnv(env);
    if (tls) tracing.otlpTls = tls;
  }
}

/**
 * `tracing.otlpTls` from OpenTelemetry's certificate variables (the traces' own, else the shared
 * ones), as its exporters read them, but checked now and named in the error: an exporter that
 * cannot read one goes on without it, and every export then fails.
 */
function otlpTlsFromEnv(env: NodeJS.ProcessEnv): Record<string, string> | undefined {
  const named = (what: string) => {
    const own = `OTEL_EXPORTER_OTLP_TRACES_${what}`;
    const shared = `OTEL_EXPORTER_OTLP_${what}`;
    const name = env[own]?.trim() ? own : shared;
    const path = env[name]?.trim();
    return path ? { name, path } : undefined;
  };
  const ca = named('CERTIFICATE');
  const cert = named('CLIENT_CERTIFICATE');
  const key = named('CLIENT_KEY');
  if (!ca && !cert && !key) return undefined;
  if ((cert === undefined) !== (key === undefined))
    throw new UsageError(
      `a client certificate and its key go together: ${cert?.name ?? key?.name} is set, ${cert ? 'no CLIENT_KEY' : 'no CLIENT_CERTIFICATE'}`,
      USAGE,
    );
  readTlsFiles(
    { caFile: ca?.path, certFile: cert?.path, keyFile: key?.path },
    { caFile: ca?.name ?? '', certFile: cert?.name ?? '', keyFile: key?.name ?? '' },
  );
  return { ...(ca ? { caFile: ca.path } : {}), ...(cert && key ? { certFile: cert.path, keyFile: key.path } : {}) };
}

function optionsFrom(v: Record<string, unknown>): GatewayOptions {
  const o: Record<string, unknown> = v.config === undefined ? {} : readConfigFile(String(v.config));
  if (v['block-size'] !== undefined) o.blockSize = v['block-size'];
  if (v.worker !== undefined) o.workers = [...((o.workers as unknown[]) ?? []), ...(v.worker as string[]).map(parseWorkerFlag)];
  if (v.tokenizer !== undefined) o.tokenizer = v.tokenizer;
  chatFlags(v, o);
  corsFlags(v, o);
  if (v['router-config'] !== undefined) {
    try {
      o.router = { ...(o.router as object), ...JSON.parse(String(v['router-config'])) };
    } catch (err) {
      throw new UsageError(`--router-config is not JSON: ${(err as Error).message}`, USAGE);
    }
  }
  if (v['ssl-certfile'] !== undefined || v['ssl-keyfile'] !== undefined) {
    if (v['ssl-certfile'] === undefined || v['ssl-keyfile'] === undefined)
      throw new UsageError('--ssl-certfile and --ssl-keyfile go together', USAGE);
    o.tls = {
      certFile: v['ssl-certfile'],
      keyFile: v['ssl-keyfile'],
      ...(v['ssl-ca-certs'] === undefined ? {} : { caFile: v['ssl-ca-certs'] }),
    };
  } else if (v['ssl-ca-certs'] !== undefined) throw new UsageError('--ssl-ca-certs needs --ssl-certfile and --ssl-keyfile', USAGE);
  if (v['metrics-port'] !== undefined) o.admin = { port: v['metrics-port'], host: v['metrics-host'] ?? '127.0.0.1' };
  if (v.model !== undefined) o.model = v.model;
  if (v.backend !== undefined) o.backend = v.backend;
  if (v['disaggregation-bypass-below-tokens'] !== undefined)
    o.disaggregation = { ...((o.disaggregation as object) ?? {}), bypassBelowTokens: v['disaggregation-bypass-below-tokens'] };
  if (v['disaggregation-protocol'] !== undefined)
    o.disaggregation = { ...((o.disaggregation as object) ?? {}), protocol: v['disaggregation-protocol'] };
  discoveryFlags(v, o);
  tracingFlags(v, o);
  for (const [flag, key] of [
    ['shutdown-delay-secs', 'delayMs'],
    ['drain-timeout-secs', 'drainTimeoutMs'],
  ] as const) {
    if (v[flag] === undefined) continue;
    const secs = Number(v[flag]);
    if (!(secs >= 0 && secs <= 86_400)) throw new UsageError(`--${flag} must be a number of seconds in [0, 86400]`, USAGE);
    o.shutdown = { ...((o.shutdown as object) ?? {}), [key]: Math.round(secs * 1000) };
  }
  if (v['log-level'] !== undefined) o.logLevel = v['log-level'] === 'off' ? false : v['log-level'];
  replicaFlags(v, o);
  const auth = { ...((o.auth as object) ?? {}) } as Record<string, unknown>;
  if (process.env.KVROUTE_API_KEYS) auth.apiKeys = process.env.KVROUTE_API_KEYS.split(',').filter(Boolean);
  if (process.env.KVROUTE_ADMIN_TOKEN) auth.adminToken = process.env.KVROUTE_ADMIN_TOKEN;
  if (Object.keys(auth).length > 0) o.auth = auth;
  if (process.env.KVROUTE_UPSTREAM_API_KEY)
    o.upstream = { ...((o.upstream as object) ?? {}), apiKey: process.env.KVROUTE_UPSTREAM_API_KEY };
  if (o.blockSize === undefined) throw new UsageError('give --block-size or blockSize in the config', USAGE);
  return o as unknown as GatewayOptions;
}

export async function runServe(argv: string[]): Promise<number> {
  const { positional, values: v, help } = parseCommand(argv, FLAGS, USAGE);
  if (help) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (positional.length > 0) throw new UsageError('serve takes no positional arguments', USAGE);
  if (v['watch-config'] !== undefined && v.config === undefined) throw new UsageError('--watch-config needs --config', USAGE);
  const started = optionsFrom(v);
  const gateway = createGateway(started);
  // The process is the gateway's own: its memory, CPU, event-loop delay and GC beside the
  // gateway's metrics (prom-client's defaults, `process_*` and `nodejs_*`). An application
  // embedding createGateway registers these itself, once for its process.
  collectDefaultMetrics({ register: gateway.registry });
  // From here on SIGHUP reloads the workers instead of ending the process, as daemons do.
  const stopReloading = reloadConfigOnSignal(gateway, {
    read: () => optionsFrom(v),
    started,
    ...(v['watch-config'] ? { watch: String(v.config) } : {}),
  });
  let address: Awaited<ReturnType<typeof gateway.listen>>;
  try {
    address = await gateway.listen({ port: (v.port as number | undefined) ?? 8000, host: (v.host as string | undefined) ?? '127.0.0.1' });
  } catch (err) {
    stopReloading();
    await gateway.close();
    // listen() names the listener and address itself.
    throw err instanceof KvRouteError
      ? err
      : new KvRouteError('ERR_INVALID_ARG', `cannot listen: ${(err as Error).message}`, { cause: err });
  }
  const workers = gateway.workers().length;
  return await new Promise<number>((resolve) => {
    // A second signal ends the shutdown delay at once.
    let signalled = false;
    const stop = () => {
      stopReloading();
      void gateway.close({ now: signalled }).then(() => resolve(0));
      signalled = true;
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
    // Announced once a signal would be heard: a supervisor may stop it as soon as it reads this.
    process.stdout.write(`kvroute serve: proxy ${address.url}, admin ${address.adminUrl}, ${workers} worker${workers === 1 ? '' : 's'}\n`);
  });
}
