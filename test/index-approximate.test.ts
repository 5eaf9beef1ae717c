import { afterEach, describe, expect, test } from 'vitest';
import { blockHashes, KvIndex } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { names, removed, stored } from './helpers/events.js';

describe.each(BACKENDS)('approximate mode on the %s backend', (backend) => {
  let clock = 0;
  const open: KvIndex[] = [];
  afterEach(() => {
    for (const i of open.splice(0)) i.close();
  });
  const make = (ttlMs = 120_000) => {
    clock = 1_000_000;
    const i = new KvIndex({ blockSize: 4, backend, approximate: { ttlMs }, now: () => clock });
    open.push(i);
    return i;
  };
  const tokens = Array.from({ length: 16 }, (_, k) => k + 1);
  const blocks = (i: KvIndex, t = tokens) => i.findMatchesForRequest(t).scores.map((s) => [Number(s.workerId), s.dpRank, s.blocks]);

  test('a routing decision counts as held until its TTL passes', async () => {
    const i = make(25);
    i.recordRouting(1, 0, tokens);
    await i.flush();
    expect(blocks(i)).toEqual([[1, 0, 4]]);
    clock += 24;
    expect(blocks(i)).toEqual([[1, 0, 4]]);
    clock += 1;
    expect(blocks(i), 'expired predictions stop counting at once').toEqual([]);
    i.recordRouting(2, 0, [1, 2, 3, 4]);
    await i.flush();
    expect(i.stats()).toMatchObject({ blocks: 1, expiredBlocks: 4 });
  });

  test('a refresh extends only the blocks it touches', async () => {
    const i = make(100);
    i.recordRouting(1, 0, tokens);
    clock += 60;
    i.recordRouting(1, 0, tokens.slice(0, 8));
    await i.flush();
    clock += 50;
    expect(blocks(i)).toEqual([[1, 0, 2]]);
    clock += 60;
    expect(blocks(i)).toEqual([]);
  });

  test('real KV events never expire, and confirm the predictions they cover', async () => {
    const i = make(10);
    const locals = [...blockHashes(tokens, 4, { backend })];
    i.recordRouting(1, 0, tokens);
    i.applyEvent(stored(2, locals));
    i.applyEvent(stored(1, locals.slice(0, 2)));
    await i.flush();
    clock += 1_000_000;
    i.recordRouting(3, 0, [9, 9, 9, 9]);
    await i.flush();
    expect(blocks(i)).toEqual([
      [2, 0, 4],
      [1, 0, 2],
    ]);
  });

  test('a real event that renames a predicted block also confirms the predicted blocks above it', async () => {
    const i = make(10);
    const locals = [...blockHashes(tokens, 4, { backend })];
    i.recordRouting(1, 0, tokens);
    // The engine names block 1 as the router does (the parent) but block 2 its own way.
    const own = names(locals, 0x77n);
    const blocks2 = [{ block_hash: own[1], tokens_hash: locals[1] }];
    i.applyEvent({
      worker_id: 1,
      event: { event_id: 0, dp_rank: 0, data: { stored: { parent_hash: names(locals)[0], blocks: blocks2 } } },
    });
    await i.flush();
    clock += 1_000_000;
    i.recordRouting(3, 0, [9, 9, 9, 9]);
    await i.flush();
    expect(blocks(i), 'blocks 1 and 2 confirmed; 3 and 4 expired').toEqual([[1, 0, 2]]);
    // Block 1 holds on its own once the engine evicts block 2: it was confirmed, not predicted.
    i.applyEvent({ worker_id: 1, event: { event_id: 1, dp_rank: 0, data: { removed: { block_hashes: [own[1]] } } } });
    await i.flush();
    expect(blocks(i)).toEqual([[1, 0, 1]]);
    expect(i.stats().blocks).toBe(2);
  });

  test('removing predicted blocks forgets their TTL: the same blocks stored for real later never expire', async () => {
    const i = make(10);
    const locals = [...blockHashes(tokens, 4, { backend })];
    i.recordRouting(1, 0, tokens);
    await i.flush();
    expect(blocks(i)).toEqual([[1, 0, 4]]);
    // The engine evicts what the router predicted, then really stores the same blocks.
    i.applyEvent(removed(1, locals, [1]));
    await i.flush();
    expect(blocks(i)).toEqual([]);
    i.applyEvent(stored(1, locals));
    clock += 1_000_000;
    i.recordRouting(3, 0, [9, 9, 9, 9]);
    await i.flush();
    expect(blocks(i), 'no expiry left over from the removed predictions').toEqual([[1, 0, 4]]);
    expect(i.stats().blocks).toBe(5);
  });

  test('removeWorker drops predictions of that worker only', async () => {
    const i = make();
    i.recordRouting(1, 0, tokens);
    i.recordRouting(1, 1, tokens);
    i.recordRouting(2, 0, tokens);
    i.removeWorker(1, 1);
    await i.flush();
    expect(blocks(i)).toEqual([
      [1, 0, 4],
      [2, 0, 4],
    ]);
    i.removeWorker(1);
    await i.flush();
    expect(blocks(i)).toEqual([[2, 0, 4]]);
  });

  test('repeated prefixes keep routing to the same worker until the TTL passes', async () => {
    const i = make(1000);
    for (let n = 0; n < 5; n++) {
      i.recordRouting(4, 0, [...tokens, 100 + n, 101 + n, 102 + n, 103 + n]);
      clock += 100;
    }
    await i.flush();
    expect(blocks(i)).toEqual([[4, 0, 4]]);
    clock += 1000;
    expect(blocks(i)).toEqual([]);
  });

  test('a prediction never shortens a TTL, even when the clock goes back', async () => {
    const i = make(100);
    i.recordRouting(1, 0, tokens);
    clock -= 50;
    // Would end the first two blocks' TTL 50 ms before the last two's: a path whose expiry rises.
    i.recordRouting(1, 0, tokens.slice(0, 8));
    await i.flush();
    clock += 110;
    expect(blocks(i), 'all four blocks keep the first TTL').toEqual([[1, 0, 4]]);
    clock += 41;
    i.recordRouting(3, 0, [9, 9, 9, 9]);
    await i.flush();
    expect(blocks(i)).toEqual([]);
    expect(i.stats()).toMatchObject({ blocks: 1, expiredBlocks: 4 });
  });

  test('an expiry takes the whole expired part of a path at once, wherever the predictions ended', async () => {
    const i = make(100);
    const long = [...tokens, 17, 18, 19, 20, 21, 22, 23, 24];
    i.recordRouting(1, 0, long);
    clock += 30;
    i.recordRouting(1, 0, tokens.slice(0, 12));
    clock += 30;
    i.recordRouting(1, 0, tokens.slice(0, 4));
    await i.flush();
    // Of the six blocks, the last three expire at +100, two more at +130 and the first at +160.
    clock += 41;
    expect(blocks(i, long)).toEqual([[1, 0, 3]]);
    i.recordRouting(2, 0, [9, 9, 9, 9]);
    await i.flush();
    expect(i.stats()).toMatchObject({ blocks: 3 + 1, expiredBlocks: 3 });
    clock += 30;
    i.recordRouting(2, 0, [9, 9, 9, 9]);
    await i.flush();
    expect(blocks(i, long)).toEqual([[1, 0, 1]]);
    expect(i.stats()).toMatchObject({ blocks: 1 + 1, expiredBlocks: 5 });
    clock += 30;
    i.recordRouting(2, 0, [9, 9, 9, 9]);
    await i.flush();
    expect(blocks(i, long)).toEqual([]);
    expect(i.stats()).toMatchObject({ blocks: 1, expiredBlocks: 6 });
  });

  test('the clock is validated', () => {
    const i = new KvIndex({ blockSize: 4, backend, approximate: { ttlMs: 5 }, now: () => Number.NaN });
    open.push(i);
    expect(() => i.recordRouting(1, 0, tokens)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG' }));
  });
});
