/**
 * The proxy listener's TLS: the certificate and key given as PEM text, or as files that are read
 * again whenever they change (a stat poll, settled as the config's is: `file-watch.ts`), so a
 * certificate renewed on disk (cert-manager rewriting a Kubernetes Secret, certbot's renewal) is
 * served to new connections without a restart. A changed pair is loaded whole before it replaces
 * the served one: a file that does not parse, or a key that does not match its certificate, is
 * logged and counted, and the old pair stays. The certificate's expiry is a gauge, for alerts.
 *
 * With client CAs (`ca`, `caFile`: vLLM's `--ssl-ca-certs`), every client must present a
 * certificate one of them signed (mutual TLS); handshakes that fail, for that or any other
 * reason, are counted.
 * @internal
 * @module
 */

import { X509Certificate } from 'node:crypto';
import type { Server } from 'node:https';
import type { FastifyBaseLogger } from 'fastify';
import { Counter, Gauge, type Registry } from 'prom-client';
import { checkCaBundle, checkKeyPair, readPemFile } from '../tls-files.js';
import { describe } from '../validate.js';
import { watchReloads } from './file-watch.js';
import { int, invalid, record, str } from './option-checks.js';

/**
 * TLS of the proxy listener: PEM text (`cert`, `key`), or files (`certFile`, `keyFile`: vLLM's
 * `--ssl-certfile`, `--ssl-keyfile`) that are read again when they change.
 * @group Gateway
 */
export type TlsOptions = TlsPemOptions | TlsFileOptions;

/**
 * The certificate and key as PEM text.
 * @group Gateway
 */
export interface TlsPemOptions {
  /** PEM certificate chain. */
  cert: string | Buffer;
  /** PEM private key. */
  key: string | Buffer;
  /** PEM certificates of the CAs that sign clients' certificates: with it, clients must present one (mutual TLS). */
  ca?: string | Buffer;
}

/**
 * The certificate and key as files, served anew when they change.
 * @group Gateway
 */
export interface TlsFileOptions {
  /** A file holding the PEM certificate chain. */
  certFile: string;
  /** A file holding the PEM private key. */
  keyFile: string;
  /** A file holding the PEM certificates of the CAs that sign clients' certificates (mutual TLS), read again when it changes. */
  caFile?: string;
  /** How often the files are looked at, ms; a change is loaded once both have stayed the same for a quarter second. Default 10000. */
  watchIntervalMs?: number;
}

/** @internal the pair to serve, and the files it came from. */
export interface ResolvedTls {
  cert: string | Buffer;
  key: string | Buffer;
  /** Client CAs: clients must present a certificate one of them signed. */
  ca: string | Buffer | undefined;
  files: { cert: string; key: string; ca: string | undefined; watchIntervalMs: number } | undefined;
}

/** The listener's TLS options: with client CAs, a client certificate is asked for and must verify. */
export function listenerTls(tls: ResolvedTls): {
  cert: string | Buffer;
  key: string | Buffer;
  ca?: string | Buffer;
  requestCert?: boolean;
  rejectUnauthorized?: boolean;
} {
  return tls.ca === undefined
    ? { cert: tls.cert, key: tls.key }
    : { cert: tls.cert, key: tls.key, ca: tls.ca, requestCert: true, rejectUnauthorized: true };
}

/** The pair, and the client CAs when given, loaded the way the listener will. */
function load(cert: string | Buffer, key: string | Buffer, ca: string | Buffer | undefined, what: string): void {
  checkKeyPair(cert, key, what);
  if (ca !== undefined) checkCaBundle(ca, 'the client CAs');
}

/** Reads the `tls` option, loading the pair once (so a bad one fails `createGateway`, not the first handshake). */
export function resolveTls(value: unknown): ResolvedTls | undefined {
  if (value === undefined) return undefined;
  const t = record(value, 'tls', ['cert', 'key', 'ca', 'certFile', 'keyFile', 'caFile', 'watchIntervalMs']);
  const pem = t.cert !== undefined || t.key !== undefined;
  const files = t.certFile !== undefined || t.keyFile !== undefined;
  if (pem === files) throw invalid('tls takes cert and key (PEM text), or certFile and keyFile: one pair');
  if (pem) {
    if (t.watchIntervalMs !== undefined) throw invalid('tls.watchIntervalMs goes with certFile and keyFile');
    if (t.caFile !== undefined) throw invalid('tls.caFile goes with certFile and keyFile; with cert and key, give tls.ca');
    for (const k of ['cert', 'key', 'ca'] as const) {
      if (k === 'ca' && t.ca === undefined) continue;
      if (typeof t[k] !== 'string' && !Buffer.isBuffer(t[k])) throw invalid(`tls.${k} must be PEM text, got ${describe(t[k])}`);
    }
    const ca = t.ca as string | Buffer | undefined;
    load(t.cert as string, t.key as string, ca, 'tls.cert and tls.key');
    return { cert: t.cert as string, key: t.key as string, ca, files: undefined };
  }
  if (t.ca !== undefined) throw invalid('tls.ca goes with cert and key; with files, give tls.caFile');
  const certFile = str(t.certFile, 'tls.certFile');
  const keyFile = str(t.keyFile, 'tls.keyFile');
  const caFile = t.caFile === undefined ? undefined : str(t.caFile, 'tls.caFile');
  const cert = readPemFile(certFile, 'tls.certFile');
  const key = readPemFile(keyFile, 'tls.keyFile');
  const ca = caFile === undefined ? undefined : readPemFile(caFile, 'tls.caFile');
  load(cert, key, ca, 'tls.certFile and tls.keyFile');
  return {
    cert,
    key,
    ca,
    files: {
      cert: certFile,
      key: keyFile,
      ca: caFile,
      watchIntervalMs: int(t.watchIntervalMs, 'tls.watchIntervalMs', 10, 3_600_000, 10_000),
    },
  };
}

/**
 * Serves `tls` on `server` from now on: the expiry gauge, and with files the reloads. Returns
 * the function that stops watching.
 */
export function serveTls(server: Server, tls: ResolvedTls, registry: Registry, log: FastifyBaseLogger): () => void {
  const expiry = new Gauge({
    name: 'kvroute_gateway_tls_certificate_expiry_timestamp_seconds',
    help: 'When the served TLS certificate (the first of its chain) expires, Unix seconds.',
    registers: [registry],
  });
  const expires = (cert: string | Buffer) => expiry.set(Math.floor(Date.parse(new X509Certificate(cert).validTo) / 1000));
  expires(tls.cert);
  const handshakes = new Counter({
    name: 'kvroute_gateway_tls_handshake_failures_total',
    help: 'TLS handshakes that failed on the proxy listener (with client CAs: a client without a certificate they signed, among others).',
    registers: [registry],
  });
  handshakes.inc(0);
  server.on('tlsClientError', () => handshakes.inc());
  const files = tls.files;
  if (!files) return () => {};
  const watched = files.ca === undefined ? [files.cert, files.key] : [files.cert, files.key, files.ca];
  return watchReloads({
    files: watched,
    intervalMs: files.watchIntervalMs,
    registry,
    metric: 'kvroute_gateway_tls_reloads_total',
    help: 'Changes of tls.certFile, tls.keyFile or tls.caFile: applied (served to new connections) or rejected (the served ones kept).',
    log,
    what: 'TLS files',
    apply: () => {
      // Read and loaded as at start: a pair that does not load throws here and is not served.
      const next = resolveTls({ certFile: files.cert, keyFile: files.key, caFile: files.ca }) as ResolvedTls;
      server.setSecureContext(next.ca === undefined ? { cert: next.cert, key: next.key } : { cert: next.cert, key: next.key, ca: next.ca });
      expires(next.cert);
    },
  });
}
