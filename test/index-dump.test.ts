import { expect, test } from 'vitest';
import { KvIndex, type RouterEvent, stringifyEvents } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { stored } from './helpers/events.js';
import { Rng } from './helpers/random.js';

/**
 * A large, bushy state: 16 workers × 2 ranks append conversations that share system prompts and
 * earlier turns (like chat traffic), then evict some. Dumping and restoring must reproduce every
 * answer, on both backends, and both backends must dump identically.
 */
function workload(seed: number): { events: RouterEvent[]; queries: bigint[][] } {
  const rng = new Rng(seed);
  const prompts = Array.from({ length: 8 }, (_, p) => Array.from({ length: 4 + rng.int(12) }, (_, k) => BigInt(p * 1000 + k + 1)));
  const conversations: bigint[][] = [];
  const events: RouterEvent[] = [];
  const heldBy = new Map<string, bigint[][]>();
  for (let n = 0; n < 4000; n++) {
    const worker = rng.int(16);
    const dpRank = rng.int(2);
    const key = `${worker}:${dpRank}`;
    const held = heldBy.get(key) ?? [];
    const base = held.length > 0 && rng.chance(0.6) ? rng.pick(held) : rng.pick(prompts);
    const turn = Array.from({ length: 1 + rng.int(6) }, () => BigInt(100_000 + rng.int(5000)));
    events.push(
      stored(worker, turn, { dpRank, prefix: base.length > 0 && held.includes(base) ? base : [], salt: worker === 15 ? 99n : 0n }),
    );
    const full = held.includes(base) ? [...base, ...turn] : turn;
    if (!held.includes(base)) events.push(stored(worker, base, { dpRank, salt: worker === 15 ? 99n : 0n }));
    held.push(full);
    heldBy.set(key, held);
    conversations.push(full);
  }
  const queries = Array.from({ length: 300 }, () => {
    const c = rng.pick(conversations);
    return c.slice(0, 1 + rng.int(c.length));
  });
  return { events, queries };
}

test('large states dump and restore exactly on both backends, and the backends dump identically', async () => {
  const { events, queries } = workload(7);
  const dumps: string[] = [];
  for (const backend of BACKENDS) {
    const index = new KvIndex({ blockSize: 16, backend });
    index.applyEvents(events);
    await index.flush();
    expect(index.stats().blocks).toBeGreaterThan(10_000);
    const dump = index.dump();
    const text = stringifyEvents(dump, 'ndjson');
    const restored = KvIndex.fromDump(text, { blockSize: 16, backend });
    expect(stringifyEvents(restored.dump(), 'ndjson')).toBe(text);
    for (const q of queries) expect(restored.findMatches(q)).toEqual(index.findMatches(q));
    expect(restored.stats().blocks).toBe(index.stats().blocks);
    dumps.push(text);
    index.close();
    restored.close();
  }
  expect(dumps[1]).toBe(dumps[0]);
});
