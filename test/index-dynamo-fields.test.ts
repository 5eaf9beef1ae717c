import { describe, expect, test } from 'vitest';
import { KvIndex, type RouterEvent } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { expectKvError } from './helpers/errors.js';

const store = (worker: number, hashes: (number | string)[], extra: Record<string, unknown> = {}): RouterEvent =>
  ({
    worker_id: worker,
    event: { event_id: 1, data: { stored: { parent_hash: null, blocks: hashes.map((h) => ({ block_hash: h, tokens_hash: h })) } } },
    ...extra,
  }) as RouterEvent;

describe.each(BACKENDS)('Dynamo 1.6 event fields and input edge cases (%s)', (backend) => {
  test('session_id is accepted; cache-owner lanes are validated, left out and counted', async () => {
    const index = new KvIndex({ blockSize: 4, backend });
    index.applyEvents([store(1, [11], { session_id: 'sess-1' }), store(1, [12], { session_id: null })]);
    index.applyEvents([
      store(1, [13], { residency_domain: 'cache_owner' }),
      { worker_id: 1, residency_domain: 'cache_owner', event: { event_id: 2, data: 'cleared' } } as RouterEvent,
    ]);
    index.applyEvent(
      JSON.stringify({
        worker_id: 1,
        residency_domain: 'worker',
        event: { event_id: 3, data: { stored: { parent_hash: null, blocks: [{ block_hash: 14, tokens_hash: 14 }] } } },
      }),
    );
    await index.flush();
    const s = index.stats();
    expect(s.blocks).toBe(3);
    expect(s.events.cleared).toBe(0);
    expect(s.skipped).toEqual({ block_not_found: 0, cache_owner: 2 });
    expectKvError(() => index.applyEvent(store(1, [15], { session_id: 5 })), 'ERR_INVALID_EVENT', /session_id must be a string or null/);
    expectKvError(() => index.applyEvent(store(1, ['x'], { residency_domain: 'cache_owner' })), 'ERR_INVALID_EVENT', /block_hash/);
    index.close();
  });

  test('decimal strings may have leading zeros; the value must fit in a u64', async () => {
    const index = new KvIndex({ blockSize: 4, backend });
    index.applyEvent(store(1, ['000000000000000000001', `${'0'.repeat(200)}18446744073709551615`]));
    await index.flush();
    expect(index.dump()[0].event.data.stored.blocks.map((b) => BigInt(b.block_hash))).toEqual([1n, 18446744073709551615n]);
    expectKvError(() => index.applyEvent(store(1, ['018446744073709551616'])), 'ERR_INVALID_EVENT', /u64/);
    expectKvError(() => index.applyEvent(store(1, [`${'0'.repeat(300)}1`])), 'ERR_INVALID_EVENT', /u64/);
    index.close();
  });

  test('getters that answer differently on each read cannot desynchronise a batch', async () => {
    const index = new KvIndex({ blockSize: 4, backend });
    let reads = 0;
    const blocks = [{ block_hash: 1, tokens_hash: 1 }];
    const growing = {
      worker_id: 1,
      event: {
        event_id: 1,
        data: {
          stored: {
            parent_hash: null,
            get blocks() {
              // Each read returns a longer list.
              reads++;
              return [...blocks, ...Array.from({ length: reads }, (_, i) => ({ block_hash: 100 + i, tokens_hash: 100 + i }))];
            },
          },
        },
      },
    };
    let hashReads = 0;
    const flipping = store(2, [0]);
    Object.defineProperty(
      (flipping as unknown as { event: { data: { stored: { blocks: object[] } } } }).event.data.stored.blocks[0],
      'block_hash',
      {
        get: () => (hashReads++ === 0 ? 7 : 'not a hash'),
        enumerable: true,
      },
    );
    index.applyEvents([growing as RouterEvent, flipping]);
    await index.flush();
    const dump = index.dump();
    expect(dump.map((e) => [e.worker_id, e.event.data.stored.blocks.map((b) => Number(b.block_hash))])).toEqual([
      [1n, [1, 100]],
      [2n, [7]],
    ]);
    expect(reads).toBe(1);
    expect(hashReads).toBe(1);
    index.close();
  });
});
