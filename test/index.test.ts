import { afterEach, describe, expect, test } from 'vitest';
import { blockHashes, KvIndex, type RouterEvent } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { cleared, names, q, range, removed, stored } from './helpers/events.js';

describe.each(BACKENDS)('KvIndex behaviours on the %s backend', (backend) => {
  const open: KvIndex[] = [];
  afterEach(() => {
    for (const i of open.splice(0)) i.close();
  });

  async function index(events: RouterEvent[] = [], blockSize = 4): Promise<KvIndex> {
    const i = new KvIndex({ blockSize, backend });
    open.push(i);
    i.applyEvents(events);
    await i.flush();
    return i;
  }

  async function apply(i: KvIndex, ...events: RouterEvent[]): Promise<void> {
    i.applyEvents(events);
    await i.flush();
  }

  const scores = (i: KvIndex, query: bigint[]) => i.findMatches(query).scores.map((s) => [Number(s.workerId), s.dpRank, s.blocks]);

  test('store then query full, partial, unknown and empty prefixes', async () => {
    const i = await index([stored(0, [1, 2, 3])]);
    expect(scores(i, q(1, 2, 3))).toEqual([[0, 0, 3]]);
    expect(scores(i, q(1, 2, 999))).toEqual([[0, 0, 2]]);
    expect(scores(i, q(999, 998))).toEqual([]);
    expect(scores(i, [])).toEqual([]);
  });

  test('removing every block leaves nothing behind', async () => {
    const i = await index([stored(0, [1, 2, 3]), removed(0, [1, 2, 3], [1, 2, 3])]);
    expect(scores(i, q(1, 2, 3))).toEqual([]);
    expect(i.stats()).toMatchObject({ blocks: 0, treeBlocks: 0, treeNodes: 0 });
  });

  test('branching workers share a prefix', async () => {
    const i = await index([stored(0, [1, 2]), stored(1, [1, 3])]);
    expect(scores(i, q(1))).toEqual([
      [0, 0, 1],
      [1, 0, 1],
    ]);
    expect(scores(i, q(1, 2))).toEqual([
      [0, 0, 2],
      [1, 0, 1],
    ]);
  });

  test('removeWorker drops all ranks of a worker; an unknown worker is a no-op', async () => {
    const i = await index([stored(0, [1, 2, 3]), stored(0, [1, 2, 3], { dpRank: 1 }), stored(1, [1, 2, 3])]);
    i.removeWorker(0);
    i.removeWorker(42n);
    await i.flush();
    expect(scores(i, q(1, 2, 3))).toEqual([[1, 0, 3]]);
  });

  test('removeWorker with a dp rank drops only that rank', async () => {
    const i = await index([0, 1, 2].map((dpRank) => stored(7, [1, 2, 3], { dpRank })));
    expect(scores(i, q(1, 2, 3))).toEqual([
      [7, 0, 3],
      [7, 1, 3],
      [7, 2, 3],
    ]);
    i.removeWorker(7, 0);
    await i.flush();
    expect(scores(i, q(1, 2, 3))).toEqual([
      [7, 1, 3],
      [7, 2, 3],
    ]);
  });

  test('cleared drops one rank only, and the rank can rebuild', async () => {
    const i = await index([stored(0, [1, 2, 3]), stored(0, [1, 2, 3], { dpRank: 1 }), stored(1, [1, 2, 3])]);
    await apply(i, cleared(0, 0));
    expect(scores(i, q(1, 2, 3))).toEqual([
      [0, 1, 3],
      [1, 0, 3],
    ]);
    await apply(i, stored(0, [1, 2, 3]));
    expect(scores(i, q(1, 2, 3))[0]).toEqual([0, 0, 3]);
    expect(i.stats().events.cleared).toBe(1);
  });

  test('findMatchesForRequest hashes with the index block size', async () => {
    const tokens = Array.from({ length: 96 }, (_, k) => k + 1);
    const i = await index([], 32);
    expect(i.findMatchesForRequest(tokens).scores).toEqual([]);
    const locals = blockHashes(tokens, 32, { backend });
    await apply(i, stored(0, [...locals]));
    expect(i.findMatchesForRequest(tokens).scores).toEqual([{ workerId: 0n, dpRank: 0, blocks: 3, treeSize: 3 }]);
    expect(i.findMatchesForRequest(new Uint32Array(tokens.slice(0, 70))).scores[0].blocks).toBe(2);
  });

  test('a continuation extends the path and is no duplicate', async () => {
    const i = await index([stored(0, [1, 2, 3]), stored(0, [4, 5], { prefix: q(1, 2, 3) })]);
    expect(scores(i, range(1, 5))).toEqual([[0, 0, 5]]);
    expect(scores(i, q(1, 2, 3))).toEqual([[0, 0, 3]]);
    expect(i.stats()).toMatchObject({ duplicateStores: 0, rejected: { parent_block_not_found: 0 } });
  });

  test('a replayed store is counted as a duplicate and changes nothing', async () => {
    const i = await index([stored(0, [1, 2, 3])]);
    const before = i.dump();
    await apply(i, stored(0, [1, 2, 3]));
    expect(i.dump()).toEqual(before);
    expect(i.stats()).toMatchObject({
      duplicateStores: 1,
      events: { stored: 2 },
      rejected: { invalid_block: 0, parent_block_not_found: 0 },
    });
  });

  test('tree sizes follow stores, replays and removals', async () => {
    const i = await index();
    const size = () => i.findMatches(q(1)).scores[0]?.treeSize ?? 0;
    await apply(i, stored(0, [1, 2, 3]));
    expect(size()).toBe(3);
    await apply(i, stored(0, [4, 5], { prefix: q(1, 2, 3) }));
    expect(size()).toBe(5);
    await apply(i, removed(0, range(1, 5), [4, 5]));
    expect([size(), scores(i, range(1, 5))]).toEqual([3, [[0, 0, 3]]]);
    await apply(i, removed(0, range(1, 3), [1, 2, 3]));
    expect([size(), i.dump().length]).toEqual([0, 0]);
  });

  test('a mid-chain removal cuts descendants, and restoring the gap does not resurrect them', async () => {
    const i = await index([stored(0, range(1, 5)), removed(0, range(1, 5), [3])]);
    expect(scores(i, range(1, 5))).toEqual([[0, 0, 2]]);
    await apply(i, stored(0, [3], { prefix: q(1, 2) }));
    expect(scores(i, range(1, 5))).toEqual([[0, 0, 3]]);
    await apply(i, stored(0, [4, 5], { prefix: q(1, 2, 3) }));
    expect(scores(i, range(1, 5))).toEqual([[0, 0, 5]]);
  });

  test('shared-prefix branches, and a parent the rank does not hold is rejected', async () => {
    const i = await index([stored(1, [1, 2, 3]), stored(2, [1, 2, 3]), stored(1, [4, 5, 6], { prefix: q(1, 2, 3) })]);
    expect(scores(i, range(1, 6))).toEqual([
      [1, 0, 6],
      [2, 0, 3],
    ]);
    await apply(i, stored(2, [7, 8], { prefix: q(1, 2, 3) }));
    expect(scores(i, q(1, 2, 3, 7, 8))).toEqual([
      [2, 0, 5],
      [1, 0, 3],
    ]);
    await apply(i, stored(2, [9, 10], { prefix: range(1, 6) }));
    expect(i.stats().rejected.parent_block_not_found).toBe(1);
    expect(scores(i, range(1, 6))).toEqual([
      [1, 0, 6],
      [2, 0, 3],
    ]);
  });

  test('unknown removals are counted per hash and change nothing', async () => {
    const i = await index([stored(0, [1, 2, 3]), removed(0, q(1, 2, 3), [3])]);
    expect([scores(i, q(1, 2, 3)), scores(i, q(1, 2))]).toEqual([[[0, 0, 2]], [[0, 0, 2]]]);
    await apply(i, { worker_id: 0, event: { event_id: 9, data: { removed: { block_hashes: [999, 998] } } } });
    expect(scores(i, q(1, 2))).toEqual([[0, 0, 2]]);
    expect(i.stats().skipped.block_not_found).toBe(2);
    expect(i.stats().rejected).not.toHaveProperty('block_not_found');
  });

  test('disjoint sequences, long sequences and divergence positions', async () => {
    const i = await index([stored(0, [1, 2, 3]), stored(0, [100, 101, 102]), stored(5, range(1, 1000))]);
    expect(scores(i, q(100, 101, 102))).toEqual([[0, 0, 3]]);
    expect(scores(i, q(1, 100))).toEqual([
      [0, 0, 1],
      [5, 0, 1],
    ]);
    expect(scores(i, range(1, 1000))[0]).toEqual([5, 0, 1000]);
    for (const p of [31, 32, 33, 63, 64, 65, 95, 96, 97, 499]) {
      const query = range(1, 1000);
      query[p] = 9999n;
      expect(scores(i, query)[0]).toEqual([5, 0, p]);
    }
  });

  test('twenty chunks of continuations form one path; the native tree keeps it one edge', async () => {
    const i = await index();
    for (let c = 0; c < 20; c++) await apply(i, stored(0, range(c * 10 + 1, c * 10 + 10), { prefix: range(1, c * 10) }));
    expect(scores(i, range(1, 200))).toEqual([[0, 0, 200]]);
    expect(scores(i, range(1, 75))).toEqual([[0, 0, 75]]);
    expect(i.dump()).toHaveLength(1);
    if (backend === 'native') expect(i.stats().treeNodes).toBe(1);
  });

  test('a path longer than the longest native edge (1,024 positions) has no seams', async () => {
    const path = range(1, 3100);
    // One store of 2,500 blocks, then continuations of 300 and a decode-style single block.
    const i = await index([stored(0, path.slice(0, 2500))]);
    if (backend === 'native') expect(i.stats().treeNodes).toBe(3);
    await apply(i, stored(0, path.slice(2500, 2800), { prefix: path.slice(0, 2500) }));
    await apply(i, stored(0, path.slice(2800, 3072), { prefix: path.slice(0, 2800) }), stored(0, [3073n], { prefix: path.slice(0, 3072) }));
    if (backend === 'native') expect(i.stats().treeNodes).toBe(4);
    expect(scores(i, path)).toEqual([[0, 0, 3073]]);
    expect(scores(i, [...path.slice(0, 1030), 0n])).toEqual([[0, 0, 1030]]);
    // Another rank branches right after the first seam, and one right at it.
    await apply(i, stored(1, [...path.slice(0, 1025), 7n]), stored(2, [...path.slice(0, 1024), 8n]));
    expect(scores(i, path.slice(0, 1026))).toEqual([
      [0, 0, 1026],
      [1, 0, 1025],
      [2, 0, 1024],
    ]);
    // Removing the first block past a seam keeps exactly the edges before it.
    await apply(i, removed(0, path, [2049]), removed(1, path, [2049]));
    expect(scores(i, path)[0]).toEqual([0, 0, 2048]);
    await apply(i, removed(0, path, [1025]));
    expect(scores(i, path)).toEqual([
      [1, 0, 1025],
      [0, 0, 1024],
      [2, 0, 1024],
    ]);
    expect(i.stats()).toMatchObject({ blocks: 1024 + 1026 + 1025, treeBlocks: 1027, skipped: { block_not_found: 1 } });
    // Rank 0 gets its tail back in one store and dumps as one event again.
    await apply(i, stored(0, path.slice(1024, 3000), { prefix: path.slice(0, 1024) }));
    const dumped = i.dump().filter((e) => e.worker_id === 0n);
    expect(dumped.map((e) => e.event.data.stored.blocks.length)).toEqual([3000]);
    expect(scores(i, path)[0]).toEqual([0, 0, 3000]);
  });

  test('LoRA adapters and cache namespaces do not collide', async () => {
    const tokens = Array.from({ length: 12 }, (_, k) => k);
    const variants = [{}, { loraName: 'a' }, { loraName: 'b' }, { cacheNamespace: 'tenant-a' }, { cacheNamespace: 'tenant-b' }];
    const i = await index(variants.map((opts, w) => stored(w, [...blockHashes(tokens, 4, { ...opts, backend })])));
    variants.forEach((opts, w) => {
      expect(i.findMatchesForRequest(tokens, opts).scores.map((s) => [Number(s.workerId), s.blocks])).toEqual([[w, 3]]);
    });
  });

  test('stores naming their own parent, or reusing a name for another block, are rejected whole', async () => {
    const parent = names(q(1, 2))[1];
    const selfRef: RouterEvent = {
      worker_id: 0,
      event: {
        event_id: 1,
        data: {
          stored: {
            parent_hash: parent,
            blocks: [
              { block_hash: 77n, tokens_hash: 3n },
              { block_hash: parent, tokens_hash: 4n },
            ],
          },
        },
      },
    };
    const reuse: RouterEvent = {
      worker_id: 0,
      event: { event_id: 2, data: { stored: { parent_hash: null, blocks: [{ block_hash: parent, tokens_hash: 50n }] } } },
    };
    const i = await index([stored(0, [1, 2]), selfRef, reuse]);
    expect(i.stats().rejected.invalid_block).toBe(2);
    expect(scores(i, q(1, 2, 3))).toEqual([[0, 0, 2]]);
    expect(scores(i, q(50))).toEqual([]);

    // The parent's name on positions that exist already: one another worker made (worker 0
    // does not hold it yet), and one worker 0 holds under another name.
    await apply(i, stored(1, [1, 2, 3, 4]));
    const [first, second] = names(q(1, 2));
    const onto = (blocks: { block_hash: bigint; tokens_hash: bigint }[]): RouterEvent => ({
      worker_id: 0,
      event: { event_id: 3, data: { stored: { parent_hash: first, blocks } } },
    });
    await apply(
      i,
      onto([
        { block_hash: second, tokens_hash: 2n },
        { block_hash: first, tokens_hash: 3n },
      ]),
      onto([{ block_hash: first, tokens_hash: 2n }]),
    );
    expect(i.stats().rejected.invalid_block).toBe(4);
    expect(scores(i, q(1, 2, 3, 4))).toEqual([
      [1, 0, 4],
      [0, 0, 2],
    ]);
  });

  test('ranks may name the same path differently; removals and dumps use each rank own names', async () => {
    const i = await index([
      stored(1, [1, 2, 3]),
      stored(2, [1, 2, 3], { salt: 0xabcn }),
      stored(2, [4], { prefix: q(1, 2, 3), salt: 0xabcn }),
    ]);
    expect(scores(i, q(1, 2, 3, 4))).toEqual([
      [2, 0, 4],
      [1, 0, 3],
    ]);
    await apply(i, removed(2, q(1, 2), [2], { salt: 0xabcn }));
    expect(scores(i, q(1, 2, 3, 4))).toEqual([
      [1, 0, 3],
      [2, 0, 1],
    ]);
    const restored = KvIndex.fromDump(i.dump(), { blockSize: 4, backend });
    open.push(restored);
    expect(restored.dump()).toEqual(i.dump());
    await apply(restored, removed(2, q(1), [1], { salt: 0xabcn }));
    expect(scores(restored, q(1, 2, 3))).toEqual([[1, 0, 3]]);
  });

  test('events of other storage tiers go to the lower tiers, not the tree', async () => {
    const i = await index([stored(0, [1, 2], { tier: 'host_pinned' }), stored(0, [1], { tier: 'device' })]);
    expect(scores(i, q(1, 2))).toEqual([[0, 0, 1]]);
    expect(i.stats().lowerTiers.host_pinned).toMatchObject({ blocks: 2, stored: 2 });
  });

  test('a linear sequence dumps as exactly one event; compact dumps list parents first', async () => {
    const one = await index([stored(0, [1, 2, 3, 4])]);
    const [e] = one.dump();
    expect(one.dump()).toHaveLength(1);
    expect(e.event.data.stored.blocks.map((b) => b.tokens_hash)).toEqual(q(1, 2, 3, 4));
    expect(e.event.data.stored.parent_hash).toBeNull();
    const i = await index([
      stored(1, range(1, 6)),
      stored(2, [1, 2, 3]),
      stored(2, [7, 8], { prefix: q(1, 2, 3) }),
      stored(2, [9], { prefix: q(1, 2) }),
    ]);
    const dump = i.dump();
    const seen = new Set<bigint>();
    for (const ev of dump) {
      const { parent_hash, blocks } = ev.event.data.stored;
      if (parent_hash !== null) expect(seen.has(parent_hash)).toBe(true);
      for (const b of blocks) seen.add(b.block_hash);
    }
    expect(dump.map((ev) => ev.event.data.stored.blocks.length)).toEqual([6, 2, 3, 1]);
    expect(dump.map((ev) => ev.event.event_id)).toEqual([0n, 1n, 2n, 3n]);
  });

  test('idempotent add/remove cycles restore the exact dump', async () => {
    const i = await index([stored(0, range(1, 4)), stored(1, range(1, 2))]);
    const snapshot = i.dump();
    for (let k = 0; k < 3; k++) {
      await apply(i, stored(0, [5, 6], { prefix: range(1, 4) }), stored(1, [9]), removed(0, range(1, 6), [5]), removed(1, q(9), [1]));
    }
    expect(i.dump()).toEqual(snapshot);
  });

  test('close is idempotent; every later call throws ERR_CLOSED', async () => {
    const i = await index([stored(0, [1])]);
    i.close();
    i.close();
    for (const call of [
      () => i.findMatches(q(1)),
      () => i.applyEvent(stored(0, [2])),
      () => i.dump(),
      () => i.stats(),
      () => i.removeWorker(0),
    ]) {
      expect(call).toThrow(expect.objectContaining({ code: 'ERR_CLOSED' }));
    }
    await expect(i.flush()).rejects.toMatchObject({ code: 'ERR_CLOSED' });
  });
});
