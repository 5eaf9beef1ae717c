import { describe, expect, test } from 'vitest';
import { blockHashes, KvIndex, KvRouter, MAX_BLOCKS_PER_EVENT, MAX_RANKS_PER_WORKER, MAX_TOKENS_PER_REQUEST } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { expectKvError } from './helpers/errors.js';
import { stored } from './helpers/events.js';
import { routerSuite } from './helpers/routers.js';

const BS = 4;
const tokens = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
const settled = () => new Promise((r) => setImmediate(r));

describe.each(BACKENDS)('KvRouter request lifecycle edge cases (%s)', (backend) => {
  const { clock, make } = routerSuite(backend, BS);

  test('waiters behind a request that is never freed are released once it expires, by the next call or by stats()', async () => {
    for (const release of ['route', 'stats'] as const) {
      const r = make({ routerQueueThreshold: 0, requestExpirySecs: 10 });
      r.addWorker(1);
      await r.route({ requestId: 'stuck', tokens: tokens(1, 8) });
      let waited = false;
      const waiting = r.route({ requestId: 'w1', tokens: tokens(1, 8) }).then((d) => {
        waited = true;
        return d;
      });
      await settled();
      expect(waited).toBe(false);
      clock.now += 11_000;
      if (release === 'route') {
        // The sweep that frees 'stuck' must drain 'w1' before the newcomer queues behind it.
        const next = r.route({ requestId: 'w2', tokens: tokens(100, 8) });
        expect((await waiting).workerId).toBe(1n);
        r.free('w1');
        await next;
      } else {
        expect(r.stats().expired).toBe(1);
        expect((await waiting).workerId).toBe(1n);
      }
      expect(r.stats().queued).toBe(0);
    }
  });

  test('markPrefillCompleted and touch renew the expiry lease of long generations', async () => {
    const r = make({ requestExpirySecs: 10 });
    r.addWorker(1);
    await r.route({ requestId: 'long', tokens: tokens(1, 8) });
    await r.route({ requestId: 'short', tokens: tokens(50, 8) });
    clock.now += 8_000;
    r.markPrefillCompleted('long');
    clock.now += 8_000; // 16 s after booking, 8 s after the first token
    expect(r.stats()).toMatchObject({ expired: 1, inFlight: 1 });
    expect(r.touch('long')).toBe(true);
    clock.now += 8_000;
    expect(r.stats()).toMatchObject({ expired: 1, inFlight: 1 });
    clock.now += 3_000;
    expect(r.stats()).toMatchObject({ expired: 2, inFlight: 0 });
    expect(r.touch('long')).toBe(false);
  });

  test('free, markPrefillCompleted and touch after close are counted no-ops; stats stay readable', async () => {
    const r = make();
    r.addWorker(1);
    await r.route({ requestId: 'a', tokens: tokens(1, 8) });
    r.close();
    expect(() => {
      r.free('a');
      r.markPrefillCompleted('a');
      r.touch('a');
    }).not.toThrow();
    const s = r.stats();
    expect(s).toMatchObject({ callsAfterClose: 3, routed: 1, inFlight: 0, load: [] });
    expect(s.index.workers).toBe(0);
  });
});

describe.each(BACKENDS)('limits and large inputs (%s)', (backend) => {
  test('150k (worker, rank) candidates route without overflowing the stack', async () => {
    const r = new KvRouter({ blockSize: BS, backend });
    for (let w = 0; w < 150; w++) r.addWorker(w, { dataParallelSize: MAX_RANKS_PER_WORKER });
    const d = await r.route({ requestId: 'big', tokens: tokens(1, 8) });
    expect(d.candidates).toHaveLength(150 * MAX_RANKS_PER_WORKER);
    r.close();
  });

  test('documented maximums are enforced with ERR_INVALID_ARG', () => {
    const r = new KvRouter({ blockSize: BS, backend });
    expectKvError(() => r.addWorker(1, { dataParallelSize: 2 ** 32 - 1 }), 'ERR_INVALID_ARG', /dataParallelSize must be at most 1024/);
    expectKvError(() => r.addWorker(1, { dataParallelSize: MAX_RANKS_PER_WORKER + 1 }), 'ERR_INVALID_ARG', /at most 1024/);
    r.addWorker(1, { dataParallelSize: MAX_RANKS_PER_WORKER });
    expectKvError(
      () => blockHashes(new Array(MAX_TOKENS_PER_REQUEST + 1), BS, { backend }),
      'ERR_INVALID_ARG',
      /at most 16777216 are accepted/,
    );
    const huge = new Array(MAX_BLOCKS_PER_EVENT + 1);
    expectKvError(
      () => r.applyEvent({ worker_id: 1, event: { event_id: 0, data: { removed: { block_hashes: huge } } } } as never),
      'ERR_INVALID_EVENT',
      /at most 1048576 hashes/,
    );
    r.close();
  });

  test('a flush issued just before close resolves on both backends', async () => {
    const index = new KvIndex({ blockSize: BS, backend });
    index.applyEvent({
      worker_id: 1,
      event: { event_id: 0, data: { stored: { parent_hash: null, blocks: [{ block_hash: 1, tokens_hash: 1 }] } } },
    });
    const flushed = index.flush();
    index.close();
    await expect(flushed).resolves.toBeUndefined();
    await expect(index.flush()).rejects.toMatchObject({ code: 'ERR_CLOSED' });
  });

  test('LoRA and namespace names with lone surrogates are refused (they would collide as U+FFFD)', async () => {
    for (const name of ['\uD800', 'a\uDC00b', '\uDBFF\uDBFF']) {
      expectKvError(() => blockHashes(tokens(1, 8), BS, { loraName: name, backend }), 'ERR_INVALID_ARG', /lone surrogate/);
      expectKvError(() => blockHashes(tokens(1, 8), BS, { cacheNamespace: name, backend }), 'ERR_INVALID_ARG', /lone surrogate/);
    }
    expect(blockHashes(tokens(1, 8), BS, { cacheNamespace: 'tenant-\u{1F600}', backend })).toHaveLength(2);
    const r = new KvRouter({ blockSize: BS, backend });
    r.addWorker(1);
    await expect(r.route({ requestId: 'x', tokens: tokens(1, 8), cacheNamespace: '\uD83D' })).rejects.toMatchObject({
      code: 'ERR_INVALID_ARG',
    });
    r.close();
  });
});

describe.each(BACKENDS)('back-pressure and closing with a queue (%s)', (backend) => {
  /** One worker's chains: `chains` Stored events of `blocks` blocks each (about 100k blocks per call). */
  const batch = (worker: number, chains: number, blocks: number) =>
    Array.from({ length: chains }, (_, c) =>
      stored(
        worker,
        Array.from({ length: blocks }, (_, b) => BigInt(c * blocks + b + 1)),
      ),
    );

  test('pending() counts queued operations; applyEvents returns false at the high-water mark', async () => {
    let index = new KvIndex({ blockSize: BS, backend, highWaterMark: 1, writerThreads: 1 });
    let below = index.applyEvents(batch(1, 100, 1000));
    if (backend === 'native') {
      // The writer is still applying 100k blocks (a few milliseconds): one operation queued, at
      // the mark of 1. On a loaded machine this thread can lose its core for longer than that
      // right after the call; then the batch is applied before `pending()` is read, so a fresh
      // index tries again (a few times at most).
      for (let attempt = 1; attempt < 5 && below; attempt++) {
        await index.flush();
        index.close();
        index = new KvIndex({ blockSize: BS, backend, highWaterMark: 1, writerThreads: 1 });
        below = index.applyEvents(batch(1, 100, 1000));
      }
      expect(below).toBe(false);
    } else {
      // The JS backend applies on this thread: nothing is ever queued.
      expect(below).toBe(true);
      expect(index.pending()).toBe(0);
    }
    await index.flush();
    expect(index.pending()).toBe(0);
    // Well below the default mark of 4096 operations.
    const roomy = new KvIndex({ blockSize: BS, backend });
    expect(roomy.applyEvent(stored(2, [1n]))).toBe(true);
    roomy.close();
    expectKvError(() => new KvIndex({ blockSize: BS, backend, highWaterMark: 0 }), 'ERR_INVALID_ARG', /highWaterMark/);
    index.close();
    expectKvError(() => index.pending(), 'ERR_CLOSED', /closed/);
  });

  test('closeAsync() lets the event loop run while the queue drains, and the final stats hold everything', async () => {
    const router = new KvRouter({ blockSize: BS, backend, writerThreads: 1 });
    router.addWorker(1);
    for (let i = 0; i < 5; i++) router.applyEvents(batch(1, 100, 1000).map((e, c) => ({ ...e, worker_id: 1 + ((i * 100 + c) % 7) })));
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    const waiting = router.route({ requestId: 'w', tokens: tokens(0, 8), pinnedWorker: { workerId: 99 } }).catch((e) => e);
    await router.closeAsync();
    clearInterval(timer);
    expect((await waiting).code).toBe('ERR_INVALID_ARG');
    expect(router.stats().index.blocks).toBe(500_000);
    if (backend === 'native') expect(ticks).toBeGreaterThan(0);
    await router.closeAsync();
    router.close();
  });
});
