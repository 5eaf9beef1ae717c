/**
 * How replicas reach each other: the narrow interface the load sync needs (publish bytes, receive
 * everyone's bytes, hear about connectivity), so the sync logic is the same over NATS and over the
 * in-process bus that `kvroute replay` uses to simulate replicas.
 */

import { KvRouteError } from '../errors.js';
import { checkOptions, describe } from '../validate.js';

/**
 * Callbacks a transport drives.
 * @group Replicas
 */
export interface ReplicaTransportHandlers {
  /** One message published by a replica (a transport may also echo this replica's own). */
  onMessage(data: Uint8Array): void;
  /** Connectivity changed: `true` once connected (and after every reconnect), `false` when lost. */
  onStatus(connected: boolean): void;
}

/**
 * A best-effort broadcast channel between the replicas of one fleet.
 * @group Replicas
 */
export interface ReplicaTransport {
  /** Starts delivering; called once by the router. */
  start(handlers: ReplicaTransportHandlers): void;
  /** Broadcasts one message. May throw while disconnected (the sync counts it and resyncs later). */
  publish(data: Uint8Array): void;
  /** Stops delivering and releases the connection; published messages are flushed first when possible. */
  close(): Promise<void>;
  /**
   * Deliver each change as it happens instead of batching it to the end of the event-loop turn:
   * for an in-process bus, where a message costs nothing and a simulation never yields. Default false.
   */
  readonly synchronous?: boolean;
}

/**
 * Options of a {@link ReplicaBus}.
 * @group Replicas
 */
export interface ReplicaBusOptions {
  /**
   * Each message reaches the other members this long after it is published, on `now`'s clock,
   * when {@link ReplicaBus.deliverDue} is called at or after that time. Default 0: at once, inside
   * `publish`.
   */
  delayMs?: number;
  /** The clock of `delayMs` (a simulation's). Required with a delay. */
  now?: () => number;
}

interface InTransit {
  at: number;
  from: BusTransport;
  data: Uint8Array;
}

/**
 * An in-process broadcast bus: every transport it hands out receives what the others publish, in
 * order; at once, or after `delayMs` of a simulated clock. `kvroute replay --replica-sync on` uses
 * it to model replicas whose sync takes no time, or a NATS round trip
 * (`--replica-sync-delay-ms`); tests can cut a transport off to model a partition.
 * @group Replicas
 */
export class ReplicaBus {
  private readonly members = new Set<BusTransport>();
  private readonly delayMs: number;
  private readonly now: (() => number) | undefined;
  /** Messages on their way, in publishing order (one delay for all: also delivery order). */
  private inTransit: InTransit[] = [];
  private head = 0;

  /** @throws {KvRouteError} `ERR_INVALID_ARG` for bad options: a bad delay, or a delay without `now`. */
  constructor(options?: ReplicaBusOptions) {
    const opts = checkOptions(options, 'opts', ['delayMs', 'now']) as ReplicaBusOptions;
    const delay = opts.delayMs ?? 0;
    if (typeof delay !== 'number' || !Number.isFinite(delay) || delay < 0)
      throw new KvRouteError('ERR_INVALID_ARG', `opts.delayMs must be a finite number of ms >= 0, got ${describe(delay)}`);
    if (opts.now !== undefined && typeof opts.now !== 'function')
      throw new KvRouteError('ERR_INVALID_ARG', `opts.now must be a function, got ${describe(opts.now)}`);
    if (delay > 0 && typeof opts.now !== 'function')
      throw new KvRouteError('ERR_INVALID_ARG', 'opts.now must be a function returning the clock of opts.delayMs');
    this.delayMs = delay;
    this.now = opts.now;
  }

  /** A new transport on this bus. */
  transport(): ReplicaTransport {
    return new BusTransport(this.members, (from, data) => this.send(from, data));
  }

  /** Messages published and not delivered yet. */
  pending(): number {
    return this.inTransit.length - this.head;
  }

  /** Delivers every message whose delay has passed by `now()`; returns how many. */
  deliverDue(): number {
    if (this.pending() === 0) return 0;
    const now = (this.now as () => number)();
    let n = 0;
    while (this.head < this.inTransit.length && this.inTransit[this.head].at <= now) {
      const m = this.inTransit[this.head++];
      this.broadcast(m.from, m.data);
      n++;
    }
    if (this.head === this.inTransit.length) {
      this.inTransit = [];
      this.head = 0;
    }
    return n;
  }

  private send(from: BusTransport, data: Uint8Array): void {
    if (this.delayMs === 0) this.broadcast(from, data);
    else this.inTransit.push({ at: (this.now as () => number)() + this.delayMs, from, data });
  }

  private broadcast(from: BusTransport, data: Uint8Array): void {
    for (const m of this.members) if (m !== from) m.receive(data);
  }
}

class BusTransport implements ReplicaTransport {
  private handlers: ReplicaTransportHandlers | undefined;
  readonly synchronous = true;

  constructor(
    private readonly members: Set<BusTransport>,
    private readonly send: (from: BusTransport, data: Uint8Array) => void,
  ) {}

  start(handlers: ReplicaTransportHandlers): void {
    this.handlers = handlers;
    this.members.add(this);
    handlers.onStatus(true);
  }

  publish(data: Uint8Array): void {
    this.send(this, data);
  }

  receive(data: Uint8Array): void {
    this.handlers?.onMessage(data);
  }

  async close(): Promise<void> {
    this.members.delete(this);
  }
}
