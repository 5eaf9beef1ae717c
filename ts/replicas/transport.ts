/**
 * How replicas reach each other: the narrow interface the load sync needs (publish bytes, receive
 * everyone's bytes, hear about connectivity), so the sync logic is the same over NATS and over the
 * in-process bus that `kvroute replay` uses to simulate replicas.
 */

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
 * An in-process broadcast bus: every transport it hands out receives what the others publish,
 * synchronously and in order. `kvroute replay --replica-sync on` uses it to model replicas whose
 * sync is instantaneous; tests can cut a transport off to model a partition.
 * @group Replicas
 */
export class ReplicaBus {
  private readonly members = new Set<BusTransport>();

  /** A new transport on this bus. */
  transport(): ReplicaTransport {
    return new BusTransport(this.members);
  }
}

class BusTransport implements ReplicaTransport {
  private handlers: ReplicaTransportHandlers | undefined;
  readonly synchronous = true;

  constructor(private readonly members: Set<BusTransport>) {}

  start(handlers: ReplicaTransportHandlers): void {
    this.handlers = handlers;
    this.members.add(this);
    handlers.onStatus(true);
  }

  publish(data: Uint8Array): void {
    for (const m of this.members) if (m !== this) m.handlers?.onMessage(data);
  }

  async close(): Promise<void> {
    this.members.delete(this);
  }
}
