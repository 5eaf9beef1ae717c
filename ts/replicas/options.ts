/**
 * `ReplicaOptions`: how a router replica shares its in-flight load with its peers. Validated up
 * front, like every other option, so a typo fails at construction instead of silently running
 * unsynchronised.
 */

import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { KvRouteError } from '../errors.js';
import { readTlsFiles, tlsFileNames } from '../tls-files.js';
import { checkOptions, describe, positiveNumber } from '../validate.js';
import type { ReplicaTransport } from './transport.js';

/**
 * TLS of a NATS connection, for servers that require it (`tls { … }` in nats-server's config):
 * the CAs that sign the server's certificate, and a client certificate for servers that verify
 * clients (`verify: true`). The client reads the files at each (re)connection, so renewed files
 * apply at the next one. A `tls://` server URL also asks for TLS, with the system's CAs.
 * @group Replicas
 */
export interface NatsTlsOptions {
  /** A file of PEM CA certificates that sign the server's certificate. */
  caFile?: string;
  /** A file holding the PEM client certificate (with `keyFile`). */
  certFile?: string;
  /** The client certificate's PEM private key. */
  keyFile?: string;
}

/**
 * Connection to a NATS server (core NATS: load sync is best effort by nature, so no JetStream is
 * needed for it).
 * @group Replicas
 */
export interface NatsReplicaOptions {
  /** Server URL(s), e.g. `nats://127.0.0.1:4222`. */
  servers: string | string[];
  /** Subject prefix of the sync messages; replicas of one fleet share it. Default `kvroute.load`. */
  subject?: string;
  /** Token authentication. */
  token?: string;
  /** User authentication (with `pass`). */
  user?: string;
  /** The password of `user`. */
  pass?: string;
  /** Path of a NATS `.creds` file (JWT + NKey seed). */
  credentials?: string;
  /** TLS of the connection. Default: plain, unless a server URL is `tls://`. */
  tls?: NatsTlsOptions;
  /** Connection name shown by the server's monitoring. Default `kvroute-<replicaId>`. */
  name?: string;
  /** The same as {@link ReplicaOptions.replicaId} (either place; not both). */
  replicaId?: string;
}

/**
 * Options of {@link KvRouterOptions.replicas}. Exactly one of `nats` or `transport`.
 * @group Replicas
 */
export interface ReplicaOptions {
  /** Share load over NATS (the production path). */
  nats?: NatsReplicaOptions;
  /** Share load over another transport (`kvroute replay` uses an in-process one). */
  transport?: ReplicaTransport;
  /** This replica's id; replicas of one fleet must differ. Default `<hostname>-<pid>-<random>`. */
  replicaId?: string;
  /** Interval of the liveness messages, ms. Default 1000. */
  heartbeatMs?: number;
  /**
   * A peer unheard for this long (ms, on this replica's own clock) is presumed dead and its load
   * is dropped. Default 5000; at least twice `heartbeatMs`.
   */
  leaseMs?: number;
  /** A full state is published this often (ms) so messages lost in transit are repaired. Default 30000. */
  resyncMs?: number;
  /**
   * Outgoing changes wait at most this long (ms) to be batched into one message; 0 sends them at
   * the end of the current event-loop turn. Default 0.
   */
  batchMs?: number;
}

/** @internal */
export interface ResolvedReplicaOptions {
  nats: (Omit<NatsReplicaOptions, 'servers' | 'subject'> & { servers: string[]; subject: string }) | undefined;
  transport: ReplicaTransport | undefined;
  replicaId: string;
  heartbeatMs: number;
  leaseMs: number;
  resyncMs: number;
  batchMs: number;
}

const HOUR_MS = 3_600_000;

/** A dot-separated NATS subject without wildcards or spaces. */
const SUBJECT = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;

function bad(name: string, what: string, value: unknown): never {
  throw new KvRouteError('ERR_INVALID_ARG', `opts.replicas.${name} must be ${what}, got ${describe(value)}`);
}

function optionalText(value: unknown, name: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length === 0) bad(name, 'a non-empty string', value);
  return value;
}

/**
 * The servers and authentication of a NATS connection (`o.servers`, `o.token`, `o.user` +
 * `o.pass`, `o.credentials`), checked alike wherever kvroute connects: the replica sync and the
 * snapshot store. `where` names the options object in messages.
 * @internal
 */
export function resolveNatsAuth(
  o: Record<string, unknown>,
  where: string,
): { servers: string[]; token?: string; user?: string; pass?: string; credentials?: string; tls?: NatsTlsOptions } {
  const fail = (name: string, what: string, value: unknown): never => {
    throw new KvRouteError('ERR_INVALID_ARG', `${where}${name} must be ${what}, got ${describe(value)}`);
  };
  const servers = typeof o.servers === 'string' ? [o.servers] : o.servers;
  if (!Array.isArray(servers) || servers.length === 0 || !servers.every((s) => typeof s === 'string' && s.length > 0))
    fail('.servers', 'a server URL or a non-empty array of them', o.servers);
  if ((o.user === undefined) !== (o.pass === undefined)) fail('.user', 'given together with pass', o.user);
  if ([o.token, o.user, o.credentials].filter((x) => x !== undefined).length > 1)
    fail('', 'configured with at most one of token, user/pass and credentials', '(several)');
  const auth: Record<string, string> = {};
  for (const k of ['token', 'user', 'pass', 'credentials']) {
    const v = o[k];
    if (v === undefined) continue;
    if (typeof v !== 'string' || v.length === 0) fail(`.${k}`, 'a non-empty string', v);
    auth[k] = v as string;
  }
  return { servers: servers as string[], ...auth, ...(o.tls === undefined ? {} : { tls: resolveTlsFiles(o.tls, `${where}.tls`) }) };
}

/**
 * A `tls` of CA, certificate and key files (a NATS connection's, a warm start's peer request):
 * its files read and loaded now, so a bad one fails at construction, not at each (re)connection.
 */
export function resolveTlsFiles(value: unknown, where: string): NatsTlsOptions {
  const t = checkOptions(value, where, ['caFile', 'certFile', 'keyFile']);
  const out: NatsTlsOptions = {};
  for (const k of ['caFile', 'certFile', 'keyFile'] as const) {
    const v = t[k];
    if (v === undefined) continue;
    if (typeof v !== 'string' || v.length === 0)
      throw new KvRouteError('ERR_INVALID_ARG', `${where}.${k} must be a file name, got ${describe(v)}`);
    out[k] = v;
  }
  if ((out.certFile === undefined) !== (out.keyFile === undefined))
    throw new KvRouteError('ERR_INVALID_ARG', `${where}.certFile and ${where}.keyFile go together`);
  readTlsFiles(out, tlsFileNames(where));
  return out;
}

function resolveNats(value: unknown, replicaId: string): ResolvedReplicaOptions['nats'] {
  const o = checkOptions(value, 'opts.replicas.nats', [
    'servers',
    'subject',
    'token',
    'user',
    'pass',
    'credentials',
    'tls',
    'name',
    'replicaId',
  ]);
  const subject = o.subject ?? 'kvroute.load';
  if (typeof subject !== 'string' || !SUBJECT.test(subject)) bad('nats.subject', 'a NATS subject without wildcards', o.subject);
  return {
    ...resolveNatsAuth(o, 'opts.replicas.nats'),
    subject,
    name: optionalText(o.name, 'nats.name') ?? `kvroute-${replicaId}`,
  };
}

/** A default replica id that differs between processes and between routers of one process. */
export function defaultReplicaId(): string {
  return `${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`;
}

/** @internal */
export function resolveReplicaOptions(value: unknown): ResolvedReplicaOptions {
  const o = checkOptions(value, 'opts.replicas', ['nats', 'transport', 'replicaId', 'heartbeatMs', 'leaseMs', 'resyncMs', 'batchMs']);
  if ((o.nats === undefined) === (o.transport === undefined)) bad('', 'given exactly one of nats and transport', value);
  const natsId = o.nats !== null && typeof o.nats === 'object' ? (o.nats as Record<string, unknown>).replicaId : undefined;
  if (o.replicaId !== undefined && natsId !== undefined) bad('replicaId', 'given once (here or in nats)', natsId);
  const replicaId = optionalText(o.replicaId ?? natsId, o.replicaId === undefined ? 'nats.replicaId' : 'replicaId') ?? defaultReplicaId();
  if (replicaId.length > 128) bad('replicaId', 'at most 128 characters', replicaId);
  const t = o.transport as ReplicaTransport | undefined;
  if (t !== undefined && (typeof t !== 'object' || t === null || typeof t.publish !== 'function' || typeof t.start !== 'function'))
    bad('transport', 'a ReplicaTransport (start, publish, close)', t);
  // Timers beyond 2^31 ms would fire at once (Node clamps them to 1 ms): an hour is plenty.
  const heartbeatMs = positiveNumber(o.heartbeatMs, 'opts.replicas.heartbeatMs', 1000);
  if (heartbeatMs > HOUR_MS) bad('heartbeatMs', `at most ${HOUR_MS}`, heartbeatMs);
  const leaseMs = positiveNumber(o.leaseMs, 'opts.replicas.leaseMs', Math.max(5000, 2 * heartbeatMs));
  if (leaseMs < 2 * heartbeatMs) bad('leaseMs', `at least twice heartbeatMs (${2 * heartbeatMs})`, leaseMs);
  const batchMs = o.batchMs ?? 0;
  if (typeof batchMs !== 'number' || !Number.isFinite(batchMs) || batchMs < 0 || batchMs > 60_000)
    bad('batchMs', 'a number in [0, 60000]', batchMs);
  return {
    nats: o.nats === undefined ? undefined : resolveNats(o.nats, replicaId),
    transport: t,
    replicaId,
    heartbeatMs,
    leaseMs,
    resyncMs: positiveNumber(o.resyncMs, 'opts.replicas.resyncMs', 30_000),
    batchMs,
  };
}
