/**
 * The NATS transport of the load sync: one core-NATS subject per fleet, the official
 * `@nats-io/transport-node` client, automatic reconnection. Core NATS is at-most-once, which is
 * what load sync wants: a lost message is repaired by the next full state, never replayed late.
 */

import { readFileSync } from 'node:fs';
import { type ConnectionOptions, connect, credsAuthenticator, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { KvRouteError } from '../errors.js';
import type { ResolvedReplicaOptions } from './options.js';
import type { ReplicaTransport, ReplicaTransportHandlers } from './transport.js';

type NatsOptions = NonNullable<ResolvedReplicaOptions['nats']>;

/** @internal */
export class NatsTransport implements ReplicaTransport {
  private nc: NatsConnection | undefined;
  private sub: Subscription | undefined;
  private closed = false;
  private connecting: Promise<void> | undefined;
  /** Ends the backoff sleep between first-connection attempts (on close). */
  private wake: (() => void) | undefined;

  constructor(private readonly opts: NatsOptions) {}

  private connectOptions(): ConnectionOptions {
    const o = this.opts;
    let authenticator: ConnectionOptions['authenticator'];
    if (o.credentials !== undefined) {
      try {
        authenticator = credsAuthenticator(readFileSync(o.credentials));
      } catch (err) {
        throw new KvRouteError('ERR_INVALID_ARG', `opts.replicas.nats.credentials: cannot read ${o.credentials}`, { cause: err });
      }
    }
    return {
      servers: o.servers,
      name: o.name,
      ...(o.token !== undefined ? { token: o.token } : {}),
      ...(o.user !== undefined ? { user: o.user, pass: o.pass } : {}),
      ...(authenticator ? { authenticator } : {}),
      // This replica's own messages are not delivered back to it.
      noEcho: true,
      // Once connected, reconnect forever (the first connection is retried by `start`).
      maxReconnectAttempts: -1,
      timeout: 2000,
      reconnectTimeWait: 250,
      pingInterval: 2000,
    };
  }

  start(handlers: ReplicaTransportHandlers): void {
    const options = this.connectOptions();
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
