/**
 * TLS towards the workers, for engines that serve HTTPS (vLLM's `--ssl-certfile`): the CAs that
 * sign the workers' certificates, when they are not the system's (a cluster's own CA), and a
 * client certificate for workers that require one (vLLM's `--ssl-ca-certs` with
 * `--ssl-cert-reqs 2`). Every request to a worker (proxied, health checks, model lists,
 * tokenizing) goes through its connection pool, whose connections this makes.
 *
 * The files are read again when they change (settled, as the proxy's TLS files are): new
 * connections then use them, so a client certificate renewed on disk is presented without a
 * restart; open connections keep theirs until they close. Files that do not load are logged
 * and counted, and the last good ones stay.
 * @internal
 * @module
 */

import type { FastifyBaseLogger } from 'fastify';
import type { Registry } from 'prom-client';
import { buildConnector } from 'undici';
import { readTlsFiles, type TlsMaterial, tlsFileNames } from '../tls-files.js';
import { watchReloads } from './file-watch.js';
import { int, invalid, record, str } from './option-checks.js';

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
  /** How often the files are looked at, ms. Default 10000. */
  watchIntervalMs?: number;
}

/** @internal the files, checked. */
export interface ResolvedUpstreamTls {
  caFile: string | undefined;
  certFile: string | undefined;
  keyFile: string | undefined;
  watchIntervalMs: number;
}

/** Reads the files and checks them; `ERR_INVALID_ARG` naming the one at fault. */
const read = (t: ResolvedUpstreamTls): TlsMaterial => readTlsFiles(t, tlsFileNames('upstream.tls'));

/** Reads `upstream.tls`, loading its files once (so a bad one fails `createGateway`). */
export function resolveUpstreamTls(value: unknown): ResolvedUpstreamTls | undefined {
  if (value === undefined) return undefined;
  const t = record(value, 'upstream.tls', ['caFile', 'certFile', 'keyFile', 'watchIntervalMs']);
  if ((t.certFile === undefined) !== (t.keyFile === undefined)) throw invalid('upstream.tls.certFile and upstream.tls.keyFile go together');
  const resolved: ResolvedUpstreamTls = {
    caFile: t.caFile === undefined ? undefined : str(t.caFile, 'upstream.tls.caFile'),
    certFile: t.certFile === undefined ? undefined : str(t.certFile, 'upstream.tls.certFile'),
    keyFile: t.keyFile === undefined ? undefined : str(t.keyFile, 'upstream.tls.keyFile'),
    watchIntervalMs: int(t.watchIntervalMs, 'upstream.tls.watchIntervalMs', 10, 3_600_000, 10_000),
  };
  read(resolved);
  return resolved;
}

/** The workers' pools' connector, made from the files as last read, and their watch. */
export class UpstreamTls {
  private connector: buildConnector.connector;
  private readonly stopWatching: () => void;

  /** Every new connection to a worker goes through here. */
  readonly connect: buildConnector.connector = (options, callback) => this.connector(options, callback);

  constructor(tls: ResolvedUpstreamTls, registry: Registry, log: FastifyBaseLogger) {
    this.connector = buildConnector(read(tls));
    this.stopWatching = watchReloads({
      files: [tls.caFile, tls.certFile, tls.keyFile].filter((f): f is string => f !== undefined),
      intervalMs: tls.watchIntervalMs,
      registry,
      metric: 'kvroute_gateway_upstream_tls_reloads_total',
      help: 'Changes of upstream.tls files: applied (new connections to workers use them) or rejected (the last good ones kept).',
      log,
      what: 'upstream TLS files',
      apply: () => {
        this.connector = buildConnector(read(tls));
      },
    });
  }

  stop(): void {
    this.stopWatching();
  }
}
