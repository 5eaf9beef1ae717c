/**
 * The OTLP exporter of a gateway with `tracing.otlpTls`: an exporter's TLS is fixed when it is
 * made (the HTTP agent's options, the gRPC channel's credentials), so when the files change and
 * settle a new exporter is made from them and takes the next exports, while the one it replaces
 * finishes its exports and is shut down. Files that do not load are logged and counted, and the
 * exporter in use stays.
 * @internal
 * @module
 */

import type { SpanExporter } from '@opentelemetry/sdk-trace';
import type { FastifyBaseLogger } from 'fastify';
import type { Registry } from 'prom-client';
import { watchReloads } from '../file-watch.js';
import { type OtlpTlsMaterial, otlpTlsFiles, type ResolvedOtlpTls, readOtlpTls } from './otlp-tls.js';

/** Where a reload is counted and logged. */
export interface ReloadReporting {
  registry: Registry;
  log: FastifyBaseLogger;
}

export class ReloadingExporter implements SpanExporter {
  private current: SpanExporter;
  private readonly stopWatching: () => void;

  constructor(make: (tls: OtlpTlsMaterial) => SpanExporter, tls: ResolvedOtlpTls, reporting: ReloadReporting) {
    this.current = make(readOtlpTls(tls));
    this.stopWatching = watchReloads({
      files: otlpTlsFiles(tls),
      intervalMs: tls.watchIntervalMs,
      registry: reporting.registry,
      metric: 'kvroute_gateway_otlp_tls_reloads_total',
      help: 'Changes of tracing.otlpTls files: applied (later exports use them) or rejected (the last good ones kept).',
      log: reporting.log,
      what: 'OTLP TLS files',
      apply: () => {
        const next = make(readOtlpTls(tls));
        const replaced = this.current;
        this.current = next;
        void replaced.shutdown().catch(() => undefined);
      },
    });
  }

  export(...args: Parameters<SpanExporter['export']>): void {
    this.current.export(...args);
  }

  async forceFlush(): Promise<void> {
    await this.current.forceFlush?.();
  }

  async shutdown(): Promise<void> {
    this.stopWatching();
    await this.current.shutdown();
  }
}
