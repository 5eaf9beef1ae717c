/**
 * Options of the mock worker, their defaults (vLLM's where it has one) and their validation.
 * @module
 */

import type { ContentFormatOption } from '../chat/content-format.js';
import { invalidArg, KvRouteError } from '../errors.js';
import { checkEndpoint } from '../ingest/options.js';
import { type PreemptionMode, preemptionMode } from '../replay/preemption.js';
import {
  checkSpeculative,
  type ResolvedSpeculative,
  SPECULATIVE_WITH_DECODE_SPEEDUP,
  type SpeculativeDecoding,
} from '../replay/speculative.js';
import { checkOtlpEndpoint, type OtlpProtocol, otlpProtocol } from '../server/tracing/options.js';
import { checkCaBundle, checkKeyPair, readPemFile } from '../tls-files.js';
import { checkOptions, describe, nonNegativeNumber, optionalBoolean, positiveNumber } from '../validate.js';
import type { DisaggregationMode } from './bootstrap.js';
import type { WireFormat } from './wire.js';

/**
 * Stop at once: open requests are cut, the HTTP port and the KV-event sockets close.
 * @group Mock worker
 */
export interface CrashFault {
  /** Discriminant. */
  kind: 'crash';
}

/**
 * Stop answering (requests and `/health` stay open, engine passes stop) until `recover`.
 * @group Mock worker
 */
export interface HangFault {
  /** Discriminant. */
  kind: 'hang';
}

/**
 * Every engine pass takes `factor` times longer until `recover`.
 * @group Mock worker
 */
export interface SlowFault {
  /** Discriminant. */
  kind: 'slow';
  /** Default 10. */
  factor?: number;
}

/**
 * The next `count` KV-event batches per rank are not sent live (they stay replayable).
 * @group Mock worker
 */
export interface DropEventsFault {
  /** Discriminant. */
  kind: 'drop-events';
  /** Default 1. */
  count?: number;
}

/**
 * A new engine incarnation: in-flight requests fail, the cache empties, block hashes change, seq
 * restarts at 0, and adapters loaded at run time are gone.
 * @group Mock worker
 */
export interface RestartFault {
  /** Discriminant. */
  kind: 'restart';
}

/**
 * Ends `hang` (hung requests get 503) and `slow`.
 * @group Mock worker
 */
export interface RecoverFault {
  /** Discriminant. */
  kind: 'recover';
}

/**
 * A fault to inject (`POST /admin/fault` with it as the body, or {@link MockWorker.fault}).
 * @group Mock worker
 */
export type MockFault = CrashFault | HangFault | SlowFault | DropEventsFault | RestartFault | RecoverFault;

/**
 * A fault applied `afterMs` after start.
 * @group Mock worker
 */
export interface ScheduledFault {
  /** The fault. */
  fault: MockFault;
  /** Delay after start, ms. */
  afterMs: number;
}

/**
 * Options of {@link startMockWorker}.
 * @group Mock worker
 */
export interface MockWorkerOptions {
  /** HTTP port. Default 8001; 0 picks a free one. */
  port?: number;
  /** HTTP host. Default `127.0.0.1`. */
  host?: string;
  /** KV-event PUB endpoint of rank 0 (rank r: port + r). Default none (no events). A port of 0 picks a free port per rank. */
  kvEvents?: string;
  /** Replay ROUTER endpoint of rank 0 (rank r: port + r). Default none. */
  replay?: string;
  /** Data-parallel ranks, each its own engine and publisher. Default 1. */
  dpSize?: number;
  /** Tokens per KV block. Default 16. */
  blockSize?: number;
  /** KV blocks per rank. Default 16384. */
  numGpuBlocks?: number;
  /**
   * Blocks of host memory per rank behind the GPU pool (vLLM's CPU offloading,
   * `--kv-offloading-size`, counted in blocks): every block a request takes is copied there,
   * the least recently used leave when it is full, and a prompt that continues there past its
   * GPU hit loads those blocks back instead of recomputing them. Its KV events are published with
   * medium `CPU` (SGLang's wire: `CPU_PINNED`), so a router credits them as host-tier blocks.
   * Default 0: no host memory.
   */
  cpuOffloadBlocks?: number;
  /**
   * Time to load one token's KV from host memory back to the GPU (µs, before `speedup`). Default
   * 6: 128 KiB per token (an 8B model at fp16) over about 21 GB/s of PCIe.
   */
  cpuLoadUsPerToken?: number;
  /** Running requests per rank. Default 256. */
  maxNumSeqs?: number;
  /** Tokens per engine pass. Default 8192. */
  maxNumBatchedTokens?: number;
  /** Divides every modelled duration. Default 1. */
  speedup?: number;
  /**
   * Divides the decode part of each engine pass on top of `speedup`, as Dynamo's mocker
   * `decode_speedup_ratio` does: an engine that emits several tokens a step (speculative
   * decoding) modelled as faster decode steps. Default 1.
   */
  decodeSpeedup?: number;
  /**
   * Speculative decoding (MTP, EAGLE) as Dynamo's mocker samples it: each decode step emits the
   * sampled token plus the drafts accepted (`draftTokens`, `acceptRates`), in one streamed
   * chunk, as vLLM streams a step's tokens; `/metrics` adds vLLM's `vllm:spec_decode_*`
   * counters. Not with `decodeSpeedup` (both model the same speed-up). Default: none.
   */
  speculative?: SpeculativeDecoding;
  /**
   * Which running request a rank preempts when its KV blocks run out (Dynamo's mocker
   * `preemption_mode`): `'lifo'`, the newest (vLLM's rule), or `'fifo'`, the oldest. The
   * victim's blocks go back to the pool and it waits at the front of the queue; its tokens so
   * far stay with the client, and it resumes after recomputing them. Default `'lifo'`.
   */
  preemptionMode?: PreemptionMode;
  /**
   * Generated tokens per streamed chunk (vLLM's and SGLang's `--stream-interval`): a sequence's
   * first token goes out at once, then a chunk each time this many more are generated, and the
   * last chunk with what is left. Such chunks carry several tokens' text, logprobs and ids, as
   * an engine's do under speculative decoding. Default 1: a chunk per token.
   */
  streamInterval?: number;
  /**
   * SGLang's `--disaggregation-mode`: the worker serves one leg of each request of a
   * disaggregated fleet, meeting its peer in the request's `bootstrap_room` (see
   * {@link DisaggregationMode}). A `prefill` worker runs a bootstrap server on `bootstrapPort`,
   * waits for the decode worker to join, computes the prompt and answers with one token; a
   * `decode` worker joins the prefill worker's room and fills the prompt without compute once
   * its KV is handed over. Requests without the bootstrap fields get 400. Default `null`: whole
   * requests (bootstrap fields are ignored, as SGLang ignores them).
   */
  disaggregationMode?: DisaggregationMode | null;
  /** A prefill worker's bootstrap server port (SGLang's `--disaggregation-bootstrap-port`); 0 picks a free one. Default 8998. */
  bootstrapPort?: number;
  /** How long a leg waits for its peer (the decode worker's arrival, or the KV) before failing with 500, ms. Default 30000. */
  bootstrapTimeoutMs?: number;
  /** Model name served. Default `mock-model`. */
  model?: string;
  /**
   * LoRA adapters served besides the model, by name (vLLM's `--lora-modules`): a request naming
   * one as its `model` runs under it, and its KV blocks are named and published apart from the
   * base model's. Default none.
   */
  loraModules?: readonly string[];
  /** vLLM's `--trust-request-chat-template`: render a chat request's own `chat_template` (refused with 400 otherwise). Default false. */
  trustRequestChatTemplate?: boolean;
  /**
   * vLLM's `--chat-template-content-format`: give chat templates OpenAI's list of parts
   * (`openai`) or the parts' text joined (`string`). Default `auto`: detected from the template,
   * as vLLM does.
   */
  chatTemplateContentFormat?: 'auto' | 'string' | 'openai';
  /**
   * Serve vLLM's runtime adapter routes (`VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`):
   * `POST /v1/load_lora_adapter` and `/v1/unload_lora_adapter` add and remove LoRA adapters while
   * the worker runs (the path is not read: the mock has no weights). Default false, as in vLLM:
   * the routes are then 404.
   */
  runtimeLoraUpdating?: boolean;
  /**
   * Keep Responses API answers in memory (vLLM's `VLLM_ENABLE_RESPONSES_API_STORE=1`), so that a
   * request may continue one by `previous_response_id` and `GET /v1/responses/{id}` finds it; the
   * 10,000 most recent are kept. Default false, as in vLLM: `store` is then ignored.
   */
  responsesStore?: boolean;
  /** vLLM's `--api-key`: the `/v1/*` routes then need `Authorization: Bearer <key>` (401 otherwise). Default none. */
  apiKey?: string;
  /** KV-event wire format. Default `vllm-0.33`. */
  wire?: WireFormat;
  /** Seed of the generated text. Default 1. */
  seed?: number;
  /** KV-event topic. Default `''`. */
  topic?: string;
  /** Batches kept for replay per rank (vLLM's `buffer_steps`). Default 10000. */
  bufferSteps?: number;
  /** Longest prompt plus output. Default 131072. */
  maxModelLen?: number;
  /** Faults to inject after a delay. */
  faults?: readonly ScheduledFault[];
  /**
   * vLLM's `--otlp-traces-endpoint`: an `llm_request` span per completion, chat, Responses or
   * Messages API request, under its `traceparent`, with vLLM's attributes, exported over OTLP
   * (`otlpTracesProtocol`), e.g. to a collector's `http://127.0.0.1:4318/v1/traces`. Needs the
   * optional OpenTelemetry SDK packages. Default none: no spans.
   */
  otlpTracesEndpoint?: string;
  /**
   * How those spans are sent: `'http/json'` (the default), `'http/protobuf'` or `'grpc'` (vLLM's
   * default, to a collector's `:4317`). The CLI reads it from `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`
   * or `OTEL_EXPORTER_OTLP_PROTOCOL`, as vLLM does.
   */
  otlpTracesProtocol?: OtlpProtocol;
  /** vLLM's `--ssl-certfile`: serve HTTPS with this PEM certificate (with `sslKeyfile`). Default: HTTP. */
  sslCertfile?: string;
  /** vLLM's `--ssl-keyfile`: the certificate's PEM private key. */
  sslKeyfile?: string;
  /**
   * vLLM's `--ssl-ca-certs`: PEM CAs that sign clients' certificates, which clients must then
   * present (vLLM needs `--ssl-cert-reqs 2` for that as well). Needs `sslCertfile`.
   */
  sslCaCerts?: string;
}

/**
 * {@link MockWorkerOptions} with every default filled in.
 * @group Mock worker
 */
export type ResolvedMockOptions = Required<
  Omit<
    MockWorkerOptions,
    | 'kvEvents'
    | 'replay'
    | 'apiKey'
    | 'speculative'
    | 'otlpTracesEndpoint'
    | 'otlpTracesProtocol'
    | 'sslCertfile'
    | 'sslKeyfile'
    | 'sslCaCerts'
  >
> &
  Pick<MockWorkerOptions, 'kvEvents' | 'replay' | 'apiKey' | 'otlpTracesEndpoint'> & {
    /** How the spans are sent (with `otlpTracesEndpoint`). */
    otlpTracesProtocol: OtlpProtocol;
    /** The HTTPS listener's certificate, key and client CAs, read; undefined: HTTP. */
    https: MockHttps | undefined;
    /** Speculative decoding as checked: one acceptance rate per draft, and the seed; undefined: none. */
    speculative: ResolvedSpeculative | undefined;
  };

const KEYS = [
  'port',
  'host',
  'kvEvents',
  'replay',
  'dpSize',
  'blockSize',
  'numGpuBlocks',
  'cpuOffloadBlocks',
  'cpuLoadUsPerToken',
  'maxNumSeqs',
  'maxNumBatchedTokens',
  'speedup',
  'decodeSpeedup',
  'speculative',
  'preemptionMode',
  'streamInterval',
  'disaggregationMode',
  'bootstrapPort',
  'bootstrapTimeoutMs',
  'model',
  'loraModules',
  'apiKey',
  'trustRequestChatTemplate',
  'chatTemplateContentFormat',
  'responsesStore',
  'runtimeLoraUpdating',
  'wire',
  'seed',
  'topic',
  'bufferSteps',
  'maxModelLen',
  'faults',
  'otlpTracesEndpoint',
  'otlpTracesProtocol',
  'sslCertfile',
  'sslKeyfile',
  'sslCaCerts',
] as const;
const WIRES: readonly WireFormat[] = ['vllm-0.33', 'vllm-0.11', 'sglang'];
export const FAULT_KINDS = ['crash', 'hang', 'slow', 'drop-events', 'restart', 'recover'] as const;

function disaggregationMode(v: unknown): DisaggregationMode | null {
  if (v === undefined || v === null) return null;
  if (v === 'prefill' || v === 'decode') return v;
  throw new KvRouteError('ERR_INVALID_ARG', `opts.disaggregationMode must be 'prefill', 'decode' or null, got ${describe(v)}`);
}

function contentFormat(v: unknown): ContentFormatOption {
  if (v === undefined) return 'auto';
  if (v === 'auto' || v === 'string' || v === 'openai') return v;
  throw new KvRouteError('ERR_INVALID_ARG', `opts.chatTemplateContentFormat must be 'auto', 'string' or 'openai', got ${describe(v)}`);
}

function int(v: unknown, name: string, min: number, max: number, dflt: number): number {
  if (v === undefined) return dflt;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new KvRouteError('ERR_INVALID_ARG', `${name} must be an integer in [${min}, ${max}], got ${describe(v)}`);
  }
  return v;
}

/** Validates a fault. */
export function checkFault(v: unknown, name: string): MockFault {
  const f = checkOptions(v, name, ['kind', 'factor', 'count']);
  if (v === undefined || !FAULT_KINDS.includes(f.kind as never)) {
    throw new KvRouteError('ERR_INVALID_ARG', `${name}.kind must be one of ${FAULT_KINDS.join(', ')}, got ${describe(f.kind)}`);
  }
  if (f.kind === 'slow') {
    const factor = f.factor ?? 10;
    if (typeof factor !== 'number' || !(factor >= 1) || !Number.isFinite(factor)) {
      throw new KvRouteError('ERR_INVALID_ARG', `${name}.factor must be a number ≥ 1, got ${describe(f.factor)}`);
    }
    return { kind: 'slow', factor };
  }
  if (f.kind === 'drop-events') return { kind: 'drop-events', count: int(f.count, `${name}.count`, 1, 1_000_000, 1) };
  if (f.factor !== undefined || f.count !== undefined)
    throw new KvRouteError('ERR_INVALID_ARG', `${name}: only slow takes factor, only drop-events takes count`);
  return { kind: f.kind as 'crash' | 'hang' | 'restart' | 'recover' };
}

/**
 * The mock worker's HTTPS listener, as Node's https server takes it (from `sslCertfile`,
 * `sslKeyfile`, `sslCaCerts`).
 * @group Mock worker
 */
export interface MockHttps {
  /** The PEM certificate. */
  cert: Buffer;
  /** Its PEM private key. */
  key: Buffer;
  /** PEM CAs of clients' certificates. */
  ca?: Buffer;
  /** Whether clients are asked for a certificate (with `ca`). */
  requestCert?: boolean;
  /** Whether a client without a verified certificate is refused (with `ca`). */
  rejectUnauthorized?: boolean;
}

/** `sslCertfile`, `sslKeyfile` and `sslCaCerts`, read and loaded (so a bad one fails at start, named). */
function https(o: MockWorkerOptions): MockHttps | undefined {
  if (o.sslCertfile === undefined && o.sslKeyfile === undefined) {
    if (o.sslCaCerts !== undefined) throw invalidArg('opts.sslCaCerts needs opts.sslCertfile and opts.sslKeyfile');
    return undefined;
  }
  if (typeof o.sslCertfile !== 'string' || typeof o.sslKeyfile !== 'string')
    throw invalidArg(
      `opts.sslCertfile and opts.sslKeyfile must be file names, given together; got ${describe(o.sslCertfile)} and ${describe(o.sslKeyfile)}`,
    );
  const cert = readPemFile(o.sslCertfile, 'opts.sslCertfile');
  const key = readPemFile(o.sslKeyfile, 'opts.sslKeyfile');
  checkKeyPair(cert, key, 'opts.sslCertfile and opts.sslKeyfile');
  if (o.sslCaCerts === undefined) return { cert, key };
  if (typeof o.sslCaCerts !== 'string') throw invalidArg(`opts.sslCaCerts must be a file name, got ${describe(o.sslCaCerts)}`);
  const ca = readPemFile(o.sslCaCerts, 'opts.sslCaCerts');
  checkCaBundle(ca, 'opts.sslCaCerts');
  return { cert, key, ca, requestCert: true, rejectUnauthorized: true };
}

export function resolveMockOptions(opts: MockWorkerOptions | undefined): ResolvedMockOptions {
  const o = checkOptions(opts, 'opts', KEYS) as MockWorkerOptions;
  const wire = o.wire ?? 'vllm-0.33';
  if (!WIRES.includes(wire))
    throw new KvRouteError('ERR_INVALID_ARG', `opts.wire must be one of ${WIRES.join(', ')}, got ${describe(o.wire)}`);
  if (o.kvEvents !== undefined) checkEndpoint(o.kvEvents, 'opts.kvEvents');
  if (o.replay !== undefined) {
    checkEndpoint(o.replay, 'opts.replay');
    if (o.kvEvents === undefined) throw new KvRouteError('ERR_INVALID_ARG', 'opts.replay needs opts.kvEvents');
  }
  const speedup = positiveNumber(o.speedup, 'opts.speedup', 1);
  const decodeSpeedup = positiveNumber(o.decodeSpeedup, 'opts.decodeSpeedup', 1);
  const speculative = checkSpeculative(o.speculative, 'opts.speculative');
  if (speculative && decodeSpeedup !== 1) throw invalidArg(SPECULATIVE_WITH_DECODE_SPEEDUP('opts.'));
  for (const [k, v] of [
    ['model', o.model],
    ['host', o.host],
    ['topic', o.topic],
    ['apiKey', o.apiKey],
  ] as const) {
    if (v !== undefined && typeof v !== 'string')
      throw new KvRouteError('ERR_INVALID_ARG', `opts.${k} must be a string, got ${describe(v)}`);
  }
  const model = o.model ?? 'mock-model';
  const loraModules = o.loraModules ?? [];
  if (!Array.isArray(loraModules))
    throw new KvRouteError('ERR_INVALID_ARG', `opts.loraModules must be a list of names, got ${describe(loraModules)}`);
  loraModules.forEach((name: unknown, i) => {
    if (typeof name !== 'string' || name === '')
      throw new KvRouteError('ERR_INVALID_ARG', `opts.loraModules[${i}] must be a non-empty string, got ${describe(name)}`);
    if (name === model || loraModules.indexOf(name) !== i)
      throw new KvRouteError('ERR_INVALID_ARG', `opts.loraModules[${i}] ${JSON.stringify(name)} is the model's name or listed twice`);
  });
  if (o.faults !== undefined && !Array.isArray(o.faults))
    throw new KvRouteError('ERR_INVALID_ARG', `opts.faults must be a list of { fault, afterMs }, got ${describe(o.faults)}`);
  const faults = (o.faults ?? []).map((f, i) => {
    const x = checkOptions(f, `opts.faults[${i}]`, ['fault', 'afterMs']);
    return {
      fault: checkFault(x.fault, `opts.faults[${i}].fault`),
      afterMs: int(x.afterMs, `opts.faults[${i}].afterMs`, 0, 86_400_000, 0),
    };
  });
  return {
    port: int(o.port, 'opts.port', 0, 65535, 8001),
    host: o.host ?? '127.0.0.1',
    kvEvents: o.kvEvents,
    replay: o.replay,
    dpSize: int(o.dpSize, 'opts.dpSize', 1, 64, 1),
    blockSize: int(o.blockSize, 'opts.blockSize', 1, 1 << 20, 16),
    numGpuBlocks: int(o.numGpuBlocks, 'opts.numGpuBlocks', 1, 1 << 30, 16_384),
    cpuOffloadBlocks: int(o.cpuOffloadBlocks, 'opts.cpuOffloadBlocks', 0, 1 << 30, 0),
    cpuLoadUsPerToken: nonNegativeNumber(o.cpuLoadUsPerToken, 'opts.cpuLoadUsPerToken', 6),
    maxNumSeqs: int(o.maxNumSeqs, 'opts.maxNumSeqs', 1, 1 << 20, 256),
    maxNumBatchedTokens: int(o.maxNumBatchedTokens, 'opts.maxNumBatchedTokens', 1, 1 << 30, 8192),
    speedup,
    decodeSpeedup,
    speculative,
    preemptionMode: preemptionMode(o.preemptionMode, 'opts.preemptionMode'),
    streamInterval: int(o.streamInterval, 'opts.streamInterval', 1, 1 << 20, 1),
    disaggregationMode: disaggregationMode(o.disaggregationMode),
    bootstrapPort: int(o.bootstrapPort, 'opts.bootstrapPort', 0, 65535, 8998),
    bootstrapTimeoutMs: int(o.bootstrapTimeoutMs, 'opts.bootstrapTimeoutMs', 1, 3_600_000, 30_000),
    model,
    loraModules: [...loraModules],
    ...(o.apiKey === undefined ? {} : { apiKey: o.apiKey }),
    https: https(o),
    ...(o.otlpTracesEndpoint === undefined
      ? {}
      : { otlpTracesEndpoint: checkOtlpEndpoint(o.otlpTracesEndpoint, 'opts.otlpTracesEndpoint') }),
    otlpTracesProtocol: o.otlpTracesProtocol === undefined ? 'http/json' : otlpProtocol(o.otlpTracesProtocol, 'opts.otlpTracesProtocol'),
    trustRequestChatTemplate: optionalBoolean(o.trustRequestChatTemplate, 'opts.trustRequestChatTemplate') ?? false,
    chatTemplateContentFormat: contentFormat(o.chatTemplateContentFormat),
    responsesStore: optionalBoolean(o.responsesStore, 'opts.responsesStore') ?? false,
    runtimeLoraUpdating: optionalBoolean(o.runtimeLoraUpdating, 'opts.runtimeLoraUpdating') ?? false,
    wire,
    seed: int(o.seed, 'opts.seed', 0, 2 ** 32 - 1, 1),
    topic: o.topic ?? '',
    bufferSteps: int(o.bufferSteps, 'opts.bufferSteps', 1, 10_000_000, 10_000),
    maxModelLen: int(o.maxModelLen, 'opts.maxModelLen', 1, 1 << 30, 131_072),
    faults,
  };
}

/** Rank r's endpoint from rank 0's: port + r (tcp; a port of 0 stays "any free port"), path + `_dp<r>` otherwise. */
export function rankEndpoint(base: string, rank: number): string {
  if (rank === 0) return base;
  if (!base.startsWith('tcp://')) return `${base}_dp${rank}`;
  const colon = base.lastIndexOf(':');
  const port = Number(base.slice(colon + 1));
  return port === 0 ? base : `${base.slice(0, colon)}:${port + rank}`;
}

/** The endpoint to bind: libzmq's ephemeral-port spelling for port 0. */
export function bindable(endpoint: string): string {
  return endpoint.startsWith('tcp://') && endpoint.endsWith(':0') ? `${endpoint.slice(0, -2)}:*` : endpoint;
}
