import { describe, expect, test } from 'vitest';
import { blockHashes, decodeEngineBatch, KvIndex, KvRouteError } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { hex, mapEvent, pack, packBatch, vllmRemoved, vllmStored } from './helpers/engine-wire.js';
import { expectKvError } from './helpers/errors.js';

/** `payload` with the first byte of the string `text` replaced by 0xff, which no UTF-8 text holds. */
function notUtf8(payload: Uint8Array, text: string): Uint8Array {
  const at = Buffer.from(payload).indexOf(Buffer.from(text, 'utf8'));
  if (at < 0) throw new Error(`${text} is not in the payload`);
  const out = Uint8Array.from(payload);
  out[at] = 0xff;
  return out;
}

// Reference §7, G1: each engine's own structs encoding one store of tokens [1,2,3,4].
const G1 = {
  'vLLM 0.33 map':
    '93cb3ff000000000000091de000aa474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657391cfffffffffffffffffb1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f6964739401020304aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0a967726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e00',
  'vLLM 0.23 array':
    '93cb3ff0000000000000919cab426c6f636b53746f72656491cfffffffffffffffffc0940102030404c0a3475055c0c000ae66756c6c5f617474656e74696f6ec000',
  'vLLM 0.11 array': '93cb3ff00000000000009197ab426c6f636b53746f72656491cfffffffffffffffffc0940102030404c0a347505500',
  'SGLang 0.5.23 map':
    '93cb3ff00000000000009187a474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657391ffb1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f6964739401020304aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da347505500',
  'SGLang 0.5.19 array': '93cb3ff00000000000009197ab426c6f636b53746f72656491ffc0940102030404c0a347505500',
};
const G1_SALTED =
  '93cb3ff00000000000009198ab426c6f636b53746f72656491ffc0940102030404c0a347505581aa63616368655f73616c74a874656e616e742d6100';
const U64_MAX = 2n ** 64n - 1n;

/** The (engine hash, tokens_hash) pairs a payload leaves on the device of a fresh index. */
async function applied(backend: (typeof BACKENDS)[number], blockSize: number, ...payloads: Uint8Array[]) {
  const index = new KvIndex({ blockSize, backend });
  try {
    for (const p of payloads) index.applyEngineBatch(1, 0, p);
    await index.flush();
    const blocks = index
      .dump()
      .filter((e) => e.storage_tier === 'device')
      .flatMap((e) => e.event.data.stored.blocks.map((b) => [BigInt(b.block_hash), BigInt(b.tokens_hash)]));
    return { blocks, stats: index.engineStats() };
  } finally {
    index.close();
  }
}

describe.each(BACKENDS)('engine batch decoding and conversion (%s)', (backend) => {
  test.each(Object.entries(G1))("G1 %s gives Dynamo's golden store", async (_name, payload) => {
    const decoded = decodeEngineBatch(hex(payload), { backend });
    expect(decoded.events).toHaveLength(1);
    expect(decoded.events[0]).toMatchObject({
      type: 'BlockStored',
      blockHashes: [U64_MAX],
      parentBlockHash: null,
      tokenIds: [1, 2, 3, 4],
      blockSize: 4,
      medium: 'GPU',
    });
    const { blocks } = await applied(backend, 4, hex(payload));
    expect(blocks).toEqual([[U64_MAX, 14643705804678351452n]]);
  });

  test('G1 salted SGLang array: the cache salt keys the block', async () => {
    expect(decodeEngineBatch(hex(G1_SALTED), { backend }).events[0]).toMatchObject({ cacheSalt: 'tenant-a' });
    expect((await applied(backend, 4, hex(G1_SALTED))).blocks).toEqual([[U64_MAX, 5738685477468498325n]]);
  });

  test('layouts are detected per batch', () => {
    expect(decodeEngineBatch(hex(G1['vLLM 0.33 map']), { backend }).layout).toBe('map');
    expect(decodeEngineBatch(hex(G1['vLLM 0.11 array']), { backend }).layout).toBe('array');
    expect(decodeEngineBatch(packBatch([]), { backend }).layout).toBe('empty');
  });

  test('an integral float within 64-bit range reads as the integer it holds; any other float fails the batch', async () => {
    // G1's vLLM 0.11 array with its first token id, or its hash, written as a float.
    const withFloat = (from: string, to: string) => hex(G1['vLLM 0.11 array'].replace(from, to));
    const golden = [[U64_MAX, 14643705804678351452n]];
    expect((await applied(backend, 4, withFloat('9401', '94cb3ff0000000000000'))).blocks).toEqual(golden); // 1.0 (f64)
    expect((await applied(backend, 4, withFloat('9401', '94ca3f800000'))).blocks).toEqual(golden); // 1.0 (f32)
    expect((await applied(backend, 4, withFloat('cfffffffffffffffff', 'cbbff0000000000000'))).blocks).toEqual(golden); // hash -1.0, as -1
    const hashAs = (f: string) => decodeEngineBatch(withFloat('cfffffffffffffffff', f), { backend }).events[0];
    expect(hashAs('cb43e0000000000000')).toMatchObject({ blockHashes: [2n ** 63n] });
    // 2^64 and 1e300 are past a u64 (the JS decoder once wrapped them to 0), 1.5 is no integer.
    for (const f of ['cb43f0000000000000', 'cb7e37e43c8800759c', 'cb3ff8000000000000']) {
      expectKvError(
        () => hashAs(f),
        'ERR_INVALID_EVENT',
        /events\[0\]\[1\] \(block_hashes\)\[0\]: expected an integer or bytes hash, got a float/,
      );
    }
  });

  test('G2 SGLang metadata salts: empty means none, a non-string is a decode error', async () => {
    const base = ['BlockStored', [-123n], null, [10, 11], 2, null, 'GPU'];
    const unsalted = (await applied(backend, 2, packBatch([base]))).blocks;
    expect(unsalted).toEqual([[18446744073709551493n, 7369860969341005925n]]);
    expect((await applied(backend, 2, packBatch([[...base, new Map([['cache_salt', '']])]]))).blocks).toEqual(unsalted);
    expect((await applied(backend, 2, packBatch([[...base, new Map([['cache_salt', 'tenant-a']])]]))).blocks).toEqual([
      [18446744073709551493n, 9355240614981260560n],
    ]);
    for (const bad of [new Map(), new Map([['cache_salt', 123]])]) {
      expectKvError(() => decodeEngineBatch(packBatch([[...base, bad]]), { backend }), 'ERR_INVALID_EVENT', /cache_salt/);
    }
  });

  test('G3 Eagle bigram pairs flatten into overlapping windows', async () => {
    const payload = packBatch([
      [
        'BlockStored',
        [11n, 12n],
        null,
        [
          [10, 11],
          [11, 12],
          [12, 13],
          [13, 14],
        ],
        2,
        null,
        'GPU',
      ],
    ]);
    expect(decodeEngineBatch(payload, { backend }).events[0]).toMatchObject({ tokenIds: [10, 11, 12, 13, 14], eagle: true });
    expect((await applied(backend, 2, payload)).blocks.map((b) => b[1])).toEqual([5959138341449004422n, 13917772031453556700n]);
  });

  test('G6 namespace from extra_keys: tagged salt, salt equal to the LoRA name, LoRA only', async () => {
    const hex64 = '0123456789abcdef00112233445566778899aabbccddeefffedcba9876543210';
    const store = (keys: string[]) => packBatch([vllmStored([11n], null, [10, 11], { lora_name: 'adapter-a', extra_keys: [keys] }, 2)]);
    expect((await applied(backend, 2, store(['adapter-a', hex64, 'dynamo-cache-salt:tenant-a']))).blocks[0][1]).toBe(4233307300671660843n);
    expect((await applied(backend, 2, store(['adapter-a', 'dynamo-cache-salt:adapter-a']))).blocks[0][1]).toBe(15320134140681542652n);
    expect((await applied(backend, 2, store(['adapter-a']))).blocks[0][1]).toBe(6727902617578168868n);
  });

  test("vLLM's own untagged salt keys its chain (Dynamo ignores it), and children inherit it", async () => {
    const salted = packBatch([vllmStored([1n], null, [10, 11], { extra_keys: [['tenant-a']] }, 2), vllmStored([2n], 1n, [12, 13], {}, 2)]);
    const { blocks } = await applied(backend, 2, salted);
    // G11: the parent's salted hash, and the child inheriting the namespace.
    expect(blocks.map((b) => b[1]).sort()).toEqual([9355240614981260560n, 12472792095444548631n].sort());
    const plain = await applied(backend, 2, packBatch([vllmStored([1n], null, [10, 11], {}, 2)]));
    expect(plain.blocks[0][1]).toBe(7369860969341005925n);
  });

  test('G11 a parent stored under two namespaces makes its child ambiguous', async () => {
    const payload = packBatch([
      vllmStored([1n], null, [10, 11], { extra_keys: [['dynamo-cache-salt:tenant-a']] }, 2),
      vllmStored([1n], null, [10, 11], { extra_keys: [['dynamo-cache-salt:tenant-b']] }, 2),
      vllmStored([2n], 1n, [12, 13], {}, 2),
    ]);
    const { stats } = await applied(backend, 2, payload);
    expect(stats.filtered.ambiguous_cache_namespace).toBe(1);
  });

  test('G7 multimodal markers and (id, offset) pairs add their hash; plain 64-hex strings do not', async () => {
    const tokens = Array.from({ length: 16 }, (_, i) => i + 1);
    const marker = `0123456789abcdef${'0'.repeat(48)}`;
    const viaMarker = await applied(backend, 16, packBatch([vllmStored([1n], null, tokens, { extra_keys: [[[marker, 0]]] }, 16)]));
    expect(viaMarker.blocks[0][1]).toBe(243950107572397777n);
    expect(viaMarker.blocks[0][1]).toBe(blockHashes(tokens, 16, { mmHashes: [[81985529216486895n]], backend })[0]);
    const bareMarker = await applied(backend, 16, packBatch([vllmStored([1n], null, tokens, { extra_keys: [[marker]] }, 16)]));
    expect(bareMarker.blocks[0][1]).toBe(243950107572397777n);
  });

  test('G14 LoRA: by name; vLLM 0.11 lora_id only is keyed as "lora-id:<n>", never as the base model', async () => {
    const tokens = Array.from({ length: 16 }, (_, i) => i + 1);
    const byName = await applied(backend, 16, packBatch([vllmStored([1n], null, tokens, { lora_name: 'sql-lora' }, 16)]));
    expect(byName.blocks[0][1]).toBe(11378806664395144175n);
    const byId = await applied(backend, 16, packBatch([['BlockStored', [1n], null, tokens, 16, 1, 'GPU']]));
    expect(byId.blocks[0][1]).toBe(blockHashes(tokens, 16, { loraName: 'lora-id:1', backend })[0]);
    expect(byId.blocks[0][1]).not.toBe(16863443419780771464n);
    const both = await applied(
      backend,
      16,
      packBatch([vllmStored([1n], null, tokens, { lora_name: 'sql-lora', extra_keys: [['sql-lora', 'dynamo-cache-salt:tenant-a']] }, 16)]),
    );
    expect(both.blocks[0][1]).toBe(14528514527592222645n);
  });

  test('G15 hashes: u64, negative i64 bit-cast, 32-byte digests folded to their int-mode value', async () => {
    const digest = Uint8Array.from({ length: 32 }, (_, i) => i);
    const decoded = decodeEngineBatch(packBatch([vllmRemoved([]), ['BlockRemoved', [digest, -1n, -123n, 2n ** 63n], 'GPU']]), { backend });
    expect(decoded.events[1]).toMatchObject({ blockHashes: [1736447835066146335n, U64_MAX, 18446744073709551493n, 2n ** 63n] });
    expect(decoded.foldedHashes).toBe(1);
    const odd = decodeEngineBatch(packBatch([['BlockRemoved', [Uint8Array.of(1, 2)], 'GPU']]), { backend });
    expect(odd.events[0]).toMatchObject({ blockHashes: [258n] });
    expect(odd.oddLengthHashes).toBe(1);
    // A bytes-mode store applies (Dynamo fails the whole batch).
    const { blocks } = await applied(backend, 4, packBatch([vllmStored([digest as unknown as bigint], null, [1, 2, 3, 4])]));
    expect(blocks).toEqual([[1736447835066146335n, 14643705804678351452n]]);
  });

  test('filters: tiers, groups, kinds, ownership, locality, placeholders, prompt embeddings; each counted', async () => {
    const t = [1, 2, 3, 4];
    const payload = packBatch([
      vllmStored([1n], null, t),
      vllmStored([2n], null, t, { medium: 'CPU' }),
      vllmStored([3n], null, t, { medium: 'STORAGE' }),
      vllmStored([4n], null, t, { medium: 'FS' }),
      vllmStored([5n], null, t, { group_idx: 1 }),
      vllmStored([6n], null, t, { group_idx: 2, kv_cache_spec_kind: 'sliding_window' }),
      vllmStored([7n], null, t, { kv_cache_spec_kind: 'weird_kind' }),
      vllmStored([8n], null, t, { ownership: 'kvcr' }),
      vllmStored([9n], null, t, { locality: 'REMOTE' }),
      vllmStored([10n], null, [], { block_size: 0, medium: 'GPU' }),
      vllmStored([11n], null, t, { extra_keys: [[Uint8Array.of(1, 2, 3)]] }),
      vllmRemoved([2n], { medium: 'CPU' }),
      vllmRemoved([1n], { group_idx: 1 }),
      mapEvent('AllBlocksCleared', { ownership: 'kvcr' }),
    ]);
    const { blocks, stats } = await applied(backend, 4, payload);
    expect(blocks.map((b) => b[0])).toEqual([1n]);
    expect(stats.filtered).toMatchObject({
      unknown_medium: 1,
      non_main_group: 2,
      non_main_attention_kind: 1,
      unknown_kind: 1,
      unsupported_ownership: 2,
      non_local_locality: 1,
      placeholder: 1,
      prompt_embeds: 1,
    });
    expect(stats.tiers.host_pinned).toEqual({ stored: 1, removed: 1, held: 0 });
    expect(stats.tiers.disk).toEqual({ stored: 1, removed: 0, held: 1 });
    expect(stats.events).toEqual({ stored: 1, removed: 0, cleared: 0 });
  });

  test('a group-1 removal never touches group 0 when the hashes are equal', async () => {
    const { blocks } = await applied(
      backend,
      4,
      packBatch([
        vllmStored([1n], null, [1, 2, 3, 4]),
        vllmStored([1n], null, [1, 2, 3, 4], { group_idx: 1 }),
        vllmRemoved([1n], { group_idx: 1 }),
      ]),
    );
    expect(blocks.map((b) => b[0])).toEqual([1n]);
  });

  test('a block-size mismatch is reported with both sizes, never silently emptied', () => {
    const index = new KvIndex({ blockSize: 32, backend });
    try {
      const r = index.applyEngineBatch(1, 0, packBatch([vllmStored([1n], null, Array(16).fill(7), {}, 16)]));
      expect(r.blockSizeMismatch).toEqual({ engine: 16, router: 32 });
      expect(r.stats.filtered.block_size_mismatch).toBe(1);
      expect(r.indexEvents).toBe(0);
    } finally {
      index.close();
    }
  });

  test('too few tokens keep the full blocks and count the short store; extra tokens are ignored', async () => {
    const { blocks, stats } = await applied(backend, 4, packBatch([vllmStored([1n, 2n], null, [1, 2, 3, 4, 5, 6])]));
    expect(blocks).toEqual([[1n, 14643705804678351452n]]);
    expect(stats.shortTokens).toBe(1);
  });

  test('unknown tags and extra fields are tolerated and counted; the rest of the batch applies', async () => {
    const payload = packBatch(
      [
        mapEvent('BlockEvicted', { block_hashes: [1n] }),
        ['Future', 1],
        vllmStored([1n], null, [1, 2, 3, 4], { new_field: 3 }),
        ['AllBlocksCleared', null, 'x'],
      ],
      { dpRank: 0 },
    );
    const decoded = decodeEngineBatch(payload, { backend });
    expect(decoded.unknownEvents).toBe(2);
    expect(decoded.extraFields).toBe(2);
    const index = new KvIndex({ blockSize: 4, backend });
    const r = index.applyEngineBatch(1, 0, payload);
    expect(r.stats).toMatchObject({ unknownEvents: 2, extraFields: 2, events: { stored: 1, removed: 0, cleared: 1 } });
    index.close();
  });

  test('batch shapes: missing or nil rank, integer ts, extra elements, a mismatched rank (counted)', () => {
    const index = new KvIndex({ blockSize: 4, backend });
    try {
      expect(decodeEngineBatch(pack([2, []]), { backend })).toMatchObject({ ts: 2, dpRank: null });
      expect(decodeEngineBatch(pack([2.5, [], null]), { backend }).dpRank).toBeNull();
      expect(decodeEngineBatch(pack([2.5, [], 1, 'extra']), { backend })).toMatchObject({ dpRank: 1, extraFields: 1 });
      expect(index.applyEngineBatch(1, 0, packBatch([], { dpRank: 3 })).stats.dpRankMismatches).toBe(1);
    } finally {
      index.close();
    }
  });

  test("strings are UTF-8: an engine's own U+FFFD is kept, bytes that are not UTF-8 fail the batch", async () => {
    const index = new KvIndex({ blockSize: 4, backend });
    try {
      const genuine = packBatch([vllmStored([21n], null, [1, 2, 3, 4], { lora_name: 'a\uFFFDb' })]);
      expect(decodeEngineBatch(genuine, { backend }).events[0]).toMatchObject({ loraName: 'a\uFFFDb' });
      index.applyEngineBatch(1, 0, genuine);
      await index.flush();
      expect(index.findMatchesForRequest([1, 2, 3, 4], { loraName: 'a\uFFFDb' }).scores).toHaveLength(1);
      const broken = notUtf8(packBatch([vllmStored([22n], null, [1, 2, 3, 4], { lora_name: 'lora-x' })]), 'lora-x');
      expectKvError(() => decodeEngineBatch(broken, { backend }), 'ERR_INVALID_EVENT', /lora_name: is not UTF-8/);
    } finally {
      index.close();
    }
  });

  test('bad payloads: a typed error, counted with the first message kept, nothing half-applied', async () => {
    const bad: [string, Uint8Array, RegExp][] = [
      ['not msgpack', Uint8Array.of(0xc1), /msgpack|batch/],
      ['truncated', hex('93cb3ff0'), /msgpack/],
      ['trailing bytes', Uint8Array.of(...pack([1, [], 0]), 0x00), /msgpack|follow/],
      ['not an array', pack({ a: 1 }), /batch/],
      ['one element', pack([1]), /batch/],
      ['events not an array', pack([1, 5, 0]), /events/],
      ['an array claiming 10^9 events', Uint8Array.of(0x93, 0x01, 0xdd, 0x3b, 0x9a, 0xca, 0x00), /msgpack/],
      ['a float hash', packBatch([vllmRemoved([1.5 as unknown as bigint])]), /block_hashes/],
      ['a token id above 2^32', packBatch([vllmStored([1n], null, [2 ** 33, 1, 2, 3])]), /token/],
      // As a uint64, the native reader's fast path used to drop it and read the next item as this token.
      [
        'a uint64 token id above 2^32',
        packBatch([vllmStored([1n], null, [2n ** 33n, 1, 2, 3] as never)]),
        /token id must be in \[0, 2\^32\)/,
      ],
      ['an event tag that is not UTF-8', notUtf8(packBatch([vllmRemoved([1n])]), 'BlockRemoved'), /type: is not UTF-8/],
      ['a medium that is not UTF-8', notUtf8(packBatch([vllmRemoved([1n])]), 'GPU'), /medium: is not UTF-8/],
      ['a store without tokens', packBatch([mapEvent('BlockStored', { block_hashes: [1n], block_size: 4 })]), /token_ids/],
      ['a string ts', pack(['now', [], 0]), /ts/],
      ['a deep bomb', Uint8Array.of(0x93, 0x01, ...Array(200).fill(0x91), 0xc0, 0x00), /depth|msgpack/],
      // msgpack reserves 0xc1; msgpackr returns a sentinel for it, which the JS decoder refuses
      // too, wherever it stands: here in an event of an unknown type, which both otherwise skip.
      ['0xc1 in an event of an unknown type', hex('93cb3ff00000000000009192a6467574757265c100'), /reserved byte 0xc1/],
    ];
    const index = new KvIndex({ blockSize: 4, backend });
    try {
      index.applyEngineBatch(1, 0, packBatch([vllmStored([9n], null, [1, 2, 3, 4])]));
      for (const [name, payload, message] of bad) {
        let caught: unknown;
        try {
          index.applyEngineBatch(1, 0, payload);
        } catch (err) {
          caught = err;
        }
        expect(caught, name).toBeInstanceOf(KvRouteError);
        expect((caught as KvRouteError).code, name).toBe('ERR_INVALID_EVENT');
        expect((caught as KvRouteError).message, name).toMatch(message);
        expectKvError(() => decodeEngineBatch(payload, { backend }), 'ERR_INVALID_EVENT', /does not decode/);
      }
      // A valid store then a batch whose second event is bad: the first one is not applied either.
      expect(() =>
        index.applyEngineBatch(1, 0, packBatch([vllmStored([10n], 9n, [5, 6, 7, 8]), vllmRemoved(['x' as unknown as bigint])])),
      ).toThrow(KvRouteError);
      await index.flush();
      const stats = index.engineStats(1, 0);
      expect(stats.decodeErrors).toBe(bad.length + 1);
      expect(stats.firstDecodeError).toMatch(/msgpack|batch/);
      expect(index.stats().blocks).toBe(1);
      expect(index.engineStats().batches).toBe(1);
    } finally {
      index.close();
    }
  });

  test('nesting: 32 container levels decode, 33 fail; a repeated map key keeps its last value', () => {
    const nested = (levels: number): unknown => (levels === 0 ? 1 : [nested(levels - 1)]);
    // batch (1) → events (2) → event (3) → an unknown field's value (4 …).
    const at = (levels: number) => packBatch([vllmStored([1n], null, [1, 2, 3, 4], { future: nested(levels - 3) })]);
    expect(decodeEngineBatch(at(32), { backend }).extraFields).toBe(1);
    expectKvError(() => decodeEngineBatch(at(33), { backend }), 'ERR_INVALID_EVENT', /depth/);
    const repeated = hex(
      '93cb3ff0000000000000918ba474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657391cfffffffffffffffffb1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f6964739401020304aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0a967726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6ea66d656469756da343505500',
    );
    expect(decodeEngineBatch(repeated, { backend }).events[0]).toMatchObject({ medium: 'CPU' });
  });

  test('arguments are validated', () => {
    const index = new KvIndex({ blockSize: 4, backend });
    try {
      expectKvError(() => index.applyEngineBatch(1, 0, 'x' as unknown as Uint8Array), 'ERR_INVALID_ARG', /payload must be a Uint8Array/);
      expectKvError(() => index.applyEngineBatch(-1, 0, packBatch([])), 'ERR_INVALID_ARG', /workerId/);
      expectKvError(() => index.applyEngineBatch(1, 1.5, packBatch([])), 'ERR_INVALID_ARG', /dpRank/);
      expectKvError(() => index.applyEngineBatch(1, 0, packBatch([]), { engine: 'tgi' as 'vllm' }), 'ERR_INVALID_ARG', /engine/);
      expectKvError(() => decodeEngineBatch([1, 2] as unknown as Uint8Array, { backend }), 'ERR_INVALID_ARG', /payload/);
    } finally {
      index.close();
    }
    index.close();
    expectKvError(() => index.applyEngineBatch(1, 0, packBatch([])), 'ERR_CLOSED', /closed/);
  });
});

describe('native and JS decode every case alike', () => {
  test('the same decoded view and the same index for a mixed corpus', async () => {
    const payloads = [
      ...Object.values(G1).map(hex),
      hex(G1_SALTED),
      packBatch([
        vllmStored([1n, 2n], null, [1, 2, 3, 4, 5, 6, 7, 8], { lora_name: 'l', extra_keys: [['l', 'salt'], null] }),
        vllmRemoved([2n]),
      ]),
      packBatch([
        [
          'BlockStored',
          [3n],
          1n,
          [9, 9, 9, 9],
          4,
          null,
          'GPU',
          null,
          [[['0123456789abcdef'.padEnd(64, '0'), 0]]],
          0,
          'full_attention',
          null,
        ],
      ]),
    ];
    for (const p of payloads) {
      expect(decodeEngineBatch(p, { backend: 'js' })).toEqual(decodeEngineBatch(p, { backend: 'native' }));
    }
    const [n, j] = await Promise.all([applied('native', 4, ...payloads), applied('js', 4, ...payloads)]);
    expect(j).toEqual(n);
  });
});
