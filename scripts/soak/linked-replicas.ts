/**
 * What both kinds of the soak's replica sets share: a real nats-server, each replica's link to
 * it through a TCP proxy of its own (so that one replica can be partitioned from the others:
 * its link stalls, its peers stop hearing it and must drop its load when its lease runs out),
 * NATS outages, and the replica options that point a gateway at its link and at a live peer to
 * warm-start from.
 */

import { NatsServer } from '../../test/helpers/nats-server.js';
import { scrape } from '../../test/helpers/prometheus.js';
import { TcpProxy } from '../../test/helpers/tcp-proxy.js';
import type { GatewayOptions } from '../../ts/index.js';
import { type SoakReplica, SYNC } from './replica-set.js';
import type { SoakSecurity } from './secure.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface LinkedReplica extends SoakReplica {
  /** Its connection to NATS, when there are peers. */
  link: TcpProxy | undefined;
}

/** A new replica's id, its link and the options that make a gateway use them. */
export interface Birth {
  id: string;
  link: TcpProxy | undefined;
  /** Where it warm-starts from: a live peer's `/dump`, the replicas' latest snapshot, or nowhere. */
  warm: 'peer' | 'snapshot' | undefined;
  options: GatewayOptions;
}

/** How often each replica writes the index snapshot its successors may start from. */
const SNAPSHOT_EVERY_MS = 2000;

export abstract class LinkedReplicas<R extends LinkedReplica> {
  private readonly nats = new NatsServer();
  readonly live: R[] = [];
  readonly problems: string[] = [];
  /** Each warm start: where from, and the blocks in the index as the replica began to listen. */
  readonly warmStarts: { from: 'peer' | 'snapshot'; blocks: number }[] = [];
  private started = 0;

  /** `options`: every gateway's options but its replica sync and warm start; `security`: `--secure`'s, for NATS and the peers. */
  constructor(
    private readonly count: number,
    protected readonly options: GatewayOptions,
    private readonly security?: SoakSecurity,
  ) {}

  get shared(): boolean {
    return this.count > 1;
  }

  async start(): Promise<void> {
    if (this.shared) await this.nats.start(this.security?.natsArgs());
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
    await this.nats.start(this.security?.natsArgs());
  }

  /**
   * A gateway that starts now in `slot`: its new id, its link and its options. Every replica
   * writes index snapshots through its link; a first start warm-starts from a replica started
   * before it, a successor from a live peer or from the latest snapshot, in turn.
   */
  protected async birth(slot: number): Promise<Birth> {
    const id = `gw-${slot + 1}.${++this.started}`;
    if (!this.shared) return { id, link: undefined, warm: undefined, options: this.options };
    const link = new TcpProxy(this.nats.port, false);
    await link.open();
    const servers = `nats://127.0.0.1:${link.port}`;
    const successor = this.live.length === this.count;
    // A live replica other than the one it replaces.
    const peer = this.live.find((_, i) => i !== slot)?.url;
    const warm = successor && this.started % 2 === 0 && (await this.snapshotWritten()) ? 'snapshot' : peer ? 'peer' : undefined;
    const tls = this.security ? { tls: this.security.clientTls() } : {};
    const warmStart = warm === 'snapshot' ? { snapshot: { servers, ...tls } } : warm === 'peer' ? { peer, ...tls } : undefined;
    return {
      id,
      link,
      warm,
      options: {
        ...this.options,
        ...(warmStart ? { warmStart } : {}),
        snapshots: { servers, everyMs: SNAPSHOT_EVERY_MS, ...tls },
        router: { ...this.options.router, replicas: { nats: { servers, subject: 'kvroute.soak', ...tls }, replicaId: id, ...SYNC } },
      },
    };
  }

  /** Whether a live replica has written a snapshot yet (a warm start from none would start cold). */
  private async snapshotWritten(): Promise<boolean> {
    const written = await Promise.all(this.live.map(async (r) => (await scrape(`${r.url}/metrics`)).sum('kvroute_snapshot_writes_total')));
    return written.some((n) => n > 0);
  }

  protected async stopNats(): Promise<void> {
    await this.nats.dispose();
  }

  protected abstract startOne(slot: number): Promise<R>;
}
