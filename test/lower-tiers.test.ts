/**
 * Lower storage tiers (host memory, disk, external) on both backends: the index keeps the blocks
 * an offloading engine reports there, and routing credits a rank for the blocks its lower tiers
 * hold past its device prefix (Dynamo's `host_cache_hit_weight`, `disk_cache_hit_weight`).
 * Hand-computed costs, the index's rules and counters, engine payloads with a CPU medium, bad
 * options, and a seeded comparison with a deliberately simple model of the tiers and the walk.
 */
import { afterEach, describe, expect, test } from 'vitest';
import {
  blockHashes,
  KvIndex,
  type KvRouter,
  type LowerTierStats,
  type RouterEvent,
  sequenceHashes,
  stringifyEvents,
} from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { packBatch, vllmRemoved, vllmStored } from './helpers/engine-wire.js';
import { expectKvError } from './helpers/errors.js';
import { cleared, names, removed, stored } from './helpers/events.js';
import { Rng } from './helpers/random.js';
import { routerSuite } from './helpers/routers.js';

const BS = 4;
const tokens = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
const TIERS = ['host_pinned', 'disk', 'external'] as const;

const empty = (): LowerTierStats => ({ blocks: 0, stored: 0, removed: 0, unanchored: 0, conflicting: 0, not_found: 0 });

describe.each(BACKENDS)('lower storage tiers (%s)', (backend) => {
  const { make } = routerSuite(backend, BS);
  const locals = (t: number[]) => [...blockHashes(t, BS, { backend })];
  const open: KvIndex[] = [];
  afterEach(() => {
    for (const i of open.splice(0)) i.close();
  });
  const newIndex = () => {
    const i = new KvIndex({ blockSize: BS, backend });
    open.push(i);
    return i;
  };
  const figures = (r: Awaited<ReturnType<KvRouter['route']>>) =>
    r.candidates.map((c) => [Number(c.workerId), c.overlap, c.hostBlocks, c.diskBlocks, c.cachedTokens, c.cost]);

  /** Worker 1: block 1 on the device, blocks 1-3 in host memory, block 4 on disk; worker 2: blocks 1-2 on the device. */
  async function offloaded(opts: Parameters<typeof make>[0] = {}) {
    const r = make(opts);
    r.addWorker(1);
    r.addWorker(2);
    const t = tokens(1, 16);
    const h = locals(t);
    r.applyEvents([
      stored(1, h.slice(0, 1)),
      stored(1, h.slice(0, 3), { tier: 'host_pinned' }),
      stored(1, h.slice(3, 4), { tier: 'disk', prefix: h.slice(0, 3) }),
      stored(2, h.slice(0, 2)),
    ]);
    await r.flush();
    return { r, t };
  }

  test('a rank is credited for the blocks its host, then disk tier holds past its device prefix', async () => {
    const { r, t } = await offloaded();
    const d = await r.route({ requestId: 'a', tokens: t });
    // w1: device 1, host 2 (blocks 2-3), disk 1: (16 − 4 − 0.75·2·4 − 0.25·1·4) / 4 = 1.25 prefill
    // blocks + 4 decode = 5.25, cached round((1 + 1.5 + 0.25) · 4) = 11 tokens; w2: (16 − 8) / 4 + 4 = 6.
    expect(figures(d)).toEqual([
      [1, 1, 2, 1, 11, 5.25],
      [2, 2, 0, 0, 8, 6],
    ]);
    expect(r.potentialLoads({ requestId: 'p', tokens: t })[0]).toMatchObject({
      overlapBlocks: 1,
      hostBlocks: 2,
      diskBlocks: 1,
      cachedTokens: 11,
    });
    expect(d).toMatchObject({ workerId: 1n, overlapBlocks: 1, cachedTokens: 11 });
    expect(r.stats().load).toEqual([expect.objectContaining({ workerId: 1n, activePrefillTokens: 5 })]);
    // The device index itself is untouched by the lower tiers.
    expect(r.index.findMatches(locals(t)).scores.map((s) => [Number(s.workerId), s.blocks])).toEqual([
      [2, 2],
      [1, 1],
    ]);
  });

  test('the weights: 0 ignores a tier, 1 counts its blocks as cached on the device', async () => {
    const off = await offloaded({ hostCacheHitWeight: 0, diskCacheHitWeight: 0 });
    const d = await off.r.route({ requestId: 'a', tokens: off.t });
    // w1: (16 − 4) / 4 + 4 = 7 against w2's 6.
    expect(figures(d)).toEqual([
      [1, 1, 2, 1, 4, 7],
      [2, 2, 0, 0, 8, 6],
    ]);
    expect(d.workerId).toBe(2n);
    const full = await offloaded({ hostCacheHitWeight: 1, diskCacheHitWeight: 1 });
    expect(figures(await full.r.route({ requestId: 'a', tokens: full.t }))[0]).toEqual([1, 1, 2, 1, 16, 4]);
  });

  test('weights outside [0, 1] are refused', () => {
    for (const bad of [1.5, -0.1, Number.NaN, '0.5', null])
      for (const key of ['hostCacheHitWeight', 'diskCacheHitWeight'])
        expectKvError(() => make({ [key]: bad } as never), 'ERR_INVALID_ARG', new RegExp(`opts.${key} must be`));
  });

  test('stores continue a chain the rank holds (in a lower tier, else on the device); every outcome is counted', async () => {
    const i = newIndex();
    const path = [11n, 12n, 13n, 14n];
    i.applyEvents([
      stored(1, path.slice(0, 3), { tier: 'host_pinned' }), // root chain: 3 stored
      stored(1, path.slice(0, 3), { tier: 'host_pinned' }), // a replay: nothing new
      stored(1, path.slice(3), { tier: 'disk', prefix: path.slice(0, 3) }), // anchored in the host tier
      stored(1, [21n, 22n]), // device only
      stored(1, [23n], { tier: 'host_pinned', prefix: [21n, 22n] }), // placed below the device's block
      stored(1, [61n], { tier: 'host_pinned', prefix: [60n] }), // a parent the rank holds nowhere
      stored(2, [31n, 32n], { tier: 'external' }),
    ]);
    // A name the rank already uses for another position stops the store there.
    const clash: RouterEvent = {
      worker_id: 1,
      storage_tier: 'host_pinned',
      event: {
        event_id: 0,
        data: {
          stored: {
            parent_hash: null,
            blocks: [
              { block_hash: names([99n])[0], tokens_hash: 99n },
              { block_hash: names([11n])[0], tokens_hash: 98n },
              { block_hash: 5n, tokens_hash: 97n },
            ],
          },
        },
      },
    };
    i.applyEvent(clash);
    i.applyEvents([removed(1, path, [3], { tier: 'host_pinned' }), removed(1, path, [3], { tier: 'host_pinned' })]);
    await i.flush();
    const s = i.stats();
    expect(s.lowerTiers).toEqual({
      host_pinned: { blocks: 4, stored: 5, removed: 1, unanchored: 1, conflicting: 2, not_found: 1 },
      disk: { ...empty(), blocks: 1, stored: 1 },
      external: { ...empty(), blocks: 2, stored: 2 },
    });
    // Only the device store reached the tree.
    expect([s.blocks, s.events.stored]).toEqual([2, 1]);
    expect(i.findMatches([21n, 22n]).scores.map((x) => x.blocks)).toEqual([2]);
    expect(i.findMatches([11n]).scores).toEqual([]);
    expect(i.findTieredMatches([21n, 22n, 23n], [{ workerId: 1 }])).toEqual([
      { workerId: 1n, dpRank: 0, device: 2, hostPinned: 1, disk: 0, external: 0 },
    ]);
  });

  test('events given as JSON text reach the same tiers (the native backend parses text in Rust)', async () => {
    const i = newIndex();
    const path = [41n, 42n, 43n];
    i.applyEvents(
      stringifyEvents(
        [
          stored(5, path, { tier: 'host_pinned' }),
          stored(5, [44n], { tier: 'disk', prefix: path }),
          stored(5, [45n], { tier: 'external', prefix: [...path, 44n] }),
          removed(5, path, [3], { tier: 'host_pinned' }),
        ],
        'ndjson',
      ),
    );
    await i.flush();
    expect(i.findTieredMatches([41n, 42n, 43n, 44n, 45n], [{ workerId: 5 }, { workerId: 6, dpRank: 1 }])).toEqual([
      { workerId: 5n, dpRank: 0, device: 0, hostPinned: 2, disk: 0, external: 0 },
      { workerId: 6n, dpRank: 1, device: 0, hostPinned: 0, disk: 0, external: 0 },
    ]);
    expect(TIERS.map((t) => i.stats().lowerTiers[t].blocks)).toEqual([2, 1, 1]);
    expectKvError(() => i.findTieredMatches([1n], [{ workerId: -1 }]), 'ERR_INVALID_ARG', /ranks\[0\]\.workerId/);
    expectKvError(() => i.findTieredMatches([1n], 'x' as never), 'ERR_INVALID_ARG', /ranks must be an array/);
  });

  test('a dump carries the lower tiers as runs headed at their positions; a restore rebuilds them exactly', async () => {
    const i = newIndex();
    i.applyEvents([
      stored(1, [21n, 22n]),
      stored(1, [23n, 24n], { tier: 'host_pinned', prefix: [21n, 22n] }), // placed below the device's block
      stored(1, [11n, 12n, 13n], { tier: 'host_pinned' }),
      stored(1, [15n], { tier: 'host_pinned', prefix: [11n, 12n] }), // a branch
      stored(1, [14n], { tier: 'disk', prefix: [11n, 12n, 13n] }),
      stored(2, [31n, 32n], { tier: 'external', dpRank: 1 }),
    ]);
    // A second name for block 11's position, smaller than its own (a root's name is its local hash).
    i.applyEvent({
      worker_id: 1,
      storage_tier: 'host_pinned',
      event: { event_id: 0, dp_rank: 0, data: { stored: { parent_hash: null, blocks: [{ block_hash: 9n, tokens_hash: 11n }] } } },
    });
    await i.flush();
    const dump = i.dump();
    const device = dump.filter((e) => e.storage_tier === 'device');
    const lower = dump.filter((e) => e.storage_tier !== 'device');
    // Device chains first, then the lower tiers.
    expect(dump).toEqual([...device, ...lower]);
    expect(device.map((e) => e.event.data.stored.blocks.map((b) => b.tokens_hash))).toEqual([[21n, 22n]]);
    // A run's head is in position form (its name, its position), the rest as engines send them
    // (name, local hash); a position's first child by name continues its run, another heads its own.
    const at = (path: bigint[]) => [names(path).at(-1), sequenceHashes(path, { backend: 'js' }).at(-1)];
    const then = (path: bigint[]) => [names(path).at(-1), path.at(-1)];
    const [first, second] = (names([11n, 12n, 13n]).at(-1) ?? 0n) < (names([11n, 12n, 15n]).at(-1) ?? 0n) ? [13n, 15n] : [15n, 13n];
    const byHead = (a: unknown[][], b: unknown[][]) => ((a[0][0] as bigint) < (b[0][0] as bigint) ? -1 : 1);
    const host = [
      [at([21n, 22n, 23n]), then([21n, 22n, 23n, 24n])],
      [[9n, 11n], then([11n, 12n]), then([11n, 12n, first])],
      [at([11n])],
      [at([11n, 12n, second])],
    ].sort(byHead);
    const expected = [
      ...host.map((run) => [1n, 0, 'host_pinned', run]),
      [1n, 0, 'disk', [at([11n, 12n, 13n, 14n])]],
      [2n, 1, 'external', [at([31n]), then([31n, 32n])]],
    ];
    expect(
      lower.map((e) => {
        const { parent_hash, blocks } = e.event.data.stored;
        expect(parent_hash).toBeNull();
        return [e.worker_id, e.event.dp_rank, e.storage_tier, blocks.map((b) => [b.block_hash, b.tokens_hash])];
      }),
    ).toEqual(expected);
    const queries: [bigint[], { workerId: number; dpRank?: number }[]][] = [
      [[21n, 22n, 23n, 24n], [{ workerId: 1 }]],
      [[11n, 12n, 13n, 14n], [{ workerId: 1 }]],
      [[11n, 12n, 15n], [{ workerId: 1 }]],
      [[31n, 32n], [{ workerId: 2, dpRank: 1 }]],
    ];
    const answers = (x: KvIndex) => queries.map(([h, ranks]) => x.findTieredMatches(h, ranks));
    // Restored from objects, from JSON text, and with the lower tiers before the device chains
    // (a root store needs no parent): the same tiers, the same walks, the same dump.
    for (const events of [dump, stringifyEvents(dump, 'ndjson'), [...lower, ...device]]) {
      const back = KvIndex.fromDump(events, { blockSize: BS, backend });
      open.push(back);
      expect(back.dump()).toEqual(dump);
      expect(answers(back)).toEqual(answers(i));
      expect(TIERS.map((t) => back.stats().lowerTiers[t].blocks)).toEqual([7, 1, 2]);
    }
    expect(answers(i).map(([a]) => [a.device, a.hostPinned, a.disk, a.external])).toEqual([
      [2, 2, 0, 0],
      [0, 3, 1, 0],
      [0, 3, 0, 0],
      [0, 0, 0, 2],
    ]);
    // A restored block is removed by its engine name, as the original was.
    const back = KvIndex.fromDump(dump, { blockSize: BS, backend });
    open.push(back);
    back.applyEvent(removed(1, [11n, 12n, 13n, 14n], [4], { tier: 'disk' }));
    await back.flush();
    expect(back.stats().lowerTiers.disk).toMatchObject({ blocks: 0, removed: 1, not_found: 0 });
  });

  test('memoryBytes counts the lower tiers: it grows with their blocks and falls when they are cleared', async () => {
    const i = newIndex();
    const before = i.stats().memoryBytes;
    const chain = Array.from({ length: 2_000 }, (_, k) => BigInt(k + 1));
    i.applyEvents([stored(1, chain, { tier: 'host_pinned' }), stored(2, chain, { tier: 'disk' })]);
    await i.flush();
    const full = i.stats().memoryBytes;
    // At least a position and a name (16 bytes) for each of the 4,000 blocks.
    expect(full - before).toBeGreaterThan(4_000 * 16);
    i.applyEvents([cleared(1, 0, 'host_pinned'), cleared(2, 0, 'disk')]);
    await i.flush();
    expect(TIERS.map((t) => i.stats().lowerTiers[t].blocks)).toEqual([0, 0, 0]);
    expect(i.stats().memoryBytes).toBeLessThan(full);
  });

  test("a clear wipes the rank's lower tiers (a device clear its tree too); removing a worker wipes them", async () => {
    const i = newIndex();
    const feed = () =>
      i.applyEvents([
        stored(1, [1n, 2n]),
        stored(1, [1n, 2n], { tier: 'host_pinned' }),
        stored(1, [1n], { tier: 'disk', dpRank: 1 }),
        stored(2, [1n], { tier: 'disk' }),
      ]);
    feed();
    i.applyEvent(cleared(1, 0, 'host_pinned'));
    await i.flush();
    let s = i.stats();
    expect([s.lowerTiers.host_pinned.blocks, s.lowerTiers.disk.blocks, s.blocks]).toEqual([0, 2, 2]);
    i.applyEvents([stored(1, [1n, 2n], { tier: 'host_pinned' }), cleared(1, 1)]);
    await i.flush();
    s = i.stats();
    expect([s.lowerTiers.host_pinned.blocks, s.lowerTiers.disk.blocks, s.blocks]).toEqual([2, 1, 2]);
    i.applyEvent(cleared(1));
    await i.flush();
    s = i.stats();
    expect([s.lowerTiers.host_pinned.blocks, s.lowerTiers.disk.blocks, s.blocks]).toEqual([0, 1, 0]);
    feed();
    i.removeWorker(1);
    i.removeWorker(2, 0);
    await i.flush();
    s = i.stats();
    expect(TIERS.map((t) => s.lowerTiers[t].blocks)).toEqual([0, 0, 0]);
  });

  test("an engine's CPU-medium events reach the host tier; a CPU block size other than the router's is filtered", async () => {
    const r = make();
    r.addWorker(7);
    r.addWorker(8);
    const t = tokens(500, 12);
    const [a, b, c] = [101n, 102n, 103n];
    r.applyEngineBatch(7, 0, packBatch([vllmStored([a], null, t.slice(0, 4)), vllmStored([a, b, c], null, t, { medium: 'CPU' })]));
    r.applyEngineBatch(8, 0, packBatch([vllmStored([a, b], null, t.slice(0, 8))]));
    const odd = r.applyEngineBatch(8, 0, packBatch([vllmStored([a], null, t.slice(0, 8), { medium: 'CPU' }, 8)]));
    expect(odd.stats.filtered.tier_block_size_mismatch).toBe(1);
    expect(odd.blockSizeMismatch).toBeUndefined();
    await r.flush();
    let d = await r.route({ requestId: 'a', tokens: t });
    expect(d.candidates.map((x) => [Number(x.workerId), x.overlap, x.hostBlocks, x.cachedTokens])).toEqual([
      [7, 1, 2, 10],
      [8, 2, 0, 8],
    ]);
    r.free('a');
    // The engine drops its CPU copy of block 2: worker 7's host run now stops at block 1.
    r.applyEngineBatch(7, 0, packBatch([vllmRemoved([b], { medium: 'CPU' })]));
    await r.flush();
    d = await r.route({ requestId: 'b', tokens: t });
    expect(d.candidates.map((x) => [Number(x.workerId), x.hostBlocks])).toEqual([
      [7, 0],
      [8, 0],
    ]);
    expect(r.index.stats().lowerTiers.host_pinned).toMatchObject({ blocks: 2, stored: 3, removed: 1 });
  });

  test('seeded: tiers, walks and counters match a simple model', async () => {
    for (const seed of [1, 2, 3]) {
      const rng = new Rng(seed);
      const r = make({ routerTrackActiveBlocks: false, routerTrackPrefillTokens: false });
      const rankNames = ['1:0', '2:0', '2:1', '3:0'];
      r.addWorker(1);
      r.addWorker(2, { dataParallelSize: 2 });
      r.addWorker(3);
      const families = [tokens(1000, 24), tokens(2000, 16), tokens(3000, 20)].map((t) => ({ t, h: locals(t) }));
      // The model: per rank, the device prefixes held; per tier and rank, name → path key.
      const key = (h: bigint[], n: number) => h.slice(0, n).join(',');
      const device = new Map<string, Set<string>>(rankNames.map((k) => [k, new Set()]));
      const tiers = TIERS.map(() => new Map<string, Map<bigint, string>>(rankNames.map((k) => [k, new Map()])));
      const counts = TIERS.map(() => empty());
      const heldIn = (tier: number, rank: string, k: string) => [...(tiers[tier].get(rank)?.values() ?? [])].includes(k);
      // The other backend hears the same events: both must dump alike, run for run.
      const twin = new KvIndex({ blockSize: BS, backend: backend === 'native' ? 'js' : 'native' });
      open.push(twin);
      const apply = (e: RouterEvent) => {
        r.applyEvent(e);
        twin.applyEvent(e);
      };
      for (let step = 0; step < 150; step++) {
        const rank = rng.pick(rankNames);
        const [w, dp] = rank.split(':').map(Number);
        const f = rng.pick(families);
        const n = f.h.length;
        const action = rng.int(10);
        if (action < 2) {
          const len = 1 + rng.int(n);
          apply(stored(w, f.h.slice(0, len), { dpRank: dp }));
          for (let i = 1; i <= len; i++) device.get(rank)?.add(key(f.h, i));
        } else if (action < 5) {
          const tier = rng.int(3);
          const from = rng.int(n);
          const to = from + 1 + rng.int(n - from);
          apply(stored(w, f.h.slice(from, to), { dpRank: dp, tier: TIERS[tier], prefix: f.h.slice(0, from) }));
          const anchored =
            from === 0 || TIERS.some((_, k) => heldIn(k, rank, key(f.h, from))) || device.get(rank)?.has(key(f.h, from)) === true;
          if (!anchored) counts[tier].unanchored += to - from;
          else
            for (let i = from + 1; i <= to; i++) {
              const name = names(f.h.slice(0, i))[i - 1];
              const m = tiers[tier].get(rank) as Map<bigint, string>;
              if (!m.has(name)) {
                m.set(name, key(f.h, i));
                counts[tier].stored++;
              }
            }
        } else if (action < 7) {
          const tier = rng.int(3);
          const len = 1 + rng.int(n);
          apply(removed(w, f.h, [len], { dpRank: dp, tier: TIERS[tier] }));
          const m = tiers[tier].get(rank) as Map<bigint, string>;
          const name = names(f.h.slice(0, len))[len - 1];
          if (m.delete(name)) counts[tier].removed++;
          else counts[tier].not_found++;
        } else if (action < 8) {
          const tier = rng.chance(0.5) ? TIERS[rng.int(3)] : undefined;
          apply(cleared(w, dp, tier));
          for (const t of tiers) t.get(rank)?.clear();
          if (tier === undefined) device.get(rank)?.clear();
        } else {
          await r.flush();
          const prompt = f.t.slice(0, BS * (1 + rng.int(n)));
          const d = await r.route({ requestId: `q${step}`, tokens: prompt });
          const h = locals(prompt);
          const seen = d.candidates.map((c) => [`${c.workerId}:${c.dpRank}`, c.overlap, c.hostBlocks, c.diskBlocks]);
          const model = rankNames.map((rk) => {
            let at = 0;
            while (at < h.length && device.get(rk)?.has(key(h, at + 1))) at++;
            const start = at;
            const hits = [0, 1, 2].map((tier) => {
              const from = at;
              while (at < h.length && heldIn(tier, rk, key(h, at + 1))) at++;
              return at - from;
            });
            return [rk, start, hits[0], hits[1] + hits[2]];
          });
          expect(seen, `seed ${seed} step ${step}`).toEqual(model);
          r.free(`q${step}`);
        }
      }
      await r.flush();
      const s = r.index.stats().lowerTiers;
      TIERS.forEach((t, k) => {
        const blocks = [...tiers[k].values()].reduce((sum, m) => sum + m.size, 0);
        expect(s[t], `seed ${seed} ${t}`).toEqual({ ...counts[k], blocks });
      });
      // The dump's lower-tier part is the model's (rank, tier, name, position) set, in as many
      // runs as the model's chains need (one per block whose parent the rank's tier does not
      // hold, one more per extra child), and a restore walks every family's prompt alike.
      const dump = r.index.dump();
      await twin.flush();
      expect(twin.dump(), `seed ${seed} backends`).toEqual(dump);
      const dumped: string[] = [];
      let runCount = 0;
      for (const e of dump.filter((x) => x.storage_tier !== 'device')) {
        const [head, ...rest] = e.event.data.stored.blocks;
        const rank = `${e.worker_id}:${e.event.dp_rank}`;
        let position = head.tokens_hash;
        dumped.push(`${rank} ${e.storage_tier} ${head.block_hash} ${position}`);
        for (const b of rest) {
          position = sequenceHashes([position, b.tokens_hash], { backend: 'js' })[1];
          dumped.push(`${rank} ${e.storage_tier} ${b.block_hash} ${position}`);
        }
        runCount++;
      }
      const modelled = TIERS.flatMap((t, k) =>
        [...tiers[k]].flatMap(([rank, m]) =>
          [...m].map(([name, path]) => `${rank} ${t} ${name} ${sequenceHashes(path.split(',').map(BigInt), { backend: 'js' }).at(-1)}`),
        ),
      );
      expect(new Set(dumped), `seed ${seed} dump`).toEqual(new Set(modelled));
      expect(dumped).toHaveLength(modelled.length);
      const modelledRuns = tiers
        .flatMap((t) => [...t.values()])
        .reduce((sum, m) => {
          const paths = new Set(m.values());
          const children = new Map<string, number>();
          let heads = 0;
          for (const path of paths) {
            const parent = path.split(',').slice(0, -1).join(',');
            if (paths.has(parent)) children.set(parent, (children.get(parent) ?? 0) + 1);
            else heads++;
          }
          return sum + heads + [...children.values()].reduce((n, c) => n + c - 1, 0);
        }, 0);
      expect(runCount, `seed ${seed} runs`).toBe(modelledRuns);
      const back = KvIndex.fromDump(dump, { blockSize: BS, backend });
      open.push(back);
      expect(back.dump()).toEqual(dump);
      const ranks = rankNames.map((k) => ({ workerId: Number(k.split(':')[0]), dpRank: Number(k.split(':')[1]) }));
      for (const f of families) expect(back.findTieredMatches(f.h, ranks), `seed ${seed}`).toEqual(r.index.findTieredMatches(f.h, ranks));
    }
  });
});
