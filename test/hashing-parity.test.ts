import { expect, test } from 'vitest';
import { blockHashes, sequenceHashes, xxh3_64 } from '../ts/index.js';
import { Rng } from './helpers/random.js';

/**
 * The pure-JS XXH3 must be bit-identical to the native one. Lengths cover every XXH3 input
 * class (0, 1-3, 4-8, 9-16, 17-128, 129-240, >240 with several 1 KiB blocks, up to 100 KB), and
 * seeds use all 64 bits, as LoRA- and namespace-derived seeds do.
 */
const SEED = 0x6b76726f;
const LENGTH_CLASSES: ReadonlyArray<[number, number]> = [
  [0, 0],
  [1, 3],
  [4, 8],
  [9, 16],
  [17, 128],
  [129, 240],
  [241, 1024],
  [1025, 8192],
  [8193, 100_000],
];

function randomName(rng: Rng): string {
  const alphabet = ['a', 'b', 'Z', '-', '_', '/', 'é', '日', '🦀', '0'];
  let s = '';
  for (let n = rng.int(300); n > 0; n--) s += rng.pick(alphabet);
  return s;
}

test('xxh3_64 agrees across backends on every input length class and full 64-bit seeds', () => {
  const rng = new Rng(SEED);
  let compared = 0;
  for (const [lo, hi] of LENGTH_CLASSES) {
    const rounds = hi > 10_000 ? 20 : 300;
    for (let i = 0; i < rounds; i++) {
      const data = rng.bytes(lo + rng.int(hi - lo + 1));
      const seed = rng.pick([0n, 1n, 1337n, rng.u64(), (1n << 64n) - 1n]);
      expect(xxh3_64(data, seed, { backend: 'js' }), `length ${data.length}, seed ${seed}`).toBe(
        xxh3_64(data, seed, { backend: 'native' }),
      );
      compared++;
    }
  }
  expect(compared).toBeGreaterThan(2000);
});

test('blockHashes and sequenceHashes agree across backends with LoRA, namespace, eagle and multimodal options', () => {
  const rng = new Rng(SEED + 1);
  for (let i = 0; i < 1500; i++) {
    const blockSize = rng.pick([1, 2, 3, 4, 15, 16, 31, 32, 33, 60, 64, 65, 128, 512]);
    const tokens = new Uint32Array(rng.int(blockSize * 6 + 2));
    for (let t = 0; t < tokens.length; t++) tokens[t] = rng.chance(0.1) ? 0xffffffff : rng.u32();
    const opts = {
      loraName: rng.chance(0.5) ? randomName(rng) : undefined,
      cacheNamespace: rng.chance(0.5) ? randomName(rng) : undefined,
      eagle: rng.chance(0.3),
      mmHashes: rng.chance(0.3)
        ? Array.from({ length: rng.int(8) }, () => (rng.chance(0.3) ? null : Array.from({ length: rng.int(4) }, () => rng.u64())))
        : undefined,
    };
    const native = blockHashes(tokens, blockSize, { ...opts, backend: 'native' });
    const js = blockHashes(tokens, blockSize, { ...opts, backend: 'js' });
    expect(js, JSON.stringify({ blockSize, len: tokens.length, eagle: opts.eagle })).toEqual(native);
    expect(sequenceHashes(js, { backend: 'js' })).toEqual(sequenceHashes(native, { backend: 'native' }));
  }
});
