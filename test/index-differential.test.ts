import { expect, test } from 'vitest';
import { type DumpedEvent, KvIndex } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { RandomStream } from './helpers/stream.js';

/**
 * Seeded random event streams, applied to each backend and to the reference model; after every
 * batch, every query must get the model's answer. `KVROUTE_SOAK=<events>` runs a longer stream.
 */
const EVENTS_PER_BACKEND = Number(process.env.KVROUTE_SOAK ?? 60_000);
const SEEDS = [11, 12, 13];

async function run(backend: 'native' | 'js', seed: number, events: number): Promise<DumpedEvent[]> {
  const stream = new RandomStream(seed);
  const index = new KvIndex({ blockSize: 4, backend, writerThreads: 3 });
  try {
    while (stream.emitted < events) {
      const step = stream.next();
      if ('events' in step) index.applyEvents(step.events);
      else index.removeWorker(step.removeWorker, step.dpRank);
      await index.flush();
      for (const query of stream.queries(6)) {
        expect(index.findMatches(query).scores, `seed ${seed}, after ${stream.emitted} events, query ${query}`).toEqual(
          stream.model.findMatches(query),
        );
      }
      expect(index.stats().blocks).toBe(stream.model.totalBlocks());
    }
    const dump = index.dump();
    const restored = KvIndex.fromDump(dump, { blockSize: 4, backend });
    expect(restored.dump()).toEqual(dump);
    for (const query of stream.queries(200)) expect(restored.findMatches(query).scores).toEqual(stream.model.findMatches(query));
    restored.close();
    return dump;
  } finally {
    index.close();
  }
}

test.each(SEEDS)('both backends match the reference model on a random stream (seed %i), and dump identically', async (seed) => {
  const dumps: DumpedEvent[][] = [];
  for (const backend of BACKENDS) dumps.push(await run(backend, seed, Math.ceil(EVENTS_PER_BACKEND / SEEDS.length)));
  expect(dumps[0].length).toBeGreaterThan(0);
  expect(dumps[1]).toEqual(dumps[0]);
});
