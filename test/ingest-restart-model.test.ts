/**
 * Engine sources on both backends against a simple model of what they may hold, over real
 * sockets: a seeded engine publishes one block per batch (a chain per incarnation), keeps the
 * last few batches in its replay ring, and now and then restarts (seq back to 0, new names, ring
 * emptied) while the link drops live batches, sometimes all of them for a while; replays are
 * answered at once, after the engine published more (so they run ahead of the live stream), or
 * never (they time out). Once a rank has heard its engine's current incarnation and is not
 * mid-replay, it must hold blocks of that incarnation only, and all of them from seq 0 whenever
 * it reports `active`. The one restart the wire cannot show ends a run: its first heard batch
 * is exactly the seq after the last applied.
 */

import { afterEach, describe, expect, test } from 'vitest';
import { KvIndex } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { TestEnginePublisher } from './helpers/engine-publisher.js';
import { packBatch, vllmStored } from './helpers/engine-wire.js';
import { Rng } from './helpers/random.js';
import { waitFor } from './helpers/wait.js';

const STEPS = 100;
const cleanup: (() => void)[] = [];
afterEach(() => {
  for (const f of cleanup.splice(0).reverse()) f();
});

/** Incarnation `inc`'s block at `seq`: named apart from every other incarnation's. */
const name = (inc: number, seq: number) => BigInt(inc * 10_000 + seq + 1);
const batch = (inc: number, seq: number) =>
  packBatch([vllmStored([name(inc, seq)], seq === 0 ? null : name(inc, seq - 1), [seq % 7, inc % 5, 2, 3])]);

describe.each(BACKENDS)('engine restarts and losses against a model (%s)', (backend) => {
  test.each([1, 3, 4])('seed %i', async (seed) => {
    const rng = new Rng(seed);
    const pub = await TestEnginePublisher.start();
    cleanup.push(() => pub.close());
    pub.ringSize = 4 + rng.int(4);
    const index = new KvIndex({ blockSize: 4, backend });
    cleanup.push(() => index.close());
    const src = index.subscribe({ workerId: 1, endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint, replayTimeoutMs: 150 });
    await pub.waitForSubscribers();
    const rank = () => src.stats().ranks[0];
    let [inc, next, heard, heardIncarnation, restarts, outage] = [0, 0, 0, true, 0, 0];
    for (let step = 0; step < STEPS; step++) {
      if (rng.chance(0.08)) {
        pub.restart();
        [inc, next, heardIncarnation] = [inc + 1, 0, false];
        restarts++;
      }
      // The link drops a batch now and then, and sometimes all of them for a while.
      if (outage === 0 && rng.chance(0.06)) outage = 3 + rng.int(12);
      const drop = outage > 0 || rng.chance(0.25);
      if (outage > 0) outage--;
      const mode = rng.int(10); // 0: the replay waits for more batches; 1: it never answers
      pub.answerReplays = mode !== 1;
      const release = mode === 0 ? pub.holdReplays() : () => {};
      const before = rank();
      if (!drop && !heardIncarnation && before.lastSeq !== null && BigInt(next) === before.lastSeq + 1n) break; // unseeable
      await pub.publish(0, batch(inc, next), { drop });
      next++;
      if (!drop) {
        heard++;
        heardIncarnation = true;
        await waitFor(() => rank().frames === heard, `frame ${heard}`);
      }
      if (mode === 0) {
        if (rank().replayRequests > before.replayRequests) await pub.publish(0, batch(inc, next++), { drop: true });
        release();
      }
      await waitFor(() => rank().state !== 'recovering', 'the replay to end');
      await index.flush();
      if (!heardIncarnation) continue;
      const held = index.dump().flatMap((e) => e.event.data.stored.blocks.map((b) => BigInt(b.block_hash)));
      const where = `seed ${seed}, step ${step}, incarnation ${inc}: ${held}`;
      expect(
        held.every((h) => h > name(inc, -1) && h <= name(inc, next - 1)),
        where,
      ).toBe(true);
      if (rank().state === 'active') {
        const last = Number(rank().lastSeq);
        expect(
          [...held].sort((a, b) => (a < b ? -1 : 1)),
          where,
        ).toEqual(Array.from({ length: last + 1 }, (_, s) => name(inc, s)));
      }
    }
    // The run reached what it is for (seeds whose run meets the unseeable restart early are not
    // among these; 30 seeds outside the suite held the model on both backends).
    expect(restarts).toBeGreaterThan(0);
    expect(rank().frames).toBeGreaterThan(10);
  });
});
