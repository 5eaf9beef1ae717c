/**
 * `ReplicaSync`: one router replica's half of the load sync. It publishes this replica's bookings,
 * prefill completions and frees (batched, off the routing path: `route()` only appends to a
 * queue), heartbeats and full states, and applies its peers' through {@link PeerLoad}.
 *
 * Guarantees (README "Router replicas"):
 * - NATS down: every replica routes on local load plus what it still holds of its peers, which
 *   lapses within the lease; it never blocks. `outages` counts the losses; on reconnect it asks
 *   its peers for their state and publishes its own.
 * - A replica crashes: its peers drop its load within `leaseMs`.
 * - Partition: each side sees the other's load lapse, as for a crash, and converges on heal.
 * - Clock skew: nothing on the wire is a time; leases run on each receiver's own clock.
 *
 * With session affinity, bindings travel too (`sessions` messages, batched like the changes). A
 * replica that joins or reconnects gets every peer's table of live bindings. A lost update is
 * repaired by the binding's next one (a request of the session starting or ending, or a binding
 * in use published again each half TTL); bindings settle by their stamps, whatever the order.
 * Session messages carry the sequence number of the sender's last other message, so they never
 * look like a gap to any peer.
 */

import { randomInt } from 'node:crypto';
import { NatsTransport } from './nats-transport.js';
import type { ResolvedReplicaOptions } from './options.js';
import { type LoadLedger, type PeerCounters, PeerLoad } from './peer-load.js';
import type { ReplicaTransport } from './transport.js';
import {
  bookingBytes,
  decodeMessage,
  encodeMessage,
  sessionBytes,
  type WireBody,
  type WireBooking,
  type WireOp,
  type WireSession,
} from './wire.js';

/** A state message carries at most about this many bytes (NATS's default payload limit is 1 MiB). */
const STATE_CHUNK_BYTES = 256 * 1024;

/**
 * What `KvRouter.stats().replicas` reports.
 * @group Replicas
 */
export interface ReplicaStats extends PeerCounters {
  /** This replica's id. */
  replicaId: string;
  /** Connected to the transport now. */
  connected: boolean;
  /** Peers heard from within the lease. */
  peers: number;
  /** Peers' bookings counted in this replica's load: one per request, one per prompt of a request with `batchPrompts`. */
  remoteInFlight: number;
  /** Times the connection was lost (each replica then routes on local load until it returns). */
  outages: number;
  /** Sync messages published (batches of changes, heartbeats, states). */
  messagesPublished: number;
  /** Their bytes. */
  bytesPublished: number;
  /** Publishes that failed (disconnected); what they carried is repaired by the next state. */
  publishErrors: number;
  /** Sync messages received from peers. */
  messagesReceived: number;
  /** Their bytes. */
  bytesReceived: number;
  /** Messages that did not decode (nothing of them applied). */
  messagesRejected: number;
  /** Full states published (on join, reconnect, request and every `resyncMs`). */
  statesPublished: number;
  /** Session bindings published (made, used or gone idle here, or in a table for a joining peer). */
  sessionUpdatesPublished: number;
  /** Peers' session bindings received (see `KvRouter.stats().sessions` for what became of them). */
  sessionUpdatesReceived: number;
}

/** Session affinity's side of the sync (see session-affinity.ts). @internal */
export interface SessionLedger {
  /** Every live binding, for a peer that joins. */
  table(): WireSession[];
  /** Peers' bindings. */
  merge(updates: readonly WireSession[]): void;
  /** The bindings of these sessions as they are now (a session no longer bound is left out). */
  current(sessionIds: Iterable<string>): WireSession[];
  /** Sessions bound and in use here that the peers have not heard of for a while (published each heartbeat). */
  renew(): string[];
}

interface OwnBooking {
  booking: WireBooking;
}

/** Splits `items` into parts of about `STATE_CHUNK_BYTES` (one part, maybe empty, at least; an item larger than that is a part of its own). */
function partsOf<T>(items: readonly T[], bytesOf: (item: T) => number): T[][] {
  const parts: T[][] = [[]];
  let bytes = 0;
  for (const item of items) {
    const size = bytesOf(item);
    if (bytes + size > STATE_CHUNK_BYTES && parts[parts.length - 1].length > 0) {
      parts.push([]);
      bytes = 0;
    }
    parts[parts.length - 1].push(item);
    bytes += size;
  }
  return parts;
}

/** The estimated encoded size of a change. */
function opBytes(op: WireOp): number {
  return op.op === 'book' ? bookingBytes(op.booking) : 16;
}

/** @internal */
export class ReplicaSync {
  private readonly transport: ReplicaTransport;
  private readonly peers: PeerLoad;
  /** This process's instance of the replica id: a restarted replica is a new peer. */
  private readonly instance = randomInt(0, 0xffff_ffff);
  private seq = 0;
  private readonly own = new Map<number, OwnBooking>();
  private outbox: WireOp[] = [];
  /** Sessions whose binding changed since the last flush: published as they are at the flush. */
  private readonly sessionOutbox = new Set<string>();
  private lastTableAt = Number.NEGATIVE_INFINITY;
  private tableTimer: NodeJS.Timeout | undefined;
  private flushScheduled: NodeJS.Immediate | NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private lastStateAt = Number.NEGATIVE_INFINITY;
  private connected = false;
  private closed = false;
  private readyResolve: (() => void) | undefined;
  /** Resolves once connected and announced to the peers. */
  readonly ready: Promise<void>;
  private readonly counts = {
    outages: 0,
    messagesPublished: 0,
    bytesPublished: 0,
    publishErrors: 0,
    messagesReceived: 0,
    bytesReceived: 0,
    messagesRejected: 0,
    statesPublished: 0,
    sessionUpdatesPublished: 0,
    sessionUpdatesReceived: 0,
  };

  constructor(
    private readonly opts: ResolvedReplicaOptions,
    ledger: LoadLedger,
    renewEveryMs: number,
    private readonly onLoadDropped: () => void,
    /** Session affinity's bindings, shared with the peers (before the transport starts: a bus delivers at once). */
    private readonly sessions?: SessionLedger,
  ) {
    this.transport = opts.transport ?? new NatsTransport(opts.nats as NonNullable<ResolvedReplicaOptions['nats']>);
    this.peers = new PeerLoad(ledger, opts.leaseMs, renewEveryMs, (replicaId, instance) =>
      this.send({ kind: 'join', target: { replicaId, instance } }),
    );
    this.ready = new Promise((resolve) => {
      this.readyResolve = resolve;
    });
    this.transport.start({ onMessage: (d) => this.receive(d), onStatus: (c) => this.status(c) });
    this.heartbeat = setInterval(() => this.tick(), opts.heartbeatMs);
    this.heartbeat.unref();
  }

  get replicaId(): string {
    return this.opts.replicaId;
  }

  /** A session's binding was made, used or went idle here. */
  sessionChanged(sessionId: string): void {
    this.sessionOutbox.add(sessionId);
    this.schedule();
  }

  /** Whether a router handle is a peer's booking. */
  owns(handle: number): boolean {
    return this.peers.owns(handle);
  }

  // ---- this replica's changes ----------------------------------------------------------------

  booked(b: WireBooking): void {
    this.own.set(b.key, { booking: b });
    this.queue({ op: 'book', booking: b });
  }

  prefilled(key: number): void {
    const own = this.own.get(key);
    if (!own || own.booking.prefillTokens === 0) return;
    own.booking = { ...own.booking, prefillTokens: 0 };
    this.queue({ op: 'prefill', key });
  }

  /** A request of this replica ended (or a peer's booking was dropped locally). */
  freed(handle: number): void {
    if (this.own.delete(handle)) this.queue({ op: 'free', key: handle });
    else this.peers.dropped(handle);
  }

  private queue(op: WireOp): void {
    this.outbox.push(op);
    this.schedule();
  }

  private schedule(): void {
    if (this.transport.synchronous) {
      this.flush();
      return;
    }
    if (this.flushScheduled || this.closed) return;
    this.flushScheduled = this.opts.batchMs > 0 ? setTimeout(() => this.flush(), this.opts.batchMs) : setImmediate(() => this.flush());
  }

  /**
   * Publishes the queued changes, in messages of about `STATE_CHUNK_BYTES` (a burst of long
   * prompts' bookings, or a batch's, would pass NATS's payload limit in one), each with its own
   * sequence number, in order.
   */
  flush(): void {
    this.flushScheduled = undefined;
    if (this.outbox.length > 0) {
      const ops = this.outbox;
      this.outbox = [];
      for (const part of partsOf(ops, opBytes)) this.send({ kind: 'ops', ops: part });
    }
    if (this.sessionOutbox.size > 0 && this.sessions) {
      const sessions = this.sessions.current(this.sessionOutbox);
      this.sessionOutbox.clear();
      this.sendSessions(sessions);
    }
  }

  /** Publishes session bindings in parts of about `STATE_CHUNK_BYTES`, without a sequence number of their own. */
  private sendSessions(sessions: WireSession[]): void {
    if (sessions.length === 0) return;
    for (const part of partsOf(sessions, sessionBytes)) {
      if (this.send({ kind: 'sessions', sessions: part }, this.seq)) this.counts.sessionUpdatesPublished += part.length;
    }
  }

  /** Publishes one message; false when it was lost (disconnected). */
  private send(body: WireBody, seq?: number): boolean {
    if (!this.connected) {
      // Lost anyway: the state (and session table) published on reconnect carries it.
      if (body.kind === 'ops' || body.kind === 'sessions') this.counts.publishErrors++;
      return false;
    }
    const data = encodeMessage({ replicaId: this.opts.replicaId, instance: this.instance, seq: seq ?? ++this.seq, ...body });
    try {
      this.transport.publish(data);
      this.counts.messagesPublished++;
      this.counts.bytesPublished += data.byteLength;
      return true;
    } catch {
      this.counts.publishErrors++;
      return false;
    }
  }

  /**
   * Publishes this replica's live session bindings for peers that joined. At most once per
   * heartbeat: a fleet that reconnects at once sends many joins, and the joins of one window are
   * answered by one table at its end.
   */
  private publishSessionTable(): void {
    if (!this.sessions || this.tableTimer || this.closed) return;
    const wait = this.lastTableAt + this.opts.heartbeatMs - Date.now();
    if (wait > 0) {
      this.tableTimer = setTimeout(() => {
        this.tableTimer = undefined;
        this.publishSessionTable();
      }, wait);
      this.tableTimer.unref();
      return;
    }
    const table = this.sessions.table();
    if (table.length === 0) return;
    this.lastTableAt = Date.now();
    this.sendSessions(table);
  }

  /** Publishes this replica's whole in-flight set, in parts of about `STATE_CHUNK_BYTES`. */
  private publishState(): void {
    this.flush();
    this.lastStateAt = Date.now();
    const chunks = partsOf(
      [...this.own.values()].map((o) => o.booking),
      bookingBytes,
    );
    // All parts share one sequence number: the state is as of that moment.
    const seq = ++this.seq;
    chunks.forEach((bookings, part) => {
      this.send({ kind: 'state', part, parts: chunks.length, bookings }, seq);
    });
    this.counts.statesPublished++;
  }

  // ---- peers' changes ------------------------------------------------------------------------

  private receive(data: Uint8Array): void {
    if (this.closed) return;
    this.counts.messagesReceived++;
    this.counts.bytesReceived += data.byteLength;
    let m: ReturnType<typeof decodeMessage>;
    try {
      m = decodeMessage(data);
    } catch {
      this.counts.messagesRejected++;
      return;
    }
    if (m.replicaId === this.opts.replicaId && m.instance === this.instance) return; // an echo
    const before = this.peers.inFlight;
    this.peers.receive(m);
    if (m.kind === 'sessions') {
      this.counts.sessionUpdatesReceived += m.sessions.length;
      this.sessions?.merge(m.sessions);
    }
    if (m.kind === 'join' && !m.target) this.publishSessionTable();
    if (m.kind === 'join' && (!m.target || (m.target.replicaId === this.opts.replicaId && m.target.instance === this.instance)))
      this.publishState();
    if (this.peers.inFlight < before) this.onLoadDropped();
  }

  private status(connected: boolean): void {
    if (this.closed) return;
    if (!connected) {
      if (this.connected) this.counts.outages++;
      this.connected = false;
      return;
    }
    this.connected = true;
    // Joining (or rejoining after an outage): ask every peer for its state and publish ours.
    this.send({ kind: 'join' });
    this.publishState();
    this.publishSessionTable();
    this.readyResolve?.();
  }

  private tick(): void {
    if (this.closed) return;
    for (const id of this.sessions?.renew() ?? []) this.sessionOutbox.add(id);
    this.flush();
    this.send({ kind: 'heartbeat', inFlight: this.own.size });
    if (Date.now() - this.lastStateAt >= this.opts.resyncMs) this.publishState();
    if (this.peers.sweep() > 0) this.onLoadDropped();
  }

  /** Drops peers whose lease ran out now (the router also sweeps on every heartbeat). */
  sweep(): void {
    if (this.peers.sweep() > 0) this.onLoadDropped();
  }

  stats(): ReplicaStats {
    return {
      replicaId: this.opts.replicaId,
      connected: this.connected,
      peers: this.peers.peerCount,
      remoteInFlight: this.peers.inFlight,
      ...this.counts,
      ...this.peers.counters,
    };
  }

  /** Says goodbye (peers drop this replica's load at once), then closes the transport. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.flush();
    this.send({ kind: 'leave' });
    this.closed = true;
    clearInterval(this.heartbeat);
    clearTimeout(this.tableTimer);
    if (this.flushScheduled) {
      clearTimeout(this.flushScheduled as NodeJS.Timeout);
      clearImmediate(this.flushScheduled as NodeJS.Immediate);
    }
    this.peers.clear();
    await this.transport.close();
  }
}
