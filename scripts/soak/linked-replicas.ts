/**
 * What both kinds of the soak's replica sets share: a real nats-server, each replica's link to
 * it through a TCP proxy of its own (so that one replica can be partitioned from the others:
 * its link stalls, its peers stop hearing it and must drop its load when its lease runs out),
 * NATS outages, and the replica options that point a gateway at its link and at a live peer to
 * warm-start from.
 */

import { NatsServer } from '../../test/helpers/nats-server.js';
import { TcpProxy } from '../../test/helpers/tcp-proxy.js';
import type { GatewayOptions } from '../../ts/index.js';
import { type SoakReplica, SYNC } from './replica-set.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface LinkedReplica extends SoakReplica {
  /** Its connection to NATS, when there are peers. */
  link: TcpProxy | undefined;
}

/** A new replica's id, its link and the options that make a gateway use them. */
export interface Birth {
  id: string;
  link: TcpProxy | undefined;
  /** Whether it warm-starts from a live peer. */
  warm: boolean;
  options: GatewayOptions;
}

export abstract class LinkedReplicas<R extends LinkedReplica> {
  private readonly nats = new NatsServer();
  readonly live: R[] = [];
  readonly problems: string[] = [];
  readonly warmStarts: number[] = [];
  private started = 0;

  /** `options`: every gateway's options but its replica sync and warm start. */
  constructor(
    private readonly count: number,
    protected readonly options: GatewayOptions,
  ) {}

  get shared(): boolean {
    return this.count > 1;
  }

  async start(): Promise<void> {
    if (this.shared) await this.nats.start();
    for (let slot = 0; slot < this.count; slot++) this.live.push(await this.startOne(slot));
  }

  pick(random: (n: number) => number): R {
    return this.live[random(this.live.length)];
  }

  async partition(slot: number, ms: number): Promise<void> {
    const link = this.live[slot].link as TcpProxy;
    link.stall();
    await sleep(ms);
    link.heal();
  }

  async natsOutage(ms: number): Promise<void> {
    await this.nats.stop();
    await sleep(ms);
    await this.nats.start();
  }

  /** A gateway that starts now in `slot`: its new id, its link and its options. */
  protected async birth(slot: number): Promise<Birth> {
    const id = `gw-${slot + 1}.${++this.started}`;
    if (!this.shared) return { id, link: undefined, warm: false, options: this.options };
    const link = new TcpProxy(this.nats.port, false);
    await link.open();
    // A live replica other than the one it replaces, to warm-start from.
    const peer = this.live.find((_, i) => i !== slot)?.url;
    const replicas = { nats: { servers: `nats://127.0.0.1:${link.port}`, subject: 'kvroute.soak' }, replicaId: id, ...SYNC };
    return {
      id,
      link,
      warm: peer !== undefined,
      options: {
        ...this.options,
        ...(peer ? { warmStart: { peer } } : {}),
        router: { ...this.options.router, replicas },
      },
    };
  }

  protected async stopNats(): Promise<void> {
    await this.nats.dispose();
  }

  protected abstract startOne(slot: number): Promise<R>;
}
