/**
 * TLS towards the workers, for engines that serve HTTPS (vLLM's `--ssl-certfile`): the CAs that
 * sign the workers' certificates, when they are not the system's (a cluster's own CA), and a
 * client certificate for workers that require one (vLLM's `--ssl-ca-certs` with
 * `--ssl-cert-reqs 2`). Every request to a worker (proxied, health checks, model lists,
 * tokenizing) goes through its connection pool, which takes these. Read once, at start.
 * @internal
 * @module
 */

import { invalid, record, str } from './option-checks.js';
import { checkCaBundle, checkKeyPair, readPemFile } from './tls.js';

/**
 * TLS of the gateway's connections to workers whose URLs are `https://`.
 * @group Gateway
 */
export interface UpstreamTlsOptions {
  /** A file of PEM CA certificates that sign the workers' certificates. Default: Node's CAs (and `NODE_EXTRA_CA_CERTS`). */
  caFile?: string;
  /** A file holding the PEM client certificate to present to workers that require one. With `keyFile`. */
  certFile?: string;
  /** The client certificate's PEM private key. */
  keyFile?: string;
}

/** @internal the files' contents, for undici's connector. */
export interface ResolvedUpstreamTls {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
}

/** Reads `upstream.tls` and its files; `ERR_INVALID_ARG` naming the key at fault. */
export function resolveUpstreamTls(value: unknown): ResolvedUpstreamTls | undefined {
  if (value === undefined) return undefined;
  const t = record(value, 'upstream.tls', ['caFile', 'certFile', 'keyFile']);
  const out: ResolvedUpstreamTls = {};
  if (t.caFile !== undefined) {
    out.ca = readPemFile(str(t.caFile, 'upstream.tls.caFile'), 'upstream.tls.caFile');
    checkCaBundle(out.ca, 'upstream.tls.caFile');
  }
  if ((t.certFile === undefined) !== (t.keyFile === undefined)) throw invalid('upstream.tls.certFile and upstream.tls.keyFile go together');
  if (t.certFile !== undefined) {
    out.cert = readPemFile(str(t.certFile, 'upstream.tls.certFile'), 'upstream.tls.certFile');
    out.key = readPemFile(str(t.keyFile, 'upstream.tls.keyFile'), 'upstream.tls.keyFile');
    checkKeyPair(out.cert, out.key, 'upstream.tls.certFile and upstream.tls.keyFile');
  }
  return out;
}
