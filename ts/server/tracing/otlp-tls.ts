/**
 * `tracing.otlpTls`: the files read and checked when the gateway is created, since an exporter
 * that cannot load them would fail every export later, each failure only a count in
 * `kvroute_gateway_spans_total{result="failed"}`; and the material handed to the exporter of
 * either transport (provider.ts).
 * @internal
 * @module
 */

import { checkCaBundle, checkKeyPair, readPemFile } from '../../tls-files.js';
import { invalid, record, str } from '../option-checks.js';

/** The PEM bytes of `tracing.otlpTls`'s files. */
export interface OtlpTlsMaterial {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
}

const AT = 'tracing.otlpTls';

/** Reads `tracing.otlpTls` for `endpoint`; `ERR_INVALID_ARG` naming the key or file at fault. */
export function resolveOtlpTls(value: unknown, endpoint: string): OtlpTlsMaterial {
  const t = record(value, AT, ['caFile', 'certFile', 'keyFile']);
  if ((t.certFile === undefined) !== (t.keyFile === undefined)) throw invalid(`${AT}.certFile and ${AT}.keyFile go together`);
  // Both transports send an `http:` endpoint in the clear: files given for it would be ignored.
  if (new URL(endpoint).protocol !== 'https:')
    throw invalid(
      `${AT} applies to an https endpoint, but tracing.otlpEndpoint is ${JSON.stringify(endpoint)}: make it https:// or leave ${AT} out`,
    );
  const out: OtlpTlsMaterial = {};
  if (t.caFile !== undefined) {
    out.ca = readPemFile(str(t.caFile, `${AT}.caFile`), `${AT}.caFile`);
    checkCaBundle(out.ca, `${AT}.caFile`);
  }
  if (t.certFile !== undefined) {
    out.cert = readPemFile(str(t.certFile, `${AT}.certFile`), `${AT}.certFile`);
    out.key = readPemFile(str(t.keyFile, `${AT}.keyFile`), `${AT}.keyFile`);
    checkKeyPair(out.cert, out.key, `${AT}.certFile and ${AT}.keyFile`);
  }
  return out;
}
