import { afterEach, describe, expect, test } from 'vitest';
import { KvRouter, type KvRouterOptions } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { Rng } from './helpers/random.js';

const tokens = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
/** Lets the then-handlers of settled route promises run. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe.each(BACKENDS)('KvRouter queue with different candidates, %s backend', (backend) => {
  const open: KvRouter[] = [];
  afterEach(() => {
    for (const r of open.splice(0)) r.close();
  });
  /** Threshold 0: a rank is busy while any request on it has not had its first token. */
  const make = (workers: number, opts: Partial<KvRouterOptions> = {}) => {
    const r = new KvRouter({ blockSize: 4, backend, now: () => 1_000_000, routerQueueThreshold: 0, ...opts });
    for (let w = 1; w <= workers; w++) r.addWorker(w, { maxNumBatchedTokens: 100 });
    open.push(r);
    return r;
  };
  const track = (r: KvRouter, released: string[], id: string, allowedWorkers: number[], priority = 0) =>
    r.route({ requestId: id, tokens: tokens(id.length * 7, 8), allowedWorkers, priority }).then((d) => {
      released.push(id);
      return d;
    });

  test('a request whose worker is free does not wait behind requests waiting for other workers', async () => {
    const r = make(2);
    const released: string[] = [];
    await track(r, released, 'a', [1]);
    const b = track(r, released, 'b', [1]); // worker 1 is busy: b waits
    await settle();
    expect(released).toEqual(['a']);
    // Worker 2 is free: c goes at once although b waits (Dynamo's head-of-line rule would queue it).
    expect((await track(r, released, 'c', [2])).workerId).toBe(2n);
    // Either worker will do and worker 2 is busy now, worker 1 too: d waits, behind b for worker 1.
    const d = track(r, released, 'd', [1, 2]);
    await settle();
    expect(released).toEqual(['a', 'c']);
    expect(r.stats().queued).toBe(2);
    // Worker 2's prefill ends: d, second in the queue, is released past b, which still waits for worker 1.
    r.markPrefillCompleted('c');
    expect((await d).workerId).toBe(2n);
    expect(released).toEqual(['a', 'c', 'd']);
    r.markPrefillCompleted('a');
    expect((await b).workerId).toBe(1n);
    expect(r.stats()).toMatchObject({ queued: 0, queuedTotal: 2, inFlight: 4 });
  });

  test('requests competing for the same workers keep their order, and a new one takes no room a waiting one could use', async () => {
    const r = make(2);
    const released: string[] = [];
    await track(r, released, 'a', [1]);
    await track(r, released, 'b', [2]);
    const waits = [track(r, released, 'c', [1]), track(r, released, 'd', [1, 2]), track(r, released, 'e', [2], 3)];
    await settle();
    expect(r.stats().queued).toBe(3);
    // Worker 1 frees: c is first of those that can use it (e waits for worker 2 only, d for either).
    r.markPrefillCompleted('a');
    await settle();
    expect(released).toEqual(['a', 'b', 'c']);
    // Worker 2 frees: e, of higher priority, goes before d.
    r.markPrefillCompleted('b');
    await settle();
    expect(released).toEqual(['a', 'b', 'c', 'e']);
    // A new request that either worker could take waits behind d, which came first.
    const f = track(r, released, 'f', [1, 2]);
    r.markPrefillCompleted('c');
    await settle();
    expect(released).toEqual(['a', 'b', 'c', 'e', 'd']);
    r.markPrefillCompleted('e');
    await Promise.all([...waits, f]);
    expect(released).toEqual(['a', 'b', 'c', 'e', 'd', 'f']);
  });

  test('seeded: releases match a simple model of per-candidate-set queueing', async () => {
    for (const seed of [1, 2, 3]) {
      const rng = new Rng(seed);
      const workers = 4;
      const r = make(workers);
      type Req = { id: string; allowed: number[]; priority: number; seq: number };
      // The model: which requests are in prefill on each worker, and who waits, in release order.
      const prefilling = new Map<string, number>();
      const running = new Set<string>();
      let waiting: Req[] = [];
      const expected: string[] = [];
      const released: { id: string; worker: number }[] = [];
      const busy = (w: number) => [...prefilling.values()].includes(w);
      let seen = 0;
      /** The router released `id`: take where it went (any worker the request allowed). */
      const take = (req: Req) => {
        const got = released[seen++];
        expect(got?.id, `seed ${seed}: released ${got?.id}, model says ${req.id}`).toBe(req.id);
        expect(req.allowed).toContain(got.worker);
        prefilling.set(req.id, got.worker);
        running.add(req.id);
        expected.push(req.id);
      };
      /** One release pass of the model: in order, each waiter with a free allowed worker goes. */
      const pass = () => {
        for (const req of [...waiting]) {
          if (req.allowed.some((w) => !busy(w))) {
            waiting = waiting.filter((x) => x !== req);
            take(req);
          }
        }
      };
      const pending: Promise<unknown>[] = [];
      for (let i = 0; i < 300; i++) {
        const roll = rng.int(10);
        if (roll < 5) {
          const allowed = [1, 2, 3, 4].filter(() => rng.chance(0.5));
          if (allowed.length === 0) allowed.push(1 + rng.int(workers));
          const req: Req = { id: `r${i}`, allowed, priority: rng.int(2), seq: i };
          // Some are pinned to their one worker instead: the same candidates, said another way.
          const where = allowed.length === 1 && rng.chance(0.5) ? { pinnedWorker: { workerId: allowed[0] } } : { allowedWorkers: allowed };
          pending.push(
            r.route({ requestId: req.id, tokens: tokens(i * 8, 4 + rng.int(8)), ...where, priority: req.priority }).then(
              (d) => released.push({ id: req.id, worker: Number(d.workerId) }),
              () => undefined,
            ),
          );
          await settle();
          pass();
          if (allowed.some((w) => !busy(w))) take(req);
          else {
            waiting.push(req);
            waiting.sort((x, y) => y.priority - x.priority || x.seq - y.seq);
          }
        } else if (roll < 8 && prefilling.size > 0) {
          const id = [...prefilling.keys()][rng.int(prefilling.size)];
          r.markPrefillCompleted(id);
          prefilling.delete(id);
          await settle();
          pass();
        } else if (running.size + waiting.length > 0) {
          const all = [...running, ...waiting.map((q) => q.id)];
          const id = all[rng.int(all.length)];
          r.free(id);
          running.delete(id);
          prefilling.delete(id);
          waiting = waiting.filter((q) => q.id !== id);
          await settle();
          pass();
        }
        expect(
          released.map((x) => x.id),
          `seed ${seed}, step ${i}`,
        ).toEqual(expected);
        expect(r.stats().queued).toBe(waiting.length);
      }
      expect(r.stats().queuedTotal).toBeGreaterThan(20);
      for (const id of [...running, ...waiting.map((q) => q.id)]) r.free(id);
      await Promise.all(pending);
      expect(r.stats()).toMatchObject({ inFlight: 0, queued: 0 });
    }
  });
});
