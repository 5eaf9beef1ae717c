/**
 * Index warm start: a new replica fills its index from a running peer's `GET /dump` or from the
 * latest snapshot in a NATS JetStream object store, before it subscribes to the engines. The
 * snapshot's engine seqs are kept for {@link KvIndex.subscribe}, so each engine stream continues
 * after the snapshot and the gap is repaired through the engine's replay socket (or, without
 * one, the rank is marked resyncing, as for any unrepairable loss).
 */

import { Objm } from '@nats-io/obj';
import { connect } from '@nats-io/transport-node';
import { Agent, request } from 'undici';
import { KvRouteError } from '../errors.js';
import { KvIndex } from '../kv-index.js';
import { KvRouter } from '../router/kv-router.js';
import { readTlsFiles, tlsFileNames } from '../tls-files.js';
import { checkOptions, describe, positiveNumber } from '../validate.js';
import { natsConnectOptions } from './nats-transport.js';
import { resolveTlsFiles } from './options.js';
import { recordResumeSeqs } from './resume.js';
import { parseSnapshot } from './snapshot.js';
import { resolveSnapshotStore, type SnapshotStoreOptions } from './snapshot-store.js';

/**
 * Where a warm start reads the index from: exactly one of `peer` and `snapshot`.
 * @group Replicas
 */
export interface WarmStartOptions {
  /** Base URL of a running kvroute gateway (or Dynamo indexer) whose `GET /dump` to load. */
  peer?: string;
  /** The object store a {@link IndexSnapshotWriter} writes to. */
  snapshot?: SnapshotStoreOptions;
  /** The dump entry to use when the document holds several models. Default: its only entry. */
  model?: string;
  /**
   * Headers of the peer request (e.g. `authorization` of the peer's admin listener; a gateway
   * sends its own `auth.adminToken` when this has none, as replicas of one fleet share it).
   */
  headers?: Record<string, string>;
  /** TLS of the peer request: for a peer serving HTTPS with a private CA, or one that requires a client certificate. Default: Node's CAs. */
  tls?: PeerTlsOptions;
  /** Give up after this long (ms). Default 30000. */
  timeoutMs?: number;
}

/**
 * TLS of a warm start's request to its peer.
 * @group Replicas
 */
export interface PeerTlsOptions {
  /** A file of PEM CA certificates that sign the peer's certificate. */
  caFile?: string;
  /** A file holding the PEM client certificate to present (with `keyFile`), for a peer that verifies clients. */
  certFile?: string;
  /** The client certificate's PEM private key. */
  keyFile?: string;
}

/**
 * What a warm start loaded.
 * @group Replicas
 */
export interface WarmStartResult {
  /** Which source was read. */
  from: 'peer' | 'snapshot';
  /** Bytes of the document read. */
  bytes: number;
  /** Events applied (each a chain of device blocks, or one lower-tier block). */
  events: number;
  /** Blocks the index holds on the device afterwards. */
  blocks: number;
  /** Blocks the index holds in its lower tiers (host, disk and external together) afterwards. */
  lowerTierBlocks: number;
  /** Engine ranks whose streams will continue from the snapshot's seq when subscribed. */
  resumableRanks: number;
}

async function readPeer(url: string, headers: Record<string, string>, tls: PeerTlsOptions | undefined, timeoutMs: number): Promise<string> {
  const base = url.replace(/\/+$/, '');
  // A dispatcher of its own only for TLS files: its connections are closed with it.
  const dispatcher = tls === undefined ? undefined : new Agent({ connect: readTlsFiles(tls, tlsFileNames('opts.tls')) });
  try {
    let res: Awaited<ReturnType<typeof request>>;
    try {
      res = await request(`${base}/dump`, {
        headers,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        signal: AbortSignal.timeout(timeoutMs),
        ...(dispatcher ? { dispatcher } : {}),
      });
    } catch (err) {
      throw new KvRouteError('ERR_INVALID_ARG', `warm start: cannot read ${base}/dump: ${(err as Error).message}`, { cause: err });
    }
    const text = await res.body.text();
    if (res.statusCode !== 200)
      throw new KvRouteError('ERR_INVALID_ARG', `warm start: ${base}/dump answered ${res.statusCode}: ${text.slice(0, 200)}`);
    return text;
  } finally {
    await dispatcher?.close();
  }
}

async function readSnapshot(value: unknown, timeoutMs: number): Promise<string> {
  const store = resolveSnapshotStore(value, 'opts.snapshot');
  let nc: Awaited<ReturnType<typeof connect>>;
  try {
    nc = await connect({ ...natsConnectOptions(store, 'opts.snapshot'), timeout: timeoutMs, maxReconnectAttempts: 0 });
  } catch (err) {
    throw new KvRouteError(
      'ERR_INVALID_ARG',
      `warm start: cannot connect to NATS at ${store.servers.join(', ')}: ${(err as Error).message}`,
      {
        cause: err,
      },
    );
  }
  try {
    const os = await new Objm(nc).open(store.bucket);
    const data = await os.getBlob(store.name);
    if (data === null) throw new KvRouteError('ERR_INVALID_ARG', `warm start: no snapshot "${store.name}" in bucket "${store.bucket}"`);
    return new TextDecoder().decode(data);
  } catch (err) {
    if (err instanceof KvRouteError) throw err;
    throw new KvRouteError('ERR_INVALID_ARG', `warm start: cannot read bucket "${store.bucket}": ${(err as Error).message}`, {
      cause: err,
    });
  } finally {
    await nc.close();
  }
}

/**
 * Fills an index (or a router's) from a peer or a snapshot, and waits until it is visible. Call it
 * before subscribing to the engines: the sources then continue each stream after the snapshot.
 *
 * @example
 * ```ts
 * const router = new KvRouter({ blockSize: 16, replicas: { nats: { servers } } });
 * await warmStart(router, { peer: 'http://replica-0:8000' });
 * router.subscribe(workers); // each stream resumes after the peer's snapshot
 * ```
 * @throws {KvRouteError} (as a rejection) `ERR_INVALID_ARG` for bad options, an unreachable peer or store, a missing snapshot or another block size; `ERR_INVALID_EVENT` for a malformed document (nothing applied), which includes one that, anywhere, repeats a key in an object, escapes half a surrogate pair, writes a number beyond a double's range or nests deeper than 512 levels.
 * @group Replicas
 */
export async function warmStart(target: KvIndex | KvRouter, opts: WarmStartOptions): Promise<WarmStartResult> {
  const index = target instanceof KvRouter ? target.index : target;
  if (!(index instanceof KvIndex))
    throw new KvRouteError('ERR_INVALID_ARG', `warmStart needs a KvIndex or a KvRouter, got ${describe(target)}`);
  const o = checkOptions(opts, 'opts', ['peer', 'snapshot', 'model', 'headers', 'tls', 'timeoutMs']);
  if ((o.peer === undefined) === (o.snapshot === undefined))
    throw new KvRouteError('ERR_INVALID_ARG', 'opts needs exactly one of peer and snapshot');
  if (o.peer !== undefined && (typeof o.peer !== 'string' || !/^https?:\/\//.test(o.peer)))
    throw new KvRouteError('ERR_INVALID_ARG', `opts.peer must be an http(s) URL, got ${describe(o.peer)}`);
  if (o.model !== undefined && typeof o.model !== 'string')
    throw new KvRouteError('ERR_INVALID_ARG', `opts.model must be a string, got ${describe(o.model)}`);
  const headers = o.headers ?? {};
  if (
    typeof headers !== 'object' ||
    headers === null ||
    Array.isArray(headers) ||
    Object.values(headers).some((v) => typeof v !== 'string')
  )
    throw new KvRouteError('ERR_INVALID_ARG', `opts.headers must be an object of header names to strings, got ${describe(o.headers)}`);
  if (o.tls !== undefined && o.peer === undefined)
    throw new KvRouteError('ERR_INVALID_ARG', "opts.tls is the peer request's: a snapshot store takes its own (opts.snapshot.tls)");
  const tls = o.tls === undefined ? undefined : resolveTlsFiles(o.tls, 'opts.tls');
  const timeoutMs = positiveNumber(o.timeoutMs, 'opts.timeoutMs', 30_000);
  const text =
    o.peer !== undefined
      ? await readPeer(o.peer as string, headers as Record<string, string>, tls, timeoutMs)
      : await readSnapshot(o.snapshot, timeoutMs);
  // The native backend parses the document in Rust on libuv's thread pool (a million-block
  // snapshot: about half a second, off the JavaScript thread); the JS backend in TypeScript on the
  // JavaScript thread (about 2 s), to the same rules.
  const model = o.model as string | undefined;
  let snap = await index.applySnapshotText(text, model);
  if (snap === undefined) {
    const parsed = parseSnapshot(text, index.blockSize, model);
    index.applyEvents(parsed.events as never);
    snap = { events: parsed.events.length, cacheOwnerEvents: 0, engineSeqs: parsed.engineSeqs };
  }
  await index.flush();
  recordResumeSeqs(index, snap.engineSeqs);
  const stats = index.stats();
  return {
    from: o.peer !== undefined ? 'peer' : 'snapshot',
    bytes: Buffer.byteLength(text),
    events: snap.events,
    blocks: stats.blocks,
    lowerTierBlocks: Object.values(stats.lowerTiers).reduce((sum, t) => sum + t.blocks, 0),
    resumableRanks: snap.engineSeqs.length,
  };
}
