/**
 * The load sync under a bus that delays every message and delivers two publishers' messages in
 * different orders to different replicas: once every message has arrived, every replica weighs
 * the same load, the fleet's whole in-flight set; and once every request has ended, none.
 */
import { afterEach, describe, expect, test } from 'vitest';
import { KvRouter } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { JitterBus } from './helpers/jitter-bus.js';
import { Rng } from './helpers/random.js';

const BS = 4;
const DELAY = 10;
const prompt = (i: number, n: number) => Array.from({ length: n }, (_, k) => 1000 * (i + 1) + k);

describe.each(BACKENDS)('load sync over a bus that delays and reorders (%s)', (backend) => {
  const clock = { now: 1_000_000 };
  const open: KvRouter[] = [];
  afterEach(() => {
    for (const r of open.splice(0)) r.close();
  });

  test('seeded: once every message has arrived, every replica weighs the same load', async () => {
    const seeds = Number(process.env.KVROUTE_REPLICA_SEEDS ?? 6);
    for (let seed = 1; seed <= seeds; seed++) {
      clock.now = 1_000_000;
      const rng = new Rng(seed);
      const bus = new JitterBus(() => clock.now, rng, 1, DELAY - 1);
      const rs = ['a', 'b', 'c'].map((id) => {
        const r = new KvRouter({ blockSize: BS, backend, now: () => clock.now, replicas: { transport: bus.transport(), replicaId: id } });
        for (let w = 1; w <= 4; w++) r.addWorker(w);
        open.push(r);
        return r;
      });
      const settle = () =>
        bus.settle(() => {
          clock.now += DELAY;
        });
      const view = (r: KvRouter) =>
        JSON.stringify(r.stats().load.map((l) => [String(l.workerId), l.requests, l.activePrefillTokens, l.activeBlocks]));
      settle();
      const inFlight = new Map<string, { r: KvRouter; prefilled: boolean }>();
      let next = 0;
      for (let step = 0; step < 200; step++) {
        clock.now += rng.int(4);
        bus.deliverDue();
        const action = rng.int(10);
        if (action < 5 || inFlight.size === 0) {
          const r = rng.pick(rs);
          const id = `q${next++}`;
          // Prompts share prefixes (a few families), so shared blocks count once per rank.
          await r.route({ requestId: id, tokens: prompt(rng.int(5), 4 * (1 + rng.int(6))) });
          inFlight.set(id, { r, prefilled: false });
        } else if (action < 7) {
          const id = rng.pick([...inFlight.keys()]);
          const f = inFlight.get(id) as { r: KvRouter; prefilled: boolean };
          f.r.markPrefillCompleted(id);
          f.prefilled = true;
        } else {
          const id = rng.pick([...inFlight.keys()]);
          inFlight.get(id)?.r.free(id);
          inFlight.delete(id);
        }
        if (rng.int(8) === 0) {
          settle();
          const views = rs.map(view);
          expect(new Set(views).size, `seed ${seed} step ${step}: ${views.join(' | ')}`).toBe(1);
          const requests = rs[0].stats().load.reduce((n, l) => n + l.requests, 0);
          expect(requests, `seed ${seed} step ${step}`).toBe(inFlight.size);
        }
      }
      for (const [id, f] of inFlight) f.r.free(id);
      settle();
      for (const r of rs) expect(r.stats().load, `seed ${seed}`).toEqual([]);
      for (const r of open.splice(0)) r.close();
    }
  });
});
