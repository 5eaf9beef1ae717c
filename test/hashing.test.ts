import { describe, expect, test } from 'vitest';
import { blockHashes, sequenceHashes, xxh3_64 } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { expectKvError } from './helpers/errors.js';
import vectors from './vectors/hashing.json' with { type: 'json' };

const big = (xs: readonly string[]) => BigUint64Array.from(xs.map(BigInt));
const le32 = (tokens: number[]) => new Uint8Array(Uint32Array.from(tokens).buffer);

describe.each(BACKENDS)('hashing on the %s backend', (backend) => {
  test.each(vectors.xxh3)('xxh3 golden value: $source', ({ utf8, seed, hash }) => {
    expect(xxh3_64(utf8, BigInt(seed), { backend })).toBe(BigInt(hash));
  });

  test.each(vectors.blocks)('block and sequence golden values: $source', ({ tokens, block_size, local, sequence }) => {
    const got = blockHashes(tokens, block_size, { backend });
    expect(got).toEqual(big(local));
    expect(sequenceHashes(got, { backend })).toEqual(big(sequence));
    expect(blockHashes(Uint32Array.from(tokens), block_size, { backend })).toEqual(big(local));
  });

  test('only full blocks are hashed', () => {
    for (const bs of [11, 32, 64]) {
      const count = (len: number) =>
        blockHashes(
          Array.from({ length: len }, (_, i) => i),
          bs,
          { backend },
        ).length;
      expect([count(0), count(bs - 1), count(bs), count(bs + 1), count(2 * bs + 1)]).toEqual([0, 0, 1, 1, 2]);
    }
  });

  test('eagle windows are blockSize + 1 tokens overlapping by one', () => {
    const got = blockHashes([0, 1, 2, 3, 4, 5], 2, { eagle: true, backend });
    expect(got).toEqual(BigUint64Array.from([xxh3_64(le32([0, 1, 2]), 1337n, { backend }), xxh3_64(le32([2, 3, 4]), 1337n, { backend })]));
    expect(blockHashes([0, 1, 2, 3, 4], 2, { eagle: true, backend }).length).toBe(2);
    expect(blockHashes([0, 1, 2, 3], 2, { eagle: true, backend }).length).toBe(1);
  });

  test('LoRA and namespace salts: wrapping seed sum, distinct from each other, empty means absent', () => {
    const tokens = [0, 1, 2, 3];
    const salt = (1337n + xxh3_64('adapter-a', 0n, { backend })) % (1n << 64n);
    const lora = blockHashes(tokens, 4, { loraName: 'adapter-a', backend })[0];
    expect(lora).toBe(xxh3_64(le32(tokens), salt, { backend }));
    const base = blockHashes(tokens, 4, { backend })[0];
    expect(lora).not.toBe(base);
    expect(blockHashes(tokens, 4, { loraName: 'x', backend })[0]).not.toBe(blockHashes(tokens, 4, { cacheNamespace: 'x', backend })[0]);
    const both = (1337n + xxh3_64('a', 0n, { backend }) + xxh3_64('tenant', 1n, { backend })) % (1n << 64n);
    expect(blockHashes(tokens, 4, { loraName: 'a', cacheNamespace: 'tenant', backend })[0]).toBe(xxh3_64(le32(tokens), both, { backend }));
    expect(blockHashes(tokens, 4, { loraName: '', cacheNamespace: '', backend })[0]).toBe(base);
  });

  test('multimodal hashes are sorted and appended per block; null and empty hash as text', () => {
    const tokens = [7, 8, 9, 10, 11, 12, 13, 14];
    const text = blockHashes(tokens, 4, { backend });
    const got = blockHashes(tokens, 4, { mmHashes: [null, [30n, 10n, 20n]], backend });
    const bytes = new Uint8Array(16 + 24);
    bytes.set(le32([11, 12, 13, 14]));
    const view = new DataView(bytes.buffer);
    [10n, 20n, 30n].forEach((h, i) => {
      view.setBigUint64(16 + 8 * i, h, true);
    });
    expect(got[0]).toBe(text[0]);
    expect(got[1]).toBe(xxh3_64(bytes, 1337n, { backend }));
    expect(blockHashes(tokens, 4, { mmHashes: [[], undefined, [5n]], backend })).toEqual(text);
  });

  test('sequence hashes of nothing are nothing, of one block are that block', () => {
    expect(sequenceHashes([], { backend }).length).toBe(0);
    expect(sequenceHashes([42n], { backend })).toEqual(BigUint64Array.from([42n]));
  });

  test('bad block sizes are rejected with ERR_INVALID_ARG naming blockSize', () => {
    for (const bad of [0, -4, 1.5, Number.NaN, 2 ** 20 + 1, '16', undefined]) {
      expectKvError(() => blockHashes([1, 2, 3, 4], bad as number, { backend }), 'ERR_INVALID_ARG', /blockSize/);
    }
  });

  test('tokens outside [0, 2^32) or of the wrong type are rejected, naming the index', () => {
    expectKvError(() => blockHashes([1, -1], 1, { backend }), 'ERR_INVALID_ARG', /tokens\[1\]/);
    expectKvError(() => blockHashes([2 ** 32], 1, { backend }), 'ERR_INVALID_ARG', /tokens\[0\]/);
    expectKvError(() => blockHashes([0.5], 1, { backend }), 'ERR_INVALID_ARG', /tokens\[0\]/);
    expectKvError(() => blockHashes(new Int32Array(4) as unknown as Uint32Array, 1, { backend }), 'ERR_INVALID_ARG', /tokens must be/);
    expectKvError(() => blockHashes('abc' as unknown as number[], 1, { backend }), 'ERR_INVALID_ARG', /tokens must be/);
  });

  test('hashes outside [0, 2^64) are rejected', () => {
    expectKvError(() => sequenceHashes([1n, -1n], { backend }), 'ERR_INVALID_ARG', /localHashes\[1\]/);
    expectKvError(() => sequenceHashes([1n << 64n], { backend }), 'ERR_INVALID_ARG', /localHashes\[0\]/);
    expectKvError(() => sequenceHashes([1.5 as unknown as bigint], { backend }), 'ERR_INVALID_ARG', /localHashes\[0\]/);
    expectKvError(() => xxh3_64('x', -1n, { backend }), 'ERR_INVALID_ARG', /seed/);
  });

  test('wrong option types and unknown options are rejected', () => {
    expectKvError(() => blockHashes([1], 1, { loraName: 5 as unknown as string, backend }), 'ERR_INVALID_ARG', /opts\.loraName/);
    expectKvError(() => blockHashes([1], 1, { eagle: 'yes' as unknown as boolean, backend }), 'ERR_INVALID_ARG', /opts\.eagle/);
    expectKvError(
      () => blockHashes([1], 1, { mmHashes: [[-1]] as unknown as bigint[][], backend }),
      'ERR_INVALID_ARG',
      /mmHashes\[0\]\[0\]/,
    );
    expectKvError(() => blockHashes([1], 1, { lora: 'a', backend } as never), 'ERR_INVALID_ARG', /unknown option "lora"/);
    expectKvError(() => blockHashes([1], 1, { backend: 'gpu' as never }), 'ERR_INVALID_ARG', /opts\.backend/);
  });
});
