/**
 * `EngineSource`: one engine worker's KV-event stream (every dp rank) feeding a {@link KvIndex}.
 * With the native backend the sockets, decoding, hashing and applying run on a Rust thread, so
 * the JavaScript thread is never involved per batch; state changes reach JavaScript by a poll
 * every 50 ms (an unref'd timer that never keeps the process alive).
 * @module
 */

import { EventEmitter } from 'node:events';
import type { IngestBackend, RawStateChange, SourceBackend } from '../backend-types.js';
import { checkListener } from '../validate.js';
import { toRankSourceStats } from './stats.js';
import type { EngineName, SourceState, SourceStateChange, SourceStats } from './types.js';

/** How often state changes are collected from the backend (ms). */
export const STATE_POLL_MS = 50;

/** Only the two events a source emits, and a function to call. */
const EVENTS = ['state', 'close'] as const;

/**
 * A running subscription to one engine worker. Emits `'state'` with a {@link SourceStateChange}
 * whenever a rank changes state (or restarts), and is async-iterable over the same changes.
 *
 * @example
 * ```ts
 * const src = index.subscribe({ workerId: 7, endpoint: 'tcp://10.0.0.7:5557', replayEndpoint: 'tcp://10.0.0.7:5558' });
 * src.on('state', (c) => console.log(`worker ${c.workerId} rank ${c.dpRank}: ${c.state} (${c.reason})`));
 * ```
 * @group Engine events
 */
export class EngineSource {
  /** The worker whose events this source applies. */
  readonly workerId: bigint;
  /** The engine option it was created with. */
  readonly engine: EngineName;
  private readonly timer: NodeJS.Timeout;
  private closedFlag = false;
  private readonly waiters: ((r: IteratorResult<SourceStateChange>) => void)[] = [];
  private readonly buffered: SourceStateChange[] = [];
  private iterating = false;
  private readonly emitter = new EventEmitter();

  /** @internal */
  constructor(
    workerId: bigint,
    engine: EngineName,
    private readonly inner: SourceBackend,
    private readonly ingest: IngestBackend,
    private readonly onClose: (source: EngineSource) => void,
  ) {
    this.workerId = workerId;
    this.engine = engine;
    this.timer = setInterval(() => this.collect(), STATE_POLL_MS);
    this.timer.unref();
  }

  /**
   * Listens to state changes (`'state'`, with a {@link SourceStateChange}) or to the close
   * (`'close'`). Listeners run on the JavaScript thread, within about 50 ms.
   * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument (unknown event name, listener not a function).
   */
  on(event: 'state', listener: (change: SourceStateChange) => void): this;
  on(event: 'close', listener: () => void): this;
  on(event: 'state' | 'close', listener: (change: SourceStateChange) => void): this {
    checkListener(event, listener, EVENTS);
    this.emitter.on(event, listener);
    return this;
  }

  /**
   * Removes a listener added with {@link EngineSource.on}.
   * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument (unknown event name, listener not a function).
   */
  off(event: 'state' | 'close', listener: (change: SourceStateChange) => void): this {
    checkListener(event, listener, EVENTS);
    this.emitter.off(event, listener);
    return this;
  }

  /** Each dp rank's state, in rank order. */
  get state(): SourceState[] {
    if (this.closedFlag) return [];
    return this.inner.status().map((s) => s.state as SourceState);
  }

  /** True once {@link EngineSource.close} ran (or the worker was removed). */
  get closed(): boolean {
    return this.closedFlag;
  }

  /**
   * Per rank: state, sequence cursors, gaps, replays, restarts, and everything ingestion counted.
   * @throws nothing (after `close()` it reports the final figures).
   */
  stats(): SourceStats {
    const ranks = this.closedFlag ? [] : this.inner.status();
    return {
      workerId: this.workerId,
      engine: this.engine,
      ranks: ranks.map((s) => toRankSourceStats(s, this.ingest.counters(this.workerId, s.dpRank))),
    };
  }

  private collect(): void {
    if (this.closedFlag) return;
    for (const c of this.inner.takeChanges()) this.deliver(c);
  }

  private deliver(raw: RawStateChange): void {
    const change: SourceStateChange = {
      workerId: this.workerId,
      dpRank: raw.dpRank,
      state: raw.state as SourceState,
      reason: raw.reason,
      at: raw.atMs,
    };
    this.emitter.emit('state', change);
    if (!this.iterating) return;
    const waiter = this.waiters.shift();
    if (waiter) waiter({ value: change, done: false });
    else this.buffered.push(change);
  }

  /** State changes until the source closes. */
  [Symbol.asyncIterator](): AsyncIterator<SourceStateChange> {
    this.iterating = true;
    return {
      next: () => {
        const value = this.buffered.shift();
        if (value) return Promise.resolve({ value, done: false });
        if (this.closedFlag) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => this.waiters.push(resolve));
      },
      return: () => {
        this.iterating = false;
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }

  /**
   * Stops the sockets (natively, the thread returns within ~20 ms). Idempotent. Blocks already
   * applied stay in the index; call `removeWorker` to drop them too.
   * @throws nothing; calling it again does nothing.
   */
  close(): void {
    if (this.closedFlag) return;
    this.collect();
    this.closedFlag = true;
    clearInterval(this.timer);
    this.inner.close();
    this.onClose(this);
    for (const w of this.waiters.splice(0)) w({ value: undefined, done: true });
    this.emitter.emit('close');
  }
}
