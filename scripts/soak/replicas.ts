/**
 * The soak's gateways in its own process: one, or router replicas sharing their load over a real
 * nats-server, each through a TCP proxy of its own so that one replica can be partitioned from
 * the others (its link stalls, its peers stop hearing it and must drop its load when its lease
 * runs out), crash (partitioned, then closed: its goodbye never reaches them) or restart cleanly.
 */

import { NatsServer } from '../../test/helpers/nats-server.js';
import { TcpProxy } from '../../test/helpers/tcp-proxy.js';
import { createGateway, type Gateway, type GatewayOptions, type GatewayWorker } from '../../ts/index.js';
import { indexBlocks, peerOf, type SoakReplica, type SoakReplicaSet, SYNC } from './replica-set.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Replica extends SoakReplica {
  gateway: Gateway;
  /** Its connection to NATS, when there are peers. */
  link: TcpProxy | undefined;
}

export class Replicas implements SoakReplicaSet {
  private readonly nats = new NatsServer();
  readonly live: Replica[] = [];
  readonly problems: string[] = [];
  readonly warmStarts: number[] = [];
  private started = 0;

  /** `options`: every gateway's options but its replica sync. */
  constructor(
    private readonly count: number,
    private readonly options: GatewayOptions,
  ) {}

  get shared(): boolean {
    return this.count > 1;
  }

  async start(): Promise<void> {
    if (this.shared) await this.nats.start();
    for (let slot = 0; slot < this.count; slot++) this.live.push(await this.startOne(slot));
  }

  pick(random: (n: number) => number): Replica {
    return this.live[random(this.live.length)];
  }

  async partition(slot: number, ms: number): Promise<void> {
    const link = this.live[slot].link as TcpProxy;
    link.stall();
    await sleep(ms);
    link.heal();
  }

  /**
   * `crash`: its link stalls first, so its frees and goodbye are lost and its peers must drop its
   * load at its lease's end; otherwise it says goodbye. Either way its requests in flight finish
   * (its clients are sent elsewhere first).
   */
  async restart(slot: number, crash: boolean): Promise<void> {
    const old = this.live[slot];
    this.live[slot] = await this.startOne(slot);
    if (crash) old.link?.stall();
    await old.gateway.close();
    await old.link?.cut();
  }

  async natsOutage(ms: number): Promise<void> {
    await this.nats.stop();
    await sleep(ms);
    await this.nats.start();
  }

  async setWorkers(replica: SoakReplica, workers: GatewayWorker[]): Promise<string> {
    const r = this.live.find((x) => x === replica);
    r?.gateway.setWorkers(workers);
    return 'setWorkers';
  }

  async memory(): Promise<string> {
    (globalThis as { gc?: () => void }).gc?.();
    return `heap ${(process.memoryUsage().heapUsed / 2 ** 20).toFixed(1)} MB (all replicas, the clients and workers)`;
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
    const peer = this.shared ? peerOf(this.live, slot) : undefined;
    const gateway = createGateway({
      ...this.options,
      ...(peer ? { warmStart: { peer } } : {}),
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
    if (peer) this.warmStarts.push(await indexBlocks(url));
    return { id, gateway, url, link };
  }
}
