/**
 * The gateway's tracer: the global OpenTelemetry API's, an application's provider, or an SDK of
 * its own that exports to an OTLP endpoint (HTTP with JSON or protobuf, or gRPC). The SDK packages
 * are optional dependencies, loaded only when `tracing.otlpEndpoint` is set, each exporter only
 * for its protocol.
 *
 * The batch processor drops spans when its queue is full and counts what it exported or failed
 * to export through the SDK's self-observability meter; that count is passed to the gateway's
 * `kvroute_gateway_spans_total{result}`, so that no span is lost unseen.
 * @internal
 * @module
 */

import { type Attributes, createNoopMeter, type Meter, type MeterProvider, type Tracer, trace } from '@opentelemetry/api';
import type { SpanExporter } from '@opentelemetry/sdk-trace';
import type { Counter } from 'prom-client';
import { loadOptional } from '../../js/ingest/deps.js';
import { packageVersion } from '../../version.js';
import type { ResolvedTracing } from './options.js';
import { type OtlpTlsMaterial, readOtlpTls } from './otlp-tls.js';
import { ReloadingExporter, type ReloadReporting } from './reloading-exporter.js';

type SdkTrace = typeof import('@opentelemetry/sdk-trace');
type OtlpHttp = typeof import('@opentelemetry/exporter-trace-otlp-http');
type OtlpProto = typeof import('@opentelemetry/exporter-trace-otlp-proto');
type OtlpGrpc = typeof import('@opentelemetry/exporter-trace-otlp-grpc');
type Grpc = typeof import('@grpc/grpc-js');
type Resources = typeof import('@opentelemetry/resources');

/** The instrumentation scope of the gateway's spans. */
export const TRACER_NAME = 'kvroute';

/** The gateway's tracer, and how to flush and stop what it made. */
export interface GatewayTracer {
  tracer: Tracer;
  /** Exports the spans still queued and stops the SDK the gateway made (nothing for another's). */
  shutdown(): Promise<void>;
}

/** The batch processor's count of the spans it finished with (semantic conventions' name). */
const PROCESSED = 'otel.sdk.processor.span.processed';

/**
 * A meter provider whose only live instrument is the batch processor's processed-spans counter,
 * read into `spans{result}`: exported (no `error.type`), dropped (`queue_full`) or failed.
 */
function spanCounting(spans: Counter<'result'>): MeterProvider {
  const noop = createNoopMeter();
  const meter: Meter = Object.assign(Object.create(noop) as Meter, {
    createCounter: (name: string, options?: object) =>
      name === PROCESSED
        ? {
            add(count: number, attributes?: Attributes) {
              const error = attributes?.['error.type'];
              spans.inc({ result: error === undefined ? 'exported' : error === 'queue_full' ? 'dropped' : 'failed' }, count);
            },
          }
        : noop.createCounter(name, options),
  });
  return { getMeter: () => meter };
}

/** How an SDK of the process's own exports: the resolved `tracing.otlpEndpoint` and the keys beside it. */
export type OtlpExport = Omit<Extract<ResolvedTracing, { kind: 'otlp' }>, 'kind'>;

const PURPOSE = 'exporting spans to an OTLP endpoint';
const HINT = 'or leave the OTLP endpoint out';

/**
 * The exporter of `o.protocol`, from its optional package: OTLP/HTTP with JSON or protobuf, or
 * OTLP/gRPC. With `tls`, its connections use those CAs and that client certificate; without
 * it, the exporter's own defaults (Node's CAs, and OpenTelemetry's certificate variables).
 */
function otlpExporter(o: OtlpExport, tls: OtlpTlsMaterial | undefined): SpanExporter {
  if (o.protocol === 'http/json' || o.protocol === 'http/protobuf') {
    const { OTLPTraceExporter } =
      o.protocol === 'http/json'
        ? loadOptional<OtlpHttp>('@opentelemetry/exporter-trace-otlp-http', PURPOSE, HINT)
        : loadOptional<OtlpProto>('@opentelemetry/exporter-trace-otlp-proto', PURPOSE, HINT);
    // The exporter's own agent options: kept alive as its default agent is.
    return new OTLPTraceExporter({
      url: o.endpoint,
      headers: o.headers,
      ...(tls ? { httpAgentOptions: { keepAlive: true, ...tls } } : {}),
    });
  }
  const { OTLPTraceExporter } = loadOptional<OtlpGrpc>('@opentelemetry/exporter-trace-otlp-grpc', PURPOSE, HINT);
  const { Metadata, credentials } = loadOptional<Grpc>('@grpc/grpc-js', PURPOSE, HINT);
  const metadata = new Metadata();
  for (const [key, value] of Object.entries(o.headers)) metadata.set(key, value);
  const secure = tls ? { credentials: credentials.createSsl(tls.ca ?? null, tls.key ?? null, tls.cert ?? null) } : {};
  return new OTLPTraceExporter({ url: o.endpoint, metadata, ...secure });
}

/**
 * An OpenTelemetry SDK exporting OTLP (`o.protocol`) in batches, its spans counted in `spans`
 * when given, its TLS files (`o.tls`) read again when they change if `reporting` says where to
 * count and log that; `ERR_DEPENDENCY_MISSING` without the optional SDK packages. The gateway's
 * and the mock worker's (`--otlp-traces-endpoint` on both).
 */
export function otlpTracer(o: OtlpExport, spans?: Counter<'result'>, reporting?: ReloadReporting): GatewayTracer {
  const sdk = loadOptional<SdkTrace>('@opentelemetry/sdk-trace', PURPOSE, HINT);
  const { resourceFromAttributes } = loadOptional<Resources>('@opentelemetry/resources', PURPOSE, HINT);
  const { tls } = o;
  // TLS files are read again when they change, where there is a registry to count that in.
  const exporter =
    tls === undefined
      ? otlpExporter(o, undefined)
      : reporting
        ? new ReloadingExporter((material) => otlpExporter(o, material), tls, reporting)
        : otlpExporter(o, readOtlpTls(tls));
  const processor = new sdk.BatchSpanProcessor({
    exporter,
    scheduledDelayMillis: o.exportDelayMs,
    ...(spans ? { selfObsMeterProvider: spanCounting(spans) } : {}),
  });
  const provider = new sdk.TracerProvider({
    resource: resourceFromAttributes({ 'service.name': o.serviceName, 'service.version': packageVersion() }),
    sampler: new sdk.ParentBasedSampler({ root: new sdk.TraceIdRatioBasedSampler(o.sampleRatio) }),
    spanProcessors: [processor],
  });
  return { tracer: provider.getTracer(TRACER_NAME, packageVersion()), shutdown: () => provider.shutdown() };
}

/** The tracer `tracing` asks for; `ERR_DEPENDENCY_MISSING` when an OTLP endpoint is set without the SDK installed. */
export function gatewayTracer(tracing: ResolvedTracing, spans: Counter<'result'>, reporting: ReloadReporting): GatewayTracer {
  if (tracing.kind === 'global') return { tracer: trace.getTracer(TRACER_NAME, packageVersion()), shutdown: async () => {} };
  if (tracing.kind === 'provider') return { tracer: tracing.provider.getTracer(TRACER_NAME, packageVersion()), shutdown: async () => {} };
  return otlpTracer(tracing, spans, reporting);
}
