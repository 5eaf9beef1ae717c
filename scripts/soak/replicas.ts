/**
 * The soak's gateways in its own process: one, or router replicas sharing their load over a real
 * nats-server (`linked-replicas.ts`). A crash stalls a replica's link first, so its frees and
 * goodbye never reach its peers, then closes it; a restart closes it with its goodbye.
 */

import { createGateway, type Gateway, type GatewayWorker } from '../../ts/index.js';
import { type LinkedReplica, LinkedReplicas } from './linked-replicas.js';
import { indexBlocks, type SoakReplica, type SoakReplicaSet } from './replica-set.js';

interface Replica extends LinkedReplica {
  gateway: Gateway;
}

export class Replicas extends LinkedReplicas<Replica> implements SoakReplicaSet {
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

  async setWorkers(replica: SoakReplica, workers: GatewayWorker[]): Promise<string> {
    this.live.find((x) => x === replica)?.gateway.setWorkers(workers);
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
    await this.stopNats();
  }

  protected async startOne(slot: number): Promise<Replica> {
    const { id, link, warm, options } = await this.birth(slot);
    // A client that picked this replica just before it was replaced is still served, as behind
    // a load balancer that hears of a pod's end late.
    const gateway = createGateway({ ...options, shutdown: { delayMs: 500 } });
    const { url } = await gateway.listen();
    const loaded = await gateway.warmStart;
    // A warm start that fails leaves the replica cold, and says why: here, that is a failure.
    if (loaded instanceof Error) this.problems.push(`${id}: warm start from a ${warm} failed: ${loaded.message}`);
    if (warm) this.warmStarts.push({ from: warm, blocks: await indexBlocks(url) });
    return { id, gateway, url, link };
  }
}
