/**
 * The `tracing` option of the gateway: where its spans go. Its shape and checks.
 * @internal
 * @module
 */

import type { TracerProvider } from '@opentelemetry/api';
import { describe, nonNegativeNumber } from '../../validate.js';
import { int, invalid, object, record, str } from '../option-checks.js';

/**
 * Where the gateway's spans go (see the README's "Tracing"). Without this option they go to the
 * global OpenTelemetry API's tracer provider, which records nothing until the application
 * registers an SDK.
 * @group Gateway
 */
export interface TracingOptions {
  /**
   * An OTLP/HTTP traces endpoint, e.g. a collector's `http://127.0.0.1:4318/v1/traces`: the gateway
   * runs its own OpenTelemetry SDK (the optional packages `@opentelemetry/sdk-trace`,
   * `@opentelemetry/exporter-trace-otlp-http`, `@opentelemetry/resources`) and exports to it,
   * JSON-encoded, in batches. `kvroute serve --otlp-traces-endpoint` (vLLM's flag) sets it.
   */
  otlpEndpoint?: string;
  /** Headers sent with every export (a vendor's API key, say). */
  otlpHeaders?: Record<string, string>;
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

/** @internal how the gateway gets its tracer. */
export type ResolvedTracing =
  | { kind: 'global' }
  | { kind: 'provider'; provider: TracerProvider }
  | {
      kind: 'otlp';
      endpoint: string;
      headers: Record<string, string>;
      serviceName: string;
      sampleRatio: number;
      exportDelayMs: number;
    };

const KEYS = ['otlpEndpoint', 'otlpHeaders', 'serviceName', 'sampleRatio', 'exportDelayMs', 'tracerProvider'];

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
  if (t.otlpEndpoint === undefined) throw invalid('tracing needs otlpEndpoint (an OTLP/HTTP traces URL) or tracerProvider');
  const endpoint = checkOtlpEndpoint(t.otlpEndpoint, 'tracing.otlpEndpoint');
  const headers = t.otlpHeaders === undefined ? {} : object(t.otlpHeaders, 'tracing.otlpHeaders');
  for (const [k, v] of Object.entries(headers)) {
    if (typeof v !== 'string') throw invalid(`tracing.otlpHeaders.${k} must be a string, got ${describe(v)}`);
  }
  const sampleRatio = nonNegativeNumber(t.sampleRatio, 'tracing.sampleRatio', 1);
  if (sampleRatio > 1) throw invalid(`tracing.sampleRatio must be in [0, 1], got ${sampleRatio}`);
  return {
    kind: 'otlp',
    endpoint,
    headers: headers as Record<string, string>,
    serviceName: t.serviceName === undefined ? 'kvroute' : str(t.serviceName, 'tracing.serviceName'),
    sampleRatio,
    exportDelayMs: int(t.exportDelayMs, 'tracing.exportDelayMs', 1, 3_600_000, 5000),
  };
}
