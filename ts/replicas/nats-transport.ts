/**
 * The NATS transport of the load sync: one core-NATS subject per fleet, the official
 * `@nats-io/transport-node` client, automatic reconnection. Core NATS is at-most-once, which is
 * what load sync wants: a lost message is repaired by the next full state, never replayed late.
 */

import { readFileSync } from 'node:fs';
import { type ConnectionOptions, connect, credsAuthenticator, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { KvRouteError } from '../errors.js';
import type { NatsTlsOptions, ResolvedReplicaOptions } from './options.js';
import type { ReplicaTransport, ReplicaTransportHandlers } from './transport.js';

type NatsOptions = NonNullable<ResolvedReplicaOptions['nats']>;

/** Authentication and identity of a NATS connection, as the replica and snapshot options give them. */
export interface NatsAuth {
  servers: string[];
  name?: string;
  token?: string;
  user?: string;
  pass?: string;
  credentials?: string;
  tls?: NatsTlsOptions;
}

/**
 * Connection options of the official client: authentication, and reconnection forever once
 * connected (the first connection is retried by the caller where that matters).
 * @internal
 */
export function natsConnectOptions(o: NatsAuth, name: string): ConnectionOptions {
  let authenticator: ConnectionOptions['authenticator'];
  if (o.credentials !== undefined) {
    try {
      authenticator = credsAuthenticator(readFileSync(o.credentials));
    } catch (err) {
      throw new KvRouteError('ERR_INVALID_ARG', `${name}.credentials: cannot read ${o.credentials}`, { cause: err });
    }
  }
  return {
    servers: o.servers,
    ...(o.name !== undefined ? { name: o.name } : {}),
    ...(o.token !== undefined ? { token: o.token } : {}),
    ...(o.user !== undefined ? { user: o.user, pass: o.pass } : {}),
    ...(authenticator ? { authenticator } : {}),
    ...(o.tls !== undefined ? { tls: { ...o.tls } } : {}),
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    timeout: 2000,
    pingInterval: 2000,
  };
}

/** @internal */
export class NatsTransport implements ReplicaTransport {
  private nc: NatsConnection | undefined;
  private sub: Subscription | undefined;
  private closed = false;
  private connecting: Promise<void> | undefined;
  /** Ends the backoff sleep between first-connection attempts (on close). */
  private wake: (() => void) | undefined;

  constructor(private readonly opts: NatsOptions) {}

  start(handlers: ReplicaTransportHandlers): void {
    const options: ConnectionOptions = {
      ...natsConnectOptions(this.opts, 'opts.replicas.nats'),
      // This replica's own messages are not delivered back to it.
      noEcho: true,
    };
    this.connecting = this.run(options, handlers);
  }

  /**
   * Connects, retrying with backoff until connected or closed: a router must start (on local
   * load only) while NATS is down, and join its peers when NATS comes up.
   */
  private async run(options: ConnectionOptions, handlers: ReplicaTransportHandlers): Promise<void> {
    let wait = 100;
    while (!this.closed) {
      try {
        const nc = await connect(options);
        if (this.closed) {
          await nc.close();
          return;
        }
        this.nc = nc;
        this.sub = nc.subscribe(this.opts.subject, {
          callback: (err, msg) => {
            if (!err) handlers.onMessage(msg.data);
          },
        });
        // The subscription is registered once the server has seen it; then peers can be asked.
        await nc.flush();
        handlers.onStatus(true);
        for await (const s of nc.status()) {
          if (s.type === 'disconnect') handlers.onStatus(false);
          else if (s.type === 'reconnect') handlers.onStatus(true);
        }
        return;
      } catch {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, wait);
          this.wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wait = Math.min(2000, wait * 2);
      }
    }
  }

  publish(data: Uint8Array): void {
    if (!this.nc || this.nc.isClosed()) throw new KvRouteError('ERR_CLOSED', 'not connected to NATS');
    this.nc.publish(this.opts.subject, data);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.wake?.();
    const nc = this.nc;
    if (!nc) {
      await this.connecting;
      return;
    }
    this.sub?.unsubscribe();
    try {
      // Flushes what was published (a goodbye message included) before closing.
      await nc.drain();
    } catch {
      await nc.close();
    }
    await this.connecting;
  }
}
