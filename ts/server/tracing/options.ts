/**
 * The `tracing` option of the gateway: where its spans go. Its shape and checks.
 * @internal
 * @module
 */

import type { TracerProvider } from '@opentelemetry/api';
import { describe, nonNegativeNumber } from '../../validate.js';
import { int, invalid, isHttpHeaderValue, isHttpToken, object, record, str } from '../option-checks.js';
import { type ResolvedOtlpTls, resolveOtlpTls } from './otlp-tls.js';

/**
 * Where the gateway's spans go (see the README's "Tracing"). Without this option they go to the
 * global OpenTelemetry API's tracer provider, which records nothing until the application
 * registers an SDK.
 * @group Gateway
 */
export interface TracingOptions {
  /**
   * An OTLP traces endpoint, e.g. a collector's `http://127.0.0.1:4318/v1/traces` (or its gRPC
   * `http://127.0.0.1:4317` with `otlpProtocol: 'grpc'`): the gateway runs its own OpenTelemetry
   * SDK (the optional packages `@opentelemetry/sdk-trace`, `@opentelemetry/resources` and the
   * protocol's exporter) and exports to it in batches, JSON over HTTP by default.
   * `kvroute serve --otlp-traces-endpoint` (vLLM's flag) sets it.
   */
  otlpEndpoint?: string;
  /**
   * How the spans are sent: `'http/json'` (the default), `'http/protobuf'` (both POSTed to the
   * endpoint, a collector's `:4318/v1/traces`) or `'grpc'` (to a collector's `:4317`; the path is
   * not used). The last two load the optional `@opentelemetry/exporter-trace-otlp-proto` or
   * `@opentelemetry/exporter-trace-otlp-grpc`. `kvroute serve --otlp-traces-protocol` and
   * `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` set it.
   */
  otlpProtocol?: OtlpProtocol;
  /** Headers sent with every export (a vendor's API key, say); gRPC metadata with `'grpc'`. */
  otlpHeaders?: Record<string, string>;
  /**
   * TLS of the export, for an `https` endpoint whose certificate a private CA signed, or a
   * collector that requires a client certificate (see {@link OtlpTlsOptions}). Without it the
   * exporter checks the endpoint against Node's CAs, and reads OpenTelemetry's
   * `OTEL_EXPORTER_OTLP_CERTIFICATE`, `…_CLIENT_CERTIFICATE` and `…_CLIENT_KEY` itself
   * (`kvroute serve` reads them into this option, so that a bad file stops it at start).
   */
  otlpTls?: OtlpTlsOptions;
  /** The spans' `service.name`. Default `'kvroute'`. */
  serviceName?: string;
  /**
   * The share of traces recorded that a client did not start (in [0, 1]). A request with a
   * client's `traceparent` follows the client's sampled flag. Default 1.
   */
  sampleRatio?: number;
  /** The longest a finished span waits to be exported, ms. Default 5000 (the SDK's). */
  exportDelayMs?: number;
  /**
   * A tracer provider to make the spans with instead: an application's own SDK. Not with
   * `otlpEndpoint` and the keys beside it.
   */
  tracerProvider?: TracerProvider;
}

/**
 * TLS of the gateway's OTLP export (`tracing.otlpTls`), over HTTP and gRPC alike. The files are
 * read and checked when the gateway is created, and again when they change (settled, as the
 * gateway's other TLS files are): later exports then use them, so a client certificate renewed
 * on disk is presented without a restart. Files that do not load are logged and counted in
 * `kvroute_gateway_otlp_tls_reloads_total{result="rejected"}`, and the last good ones stay.
 * @group Gateway
 */
export interface OtlpTlsOptions {
  /** A file of PEM CA certificates the collector's certificate is checked against, instead of Node's CAs. */
  caFile?: string;
  /** A file holding the PEM client certificate to present to a collector that requires one. With `keyFile`. */
  certFile?: string;
  /** The client certificate's PEM private key. */
  keyFile?: string;
  /** How often the files are looked at, ms. Default 10000. */
  watchIntervalMs?: number;
}

/**
 * The OTLP encodings and transports the gateway exports with (OpenTelemetry's names, as
 * `OTEL_EXPORTER_OTLP_PROTOCOL` takes them).
 * @group Gateway
 */
export type OtlpProtocol = 'http/json' | 'http/protobuf' | 'grpc';

/** @internal */
export const OTLP_PROTOCOLS: readonly OtlpProtocol[] = ['http/json', 'http/protobuf', 'grpc'];

/** @internal how the gateway gets its tracer. */
export type ResolvedTracing =
  | { kind: 'global' }
  | { kind: 'provider'; provider: TracerProvider }
  | {
      kind: 'otlp';
      endpoint: string;
      protocol: OtlpProtocol;
      headers: Record<string, string>;
      /** `otlpTls`, its files checked; `undefined` leaves TLS to the exporter's defaults. */
      tls: ResolvedOtlpTls | undefined;
      serviceName: string;
      sampleRatio: number;
      exportDelayMs: number;
    };

const KEYS = ['otlpEndpoint', 'otlpProtocol', 'otlpHeaders', 'otlpTls', 'serviceName', 'sampleRatio', 'exportDelayMs', 'tracerProvider'];

/** An OTLP/HTTP endpoint: an http(s) URL; `ERR_INVALID_ARG` naming `at` otherwise. */
export function checkOtlpEndpoint(value: unknown, at: string): string {
  const endpoint = str(value, at);
  let url: URL | undefined;
  try {
    url = new URL(endpoint);
  } catch {
    // Not a URL: refused below.
  }
  if (url?.protocol !== 'http:' && url?.protocol !== 'https:') throw invalid(`${at} must be an http(s) URL, got ${describe(endpoint)}`);
  return endpoint;
}

/** Reads the `tracing` option; `ERR_INVALID_ARG` naming the key at fault. */
export function resolveTracing(value: unknown): ResolvedTracing {
  if (value === undefined) return { kind: 'global' };
  const t = record(value, 'tracing', KEYS);
  if (t.tracerProvider !== undefined) {
    const provider = t.tracerProvider as { getTracer?: unknown } | null;
    if (typeof provider !== 'object' || provider === null || typeof provider.getTracer !== 'function')
      throw invalid(`tracing.tracerProvider must be an OpenTelemetry TracerProvider, got ${describe(t.tracerProvider)}`);
    const others = Object.keys(t).filter((k) => k !== 'tracerProvider' && t[k] !== undefined);
    if (others.length > 0) throw invalid(`tracing.tracerProvider makes its own spans: leave out tracing.${others.join(', tracing.')}`);
    return { kind: 'provider', provider: t.tracerProvider as TracerProvider };
  }
  if (t.otlpEndpoint === undefined) throw invalid('tracing needs otlpEndpoint (an OTLP traces URL) or tracerProvider');
  const endpoint = checkOtlpEndpoint(t.otlpEndpoint, 'tracing.otlpEndpoint');
  const protocol = t.otlpProtocol === undefined ? 'http/json' : otlpProtocol(t.otlpProtocol, 'tracing.otlpProtocol');
  const headers = t.otlpHeaders === undefined ? {} : object(t.otlpHeaders, 'tracing.otlpHeaders');
  for (const [k, v] of Object.entries(headers)) checkHeader(k, v, protocol);
  const tls = t.otlpTls === undefined ? undefined : resolveOtlpTls(t.otlpTls, endpoint);
  const sampleRatio = nonNegativeNumber(t.sampleRatio, 'tracing.sampleRatio', 1);
  if (sampleRatio > 1) throw invalid(`tracing.sampleRatio must be in [0, 1], got ${sampleRatio}`);
  return {
    kind: 'otlp',
    endpoint,
    protocol,
    headers: headers as Record<string, string>,
    tls,
    serviceName: t.serviceName === undefined ? 'kvroute' : str(t.serviceName, 'tracing.serviceName'),
    sampleRatio,
    exportDelayMs: int(t.exportDelayMs, 'tracing.exportDelayMs', 1, 3_600_000, 5000),
  };
}

/** One of {@link OTLP_PROTOCOLS}; `ERR_INVALID_ARG` naming `at` otherwise. */
export function otlpProtocol(value: unknown, at: string): OtlpProtocol {
  if (!OTLP_PROTOCOLS.includes(value as OtlpProtocol))
    throw invalid(`${at} must be one of ${OTLP_PROTOCOLS.join(', ')}, got ${describe(value)}`);
  return value as OtlpProtocol;
}

/**
 * An export header the transport can send, refused here rather than at the first export: an
 * HTTP field name and a Latin-1 value without line breaks; over gRPC a metadata key (lower-cased,
 * of `0-9a-z_.-`; not a `-bin` one, whose values are bytes) and a printable ASCII value.
 */
function checkHeader(name: string, value: unknown, protocol: OtlpProtocol): void {
  const at = `tracing.otlpHeaders.${name}`;
  if (typeof value !== 'string') throw invalid(`${at} must be a string, got ${describe(value)}`);
  if (!isHttpToken(name)) throw invalid(`tracing.otlpHeaders: ${describe(name)} is not an HTTP header name`);
  if (protocol === 'grpc' && (!/^[0-9a-z_.-]+$/.test(name.toLowerCase()) || name.toLowerCase().endsWith('-bin')))
    throw invalid(`tracing.otlpHeaders: ${describe(name)} is not a gRPC metadata key (0-9a-z_.-, not -bin)`);
  if (protocol === 'grpc' ? !/^[\x20-\x7e]*$/.test(value) : !isHttpHeaderValue(value))
    throw invalid(`${at} must be printable ${protocol === 'grpc' ? 'ASCII' : 'text'} without line breaks, got ${describe(value)}`);
}
