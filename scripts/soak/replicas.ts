/**
 * The soak's gateways: one, or router replicas sharing their load over a real nats-server, each
 * through a TCP proxy of its own so that one replica can be partitioned from the others (its
 * link stalls, its peers stop hearing it and must drop its load when its lease runs out), crash
 * (partitioned, then closed: its goodbye never reaches them) or restart cleanly.
 */

import { NatsServer } from '../../test/helpers/nats-server.js';
import { TcpProxy } from '../../test/helpers/tcp-proxy.js';
import { createGateway, type Gateway, type GatewayOptions } from '../../ts/index.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The replicas' sync timing: short, so that a soak of minutes sees many leases run out and states repair. */
const SYNC = { heartbeatMs: 250, leaseMs: 1500, resyncMs: 5000 };

export interface Replica {
  /** Its replica id (a restarted replica gets a new one, as a new pod would). */
  id: string;
  gateway: Gateway;
  url: string;
  /** Its connection to NATS, when there are peers. */
  link: TcpProxy | undefined;
}

export class Replicas {
  private readonly nats = new NatsServer();
  /** The replicas clients may send to, by slot. */
  readonly live: Replica[] = [];
  private started = 0;

  /** `options`: every gateway's options but its replica sync. */
  constructor(
    private readonly count: number,
    private readonly options: GatewayOptions,
  ) {}

  get shared(): boolean {
    return this.count > 1;
  }

  /** Sync timing, for how long the end of the soak waits for the replicas to agree. */
  get leaseMs(): number {
    return SYNC.leaseMs;
  }

  async start(): Promise<void> {
    if (this.shared) await this.nats.start();
    for (let slot = 0; slot < this.count; slot++) this.live.push(await this.startOne(slot));
  }

  /** A live replica, at random. */
  pick(random: (n: number) => number): Replica {
    return this.live[random(this.live.length)];
  }

  /** Stalls replica `slot`'s link to NATS for `ms`, then resets it (the client reconnects). */
  async partition(slot: number, ms: number): Promise<void> {
    const link = this.live[slot].link as TcpProxy;
    link.stall();
    await sleep(ms);
    link.heal();
  }

  /**
   * Replaces replica `slot` with a new one under a new id. `crash`: its link stalls first, so its
   * frees and goodbye are lost and its peers must drop its load at its lease's end; otherwise it
   * says goodbye. Either way its requests in flight finish (its clients are sent elsewhere first).
   */
  async restart(slot: number, crash: boolean): Promise<void> {
    const old = this.live[slot];
    this.live[slot] = await this.startOne(slot);
    if (crash) old.link?.stall();
    await old.gateway.close();
    await old.link?.cut();
  }

  /** Stops NATS for `ms` (an outage: every replica routes on its own load meanwhile), then starts it on its port. */
  async natsOutage(ms: number): Promise<void> {
    await this.nats.stop();
    await sleep(ms);
    await this.nats.start();
  }

  async close(): Promise<void> {
    for (const r of this.live.splice(0)) {
      await r.gateway.close({ now: true });
      await r.link?.cut();
    }
    await this.nats.dispose();
  }

  private async startOne(slot: number): Promise<Replica> {
    const id = `gw-${slot + 1}.${++this.started}`;
    let link: TcpProxy | undefined;
    if (this.shared) {
      link = new TcpProxy(this.nats.port, false);
      await link.open();
    }
    const gateway = createGateway({
      ...this.options,
      // A client that picked this replica just before it was replaced is still served, as behind
      // a load balancer that hears of a pod's end late.
      shutdown: { delayMs: 500 },
      router: {
        ...this.options.router,
        ...(link
          ? { replicas: { nats: { servers: `nats://127.0.0.1:${link.port}`, subject: 'kvroute.soak' }, replicaId: id, ...SYNC } }
          : {}),
      },
    });
    const { url } = await gateway.listen();
    return { id, gateway, url, link };
  }
}
