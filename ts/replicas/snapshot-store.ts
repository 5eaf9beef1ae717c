/**
 * Index snapshots in a NATS JetStream object store: {@link IndexSnapshotWriter} stores the index
 * every so many seconds or applied events, so a replica can warm-start even when no peer is up
 * (see {@link warmStart}). One object per fleet, replaced on each write; the store keeps the
 * latest revision only.
 */

import { EventEmitter } from 'node:events';
import { type ObjectStore, Objm } from '@nats-io/obj';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { KvRouteError } from '../errors.js';
import { KvIndex } from '../kv-index.js';
import { KvRouter } from '../router/kv-router.js';
import { checkListener, checkOptions, describe, positiveNumber } from '../validate.js';

const WRITER_EVENTS = ['written', 'failed'] as const;

import { type NatsAuth, natsConnectOptions } from './nats-transport.js';
import { type NatsTlsOptions, resolveNatsAuth } from './options.js';
import { snapshotText } from './snapshot.js';

/**
 * Where snapshots live.
 * @group Replicas
 */
export interface SnapshotStoreOptions {
  /** NATS server URL(s); the server needs JetStream (`nats-server -js`). */
  servers: string | string[];
  /** Object store bucket. Default `kvroute-index`. */
  bucket?: string;
  /** Object name; replicas of one fleet share it. Default `index`. */
  name?: string;
  /** Token authentication. */
  token?: string;
  /** User authentication (with `pass`). */
  user?: string;
  /** The password of `user`. */
  pass?: string;
  /** Path of a NATS `.creds` file. */
  credentials?: string;
  /** TLS of the connection (see {@link NatsTlsOptions}). */
  tls?: NatsTlsOptions;
}

/** @internal */
export interface ResolvedSnapshotStore extends NatsAuth {
  bucket: string;
  name: string;
}

/** @internal */
export function resolveSnapshotStore(value: unknown, where: string): ResolvedSnapshotStore {
  const o = checkOptions(value, where, ['servers', 'bucket', 'name', 'token', 'user', 'pass', 'credentials', 'tls']);
  /** JetStream's rules: bucket names without dots; object names may have them. */
  const text = (k: 'bucket' | 'name', fallback: string): string => {
    const v = o[k] ?? fallback;
    const pattern = k === 'bucket' ? /^[A-Za-z0-9_-]+$/ : /^[A-Za-z0-9_.-]+$/;
    if (typeof v !== 'string' || !pattern.test(v))
      throw new KvRouteError(
        'ERR_INVALID_ARG',
        `${where}.${k} must be a name of letters, digits, '_', '-'${k === 'name' ? " or '.'" : ''}, got ${describe(v)}`,
      );
    return v;
  };
  return { ...resolveNatsAuth(o, where), bucket: text('bucket', 'kvroute-index'), name: text('name', 'index') };
}

/**
 * Options of {@link IndexSnapshotWriter}.
 * @group Replicas
 */
export interface SnapshotWriterOptions extends SnapshotStoreOptions {
  /** Write at least this often (ms). Default 30000. */
  everyMs?: number;
  /** Also write once this many events were applied since the last write. Default: time only. */
  everyEvents?: number;
  /** The model named in the document (Dynamo's dump key `<model>:default`). Default `kvroute`. */
  model?: string;
}

/**
 * What the writer reports.
 * @group Replicas
 */
export interface SnapshotWriterStats {
  /** Snapshots stored. */
  writes: number;
  /** Writes that failed (NATS unreachable, no JetStream, …); retried at the next period. */
  failures: number;
  /** The last failure's message, until a write succeeds again. */
  lastError: string | null;
  /** Size of the last snapshot stored. */
  lastBytes: number;
  /** Wall-clock time of the last successful write (ms since the epoch), or null. */
  lastWriteAt: number | null;
}

/**
 * Writes the index to the object store periodically. Errors (NATS down, no JetStream) are counted
 * and retried at the next period; they never reach the router. `on('failed')` hears each one
 * (the gateway logs them), `on('written')` each stored snapshot.
 * @group Replicas
 */
export class IndexSnapshotWriter {
  private readonly emitter = new EventEmitter();
  private readonly index: KvIndex;
  private readonly store: ResolvedSnapshotStore;
  private readonly everyMs: number;
  private readonly everyEvents: number | undefined;
  private readonly model: string;
  private nc: NatsConnection | undefined;
  private os: ObjectStore | undefined;
  private timer: NodeJS.Timeout | undefined;
  private lastAt = Date.now();
  private lastEvents = 0;
  private writing: Promise<void> | undefined;
  private closed = false;
  private readonly counts: SnapshotWriterStats = { writes: 0, failures: 0, lastError: null, lastBytes: 0, lastWriteAt: null };

  /** @throws {KvRouteError} `ERR_INVALID_ARG` for bad options. */
  constructor(target: KvIndex | KvRouter, opts: SnapshotWriterOptions) {
    this.index = target instanceof KvRouter ? target.index : target;
    if (!(this.index instanceof KvIndex))
      throw new KvRouteError('ERR_INVALID_ARG', `IndexSnapshotWriter needs a KvIndex or a KvRouter, got ${describe(target)}`);
    const { everyMs, everyEvents, model, ...store } = checkOptions(opts, 'opts', [
      'servers',
      'bucket',
      'name',
      'token',
      'user',
      'pass',
      'credentials',
      'tls',
      'everyMs',
      'everyEvents',
      'model',
    ]);
    this.store = resolveSnapshotStore(store, 'opts');
    this.everyMs = positiveNumber(everyMs, 'opts.everyMs', 30_000);
    this.everyEvents = everyEvents === undefined ? undefined : positiveNumber(everyEvents, 'opts.everyEvents', 1);
    if (model !== undefined && typeof model !== 'string')
      throw new KvRouteError('ERR_INVALID_ARG', `opts.model must be a string, got ${describe(model)}`);
    this.model = (model as string | undefined) ?? 'kvroute';
    // Checked often enough for `everyEvents`; cheap when nothing is due.
    this.timer = setInterval(() => this.maybeWrite(), Math.min(this.everyMs, 1000));
    this.timer.unref();
  }

  private appliedEvents(): number {
    const e = this.index.stats().events;
    return e.stored + e.removed + e.cleared;
  }

  private maybeWrite(): void {
    if (this.writing || this.closed) return;
    const due =
      Date.now() - this.lastAt >= this.everyMs ||
      (this.everyEvents !== undefined && this.appliedEvents() - this.lastEvents >= this.everyEvents);
    if (due) void this.write().catch(() => {});
  }

  private async objectStore(): Promise<ObjectStore> {
    if (this.os && this.nc && !this.nc.isClosed()) return this.os;
    this.nc = await connect(natsConnectOptions(this.store, 'opts'));
    this.os = await new Objm(this.nc).create(this.store.bucket);
    return this.os;
  }

  /**
   * Writes a snapshot now; resolves when stored.
   * @throws {KvRouteError} (as a rejection) `ERR_INTERNAL` naming the NATS error; `ERR_CLOSED` after close.
   */
  write(): Promise<void> {
    if (this.closed) return Promise.reject(new KvRouteError('ERR_CLOSED', 'this IndexSnapshotWriter is closed'));
    this.writing ??= this.doWrite().finally(() => {
      this.writing = undefined;
    });
    return this.writing;
  }

  private async doWrite(): Promise<void> {
    this.lastAt = Date.now();
    const events = this.appliedEvents();
    try {
      const text = await snapshotText(this.index, this.model);
      const data = new TextEncoder().encode(text);
      await (await this.objectStore()).putBlob({ name: this.store.name }, data);
      this.lastEvents = events;
      this.counts.writes++;
      this.counts.lastBytes = data.byteLength;
      this.counts.lastWriteAt = Date.now();
      this.counts.lastError = null;
    } catch (err) {
      this.counts.failures++;
      this.counts.lastError = (err as Error).message;
      const failure = new KvRouteError('ERR_INTERNAL', `snapshot write failed: ${(err as Error).message}`, { cause: err });
      this.notify('failed', failure);
      throw failure;
    }
    this.notify('written', this.stats());
  }

  /** Calls the listeners of `event`; one that throws is its own business, not the write's. */
  private notify(event: 'written' | 'failed', value: unknown): void {
    for (const listener of this.emitter.listeners(event)) {
      try {
        (listener as (v: unknown) => void)(value);
      } catch {
        // The snapshot was stored (or failed) regardless of what a listener did with the news.
      }
    }
  }

  /**
   * Listens to each stored snapshot (`'written'`, with the stats after it) or each failed write
   * (`'failed'`, with the `ERR_INTERNAL` error that `write()` rejects with). Listeners run on the
   * JavaScript thread; one that throws does not stop the writer.
   * @throws {KvRouteError} `ERR_INVALID_ARG` for an unknown event name or a listener that is not a function.
   */
  on(event: 'written', listener: (stats: SnapshotWriterStats) => void): this;
  on(event: 'failed', listener: (error: KvRouteError) => void): this;
  on(event: 'written' | 'failed', listener: (value: never) => void): this {
    checkListener(event, listener, WRITER_EVENTS);
    this.emitter.on(event, listener as (value: unknown) => void);
    return this;
  }

  /**
   * Removes a listener added with {@link IndexSnapshotWriter.on}.
   * @throws {KvRouteError} `ERR_INVALID_ARG` for an unknown event name or a listener that is not a function.
   */
  off(event: 'written' | 'failed', listener: (value: never) => void): this {
    checkListener(event, listener, WRITER_EVENTS);
    this.emitter.off(event, listener as (value: unknown) => void);
    return this;
  }

  /** What was written and what failed. */
  stats(): SnapshotWriterStats {
    return { ...this.counts };
  }

  /** Stops writing (a write in progress finishes first) and closes the connection. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    await this.writing?.catch(() => {});
    await this.nc?.close();
  }
}
