/**
 * `kvroute mock-worker`: runs {@link startMockWorker} until SIGINT or SIGTERM (or a `crash`
 * fault, which exits with code 1).
 * @internal
 * @module
 */

import { type Flags, helpText, parseCommand, UsageError } from '../cli-args.js';
import { KvRouteError } from '../errors.js';
import { SPECULATIVE_FLAGS, speculativeFromFlags } from '../replay/speculative-flags.js';
import type { MockFault, MockWorkerOptions } from './options.js';
import { FAULT_KINDS } from './options.js';
import { writeMockTokenizer } from './tokenizer-json.js';
import { onMockCrash, startMockWorker } from './worker.js';

/** `kind@ms` or `kind:arg@ms`, comma-separated: `drop-events:3@1000,restart@5000`. */
function parseFaults(spec: string): NonNullable<MockWorkerOptions['faults']> {
  return spec.split(',').map((part) => {
    const m = /^([a-z-]+)(?::([\d.]+))?@(\d+)$/.exec(part.trim());
    if (!m || !FAULT_KINDS.includes(m[1] as never)) {
      throw new UsageError(`--faults: "${part}" is not kind[:arg]@ms with kind one of ${FAULT_KINDS.join(', ')}`, USAGE);
    }
    const arg = m[2] === undefined ? undefined : Number(m[2]);
    const fault = (
      m[1] === 'slow' ? { kind: 'slow', factor: arg } : m[1] === 'drop-events' ? { kind: 'drop-events', count: arg } : { kind: m[1] }
    ) as MockFault;
    return { fault, afterMs: Number(m[3]) };
  });
}

const FLAGS: Flags = {
  port: { kind: 'number', help: 'HTTP port (0: any free port)', default: '8001' },
  host: { kind: 'string', help: 'HTTP host', default: '127.0.0.1' },
  'kv-events': {
    kind: 'string',
    value: 'endpoint',
    help: "rank 0's KV-event PUB endpoint (rank r: port + r), e.g. tcp://127.0.0.1:5557",
    default: 'none',
  },
  replay: { kind: 'string', value: 'endpoint', help: "rank 0's replay ROUTER endpoint (rank r: port + r)", default: 'none' },
  'dp-size': { kind: 'number', help: 'data-parallel ranks', default: '1' },
  'block-size': { kind: 'number', help: 'tokens per KV block', default: '16' },
  'num-gpu-blocks': { kind: 'number', help: 'KV blocks per rank', default: '16384' },
  'cpu-offload-blocks': {
    kind: 'number',
    help: 'host-memory KV blocks per rank behind the GPU pool (vLLM CPU offloading; events with medium CPU)',
    default: '0',
  },
  'cpu-load-us-per-token': { kind: 'number', help: "µs to load one token's KV back from host memory", default: '6' },
  'max-num-seqs': { kind: 'number', help: 'running requests per rank', default: '256' },
  'max-num-batched-tokens': { kind: 'number', help: 'tokens per engine pass', default: '8192' },
  speedup: { kind: 'number', help: 'divides every modelled duration', default: '1' },
  'decode-speedup': {
    kind: 'number',
    help: "divides decode time on top of --speedup (Dynamo's decode_speedup_ratio: speculative decoding)",
    default: '1',
  },
  ...SPECULATIVE_FLAGS,
  'preemption-mode': {
    kind: 'string',
    value: 'lifo|fifo',
    help: "which running request a rank preempts when its KV blocks run out: the newest (vLLM's rule) or the oldest (Dynamo's preemption_mode)",
    default: 'lifo',
  },
  'stream-interval': {
    kind: 'number',
    help: "generated tokens per streamed chunk after a sequence's first (vLLM's flag)",
    default: '1',
  },
  'disaggregation-mode': {
    kind: 'string',
    value: 'prefill|decode',
    help: "serve one leg of SGLang-style disaggregated requests, meeting the other in their bootstrap_room (SGLang's flag)",
    default: 'whole requests',
  },
  'disaggregation-bootstrap-port': {
    kind: 'number',
    help: "a prefill worker's bootstrap server port (SGLang's flag; 0: any free port)",
    default: '8998',
  },
  'bootstrap-timeout-ms': { kind: 'number', help: 'how long a leg waits for its peer before failing with 500', default: '30000' },
  model: { kind: 'string', help: 'model name served', default: 'mock-model' },
  'ssl-certfile': { kind: 'string', value: 'file', help: "serve HTTPS with this PEM certificate (vLLM's flag)" },
  'ssl-keyfile': { kind: 'string', value: 'file', help: "the certificate's PEM private key (vLLM's flag)" },
  'ssl-ca-certs': {
    kind: 'string',
    value: 'file',
    help: "PEM CAs that sign clients' certificates, which clients must present (vLLM's flag)",
  },
  'otlp-traces-endpoint': {
    kind: 'string',
    value: 'url',
    help: "export an llm_request span per request, as vLLM does, to this OTLP traces endpoint (vLLM's flag)",
  },
  'otlp-traces-protocol': {
    kind: 'string',
    value: 'http/json|http/protobuf|grpc',
    help: 'how the spans are sent (vLLM reads only the variables)',
    default: 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL, else http/json',
  },
  'lora-modules': {
    kind: 'string',
    value: 'name[=path],…',
    help: 'LoRA adapters served besides the model (a request names one as its model; the path is ignored)',
    default: 'none',
  },
  'trust-request-chat-template': { kind: 'boolean', help: "render a chat request's own chat_template (vLLM's flag; refused otherwise)" },
  'chat-template-content-format': {
    kind: 'string',
    value: 'auto|string|openai',
    help: "give chat templates OpenAI's list of parts or the joined text (vLLM's flag)",
    default: 'auto',
  },
  'runtime-lora-updating': {
    kind: 'boolean',
    help: "serve /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM's VLLM_ALLOW_RUNTIME_LORA_UPDATING)",
  },
  'responses-store': {
    kind: 'boolean',
    help: "keep Responses API answers for previous_response_id and GET /v1/responses/{id} (vLLM's VLLM_ENABLE_RESPONSES_API_STORE)",
  },
  'api-key': { kind: 'string', value: 'key', help: "vLLM's --api-key: the /v1 routes need 'Authorization: Bearer <key>'", default: 'none' },
  wire: { kind: 'string', value: 'vllm-0.33|vllm-0.11|sglang', help: 'KV-event wire format', default: 'vllm-0.33' },
  seed: { kind: 'number', help: 'seed of the generated text', default: '1' },
  topic: { kind: 'string', help: 'KV-event topic', default: "''" },
  'write-tokenizer': {
    kind: 'string',
    value: 'dir',
    help: "write the worker's tokenizer.json and tokenizer_config.json there and exit (for a gateway's local tokenizer)",
  },
  faults: {
    kind: 'string',
    value: 'kind[:arg]@ms,…',
    help: 'faults to inject after a delay: crash, hang, slow:<factor>, drop-events:<n>, restart, recover',
  },
};
const USAGE = helpText(
  'kvroute mock-worker [options]',
  'Runs a simulated vLLM worker: an OpenAI-compatible HTTP API and vLLM-wire KV events on ZeroMQ, until\nSIGINT or SIGTERM (exit 0) or a crash fault (exit 1).',
  FLAGS,
);

/** The options of startMockWorker from the flags. */
function optionsFrom(
  n: (k: string) => number | undefined,
  s: (k: string) => string | undefined,
  faults: unknown,
  flag: (k: string) => boolean,
  speculative: Pick<MockWorkerOptions, 'speculative'>,
): MockWorkerOptions {
  return {
    port: n('port'),
    host: s('host'),
    kvEvents: s('kv-events'),
    replay: s('replay'),
    dpSize: n('dp-size'),
    blockSize: n('block-size'),
    numGpuBlocks: n('num-gpu-blocks'),
    cpuOffloadBlocks: n('cpu-offload-blocks'),
    cpuLoadUsPerToken: n('cpu-load-us-per-token'),
    maxNumSeqs: n('max-num-seqs'),
    maxNumBatchedTokens: n('max-num-batched-tokens'),
    speedup: n('speedup'),
    decodeSpeedup: n('decode-speedup'),
    ...speculative,
    preemptionMode: s('preemption-mode') as MockWorkerOptions['preemptionMode'],
    streamInterval: n('stream-interval'),
    disaggregationMode: s('disaggregation-mode') as MockWorkerOptions['disaggregationMode'],
    bootstrapPort: n('disaggregation-bootstrap-port'),
    bootstrapTimeoutMs: n('bootstrap-timeout-ms'),
    model: s('model'),
    loraModules: s('lora-modules')
      ?.split(',')
      .map((m) => m.split('=')[0]),
    apiKey: s('api-key'),
    trustRequestChatTemplate: flag('trust-request-chat-template') ? true : undefined,
    chatTemplateContentFormat: s('chat-template-content-format') as MockWorkerOptions['chatTemplateContentFormat'],
    responsesStore: flag('responses-store') ? true : undefined,
    runtimeLoraUpdating: flag('runtime-lora-updating') ? true : undefined,
    wire: s('wire') as MockWorkerOptions['wire'],
    seed: n('seed'),
    topic: s('topic'),
    faults: faults === undefined ? undefined : parseFaults(String(faults)),
    otlpTracesEndpoint: s('otlp-traces-endpoint'),
    // vLLM takes the protocol from OpenTelemetry's variables only.
    otlpTracesProtocol: (s('otlp-traces-protocol') ||
      process.env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim() ||
      process.env.OTEL_EXPORTER_OTLP_PROTOCOL?.trim() ||
      undefined) as MockWorkerOptions['otlpTracesProtocol'],
    sslCertfile: s('ssl-certfile'),
    sslKeyfile: s('ssl-keyfile'),
    sslCaCerts: s('ssl-ca-certs'),
  };
}

/** Options whose flag is not their name in kebab case (SGLang's flag names). */
const FLAG_OF: Record<string, string> = { bootstrapPort: 'disaggregation-bootstrap-port' };

/** An option error from startMockWorker, in the flags' names: `opts.dpSize` is `--dp-size` here. */
function flagNamed(err: unknown): unknown {
  if (!(err instanceof KvRouteError) || err.code !== 'ERR_INVALID_ARG') return err;
  const message = err.message.replace(
    /\bopts\.([a-zA-Z]+)/g,
    (_, key: string) => `--${FLAG_OF[key] ?? key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`,
  );
  return new KvRouteError(err.code, message, { cause: err });
}

export async function runMockWorker(argv: string[]): Promise<number> {
  const { positional, values: v, help } = parseCommand(argv, FLAGS, USAGE);
  if (help) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (positional.length > 0) throw new UsageError('mock-worker takes no positional arguments', USAGE);
  if (v['write-tokenizer'] !== undefined) {
    process.stdout.write(`${writeMockTokenizer(String(v['write-tokenizer']))}\n`);
    return 0;
  }
  const n = (k: string) => v[k] as number | undefined;
  const s = (k: string) => v[k] as string | undefined;
  const worker = await startMockWorker(optionsFrom(n, s, v.faults, (k) => v[k] === true, speculativeFromFlags(v, USAGE))).catch(
    (err: unknown) => {
      throw flagNamed(err);
    },
  );
  const events = worker.kvEventsEndpoints.length > 0 ? `, KV events ${worker.kvEventsEndpoints.join(' ')}` : ', no KV events';
  const replay = worker.replayEndpoints.length > 0 ? `, replay ${worker.replayEndpoints.join(' ')}` : '';
  const loras = worker.options.loraModules.length > 0 ? ` (LoRA ${worker.options.loraModules.join(', ')})` : '';
  const mode = worker.options.disaggregationMode;
  const leg = mode === null ? '' : `, ${mode} legs${worker.bootstrapPort === undefined ? '' : ` (bootstrap port ${worker.bootstrapPort})`}`;
  return await new Promise<number>((resolve) => {
    const stop = () => void worker.close().then(() => resolve(0));
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    onMockCrash(worker, () => resolve(1));
    // Announced once a signal would be heard: a supervisor may stop it as soon as it reads this.
    process.stdout.write(`mock worker ${worker.options.model}${loras}: ${worker.url}${events}${replay}${leg}\n`);
  });
}
