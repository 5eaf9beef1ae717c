/**
 * The soak's faults, one at a time every 2-4 s: on a worker (its engine hangs or slows down,
 * restarts or drops event batches; it crashes and comes back on its ports 1-3 s later; the
 * network cuts it off from the gateways for 1-4 s; a gateway's config reload takes it out of the
 * fleet and puts it back 1-3 s later) and, with router replicas, on the replicas (one is
 * partitioned from NATS for 1-4 s, crashes or restarts; NATS itself is down for 1-3 s).
 */

import type { Rng } from '../../test/helpers/random.js';
import type { MockFault } from '../../ts/index.js';
import type { SoakReplicaSet } from './replica-set.js';
import type { SoakWorkers } from './workers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const ENGINE_FAULTS: MockFault[] = [{ kind: 'hang' }, { kind: 'slow', factor: 30 }, { kind: 'restart' }, { kind: 'drop-events', count: 3 }];

export class SoakFaults {
  /** The faults injected since the last {@link take} (`hang 2`: worker 2 hung). */
  private readonly log: string[] = [];

  constructor(
    private readonly rng: Rng,
    private readonly workers: SoakWorkers,
    private readonly replicas: SoakReplicaSet,
  ) {}

  /** The faults since the last call. */
  take(): string[] {
    return this.log.splice(0);
  }

  async run(over: () => boolean): Promise<void> {
    while (!over()) {
      await sleep(2000 + this.rng.int(2000));
      if (over()) return;
      if (this.replicas.shared && this.rng.chance(0.35)) await this.onReplica();
      else await this.onWorker();
    }
  }

  private async onWorker(): Promise<void> {
    const i = this.rng.int(this.workers.count);
    const kind = this.rng.int(ENGINE_FAULTS.length + 3);
    if (kind < ENGINE_FAULTS.length) {
      const fault = ENGINE_FAULTS[kind];
      this.log.push(`${fault.kind} ${i + 1}`);
      this.workers.worker(i).fault(fault);
      if (fault.kind === 'hang' || fault.kind === 'slow') {
        await sleep(1000 + this.rng.int(2500));
        this.workers.worker(i).fault({ kind: 'recover' });
      }
    } else if (kind === ENGINE_FAULTS.length) {
      this.log.push(`crash ${i + 1}`);
      await this.workers.crash(i, 1000 + this.rng.int(2000));
    } else if (kind === ENGINE_FAULTS.length + 1) {
      this.log.push(`partition ${i + 1}`);
      await this.workers.partition(i, 1000 + this.rng.int(3000));
    } else {
      const replica = this.replicas.pick((n) => this.rng.int(n));
      const all = this.workers.gatewayWorkers();
      const how = await this.replicas.setWorkers(
        replica,
        all.filter((_, j) => j !== i),
      );
      this.log.push(`reload without ${i + 1} at ${replica.id} (${how})`);
      await sleep(1000 + this.rng.int(2000));
      // A replica restarted meanwhile started with every worker.
      await this.replicas.setWorkers(replica, all);
    }
  }

  private async onReplica(): Promise<void> {
    const slot = this.rng.int(this.replicas.live.length);
    const id = this.replicas.live[slot].id;
    const kind = this.rng.int(4);
    if (kind === 0) {
      this.log.push(`partition ${id}`);
      await this.replicas.partition(slot, 1000 + this.rng.int(3000));
    } else if (kind === 1) {
      this.log.push(`crash ${id}`);
      await this.replicas.restart(slot, true);
    } else if (kind === 2) {
      this.log.push(`restart ${id}`);
      await this.replicas.restart(slot, false);
    } else {
      this.log.push('NATS down');
      await this.replicas.natsOutage(1000 + this.rng.int(2000));
    }
  }
}
