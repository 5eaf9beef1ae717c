/**
 * `tracing.otlpTls`: the files read and checked when the gateway is created, since an exporter
 * that cannot load them would fail every export later, each failure only a count in
 * `kvroute_gateway_spans_total{result="failed"}`; and read again when they change, as the
 * gateway's other TLS files are, so that a client certificate renewed on disk is presented
 * without a restart (provider.ts makes a new exporter from them).
 * @internal
 * @module
 */

import { readTlsFiles, type TlsMaterial, tlsFileNames } from '../../tls-files.js';
import { int, invalid, record, str } from '../option-checks.js';

/** The PEM bytes of `tracing.otlpTls`'s files. */
export type OtlpTlsMaterial = TlsMaterial;

/** `tracing.otlpTls`, checked: its files and how often they are looked at. */
export interface ResolvedOtlpTls {
  caFile: string | undefined;
  certFile: string | undefined;
  keyFile: string | undefined;
  watchIntervalMs: number;
}

const AT = 'tracing.otlpTls';

/** Reads `tracing.otlpTls` for `endpoint`, loading its files once; `ERR_INVALID_ARG` naming the key or file at fault. */
export function resolveOtlpTls(value: unknown, endpoint: string): ResolvedOtlpTls {
  const t = record(value, AT, ['caFile', 'certFile', 'keyFile', 'watchIntervalMs']);
  if ((t.certFile === undefined) !== (t.keyFile === undefined)) throw invalid(`${AT}.certFile and ${AT}.keyFile go together`);
  // Both transports send an `http:` endpoint in the clear: files given for it would be ignored.
  if (new URL(endpoint).protocol !== 'https:')
    throw invalid(
      `${AT} applies to an https endpoint, but tracing.otlpEndpoint is ${JSON.stringify(endpoint)}: make it https:// or leave ${AT} out`,
    );
  const resolved: ResolvedOtlpTls = {
    caFile: t.caFile === undefined ? undefined : str(t.caFile, `${AT}.caFile`),
    certFile: t.certFile === undefined ? undefined : str(t.certFile, `${AT}.certFile`),
    keyFile: t.keyFile === undefined ? undefined : str(t.keyFile, `${AT}.keyFile`),
    watchIntervalMs: int(t.watchIntervalMs, `${AT}.watchIntervalMs`, 10, 3_600_000, 10_000),
  };
  readOtlpTls(resolved);
  return resolved;
}

/** The files' bytes, each checked as a TLS context will load it; `ERR_INVALID_ARG` naming the one at fault. */
export function readOtlpTls(t: ResolvedOtlpTls): OtlpTlsMaterial {
  return readTlsFiles(t, tlsFileNames(AT));
}

/** The files to watch for changes. */
export function otlpTlsFiles(t: ResolvedOtlpTls): string[] {
  return [t.caFile, t.certFile, t.keyFile].filter((f): f is string => f !== undefined);
}
