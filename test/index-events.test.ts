import { afterEach, describe, expect, test } from 'vitest';
import { KvIndex, parseEvents, type RouterEvent, stringifyEvents } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { expectKvError } from './helpers/errors.js';
import { q, stored } from './helpers/events.js';

const BIG = 18_446_744_073_709_551_557n; // a prime just below 2^64: no double can hold it

describe.each(BACKENDS)('event input on the %s backend', (backend) => {
  const open: KvIndex[] = [];
  afterEach(() => {
    for (const i of open.splice(0)) i.close();
  });
  const make = (opts: Partial<ConstructorParameters<typeof KvIndex>[0]> = {}) => {
    const i = new KvIndex({ blockSize: 4, backend, ...opts });
    open.push(i);
    return i;
  };
  const good = (): RouterEvent => stored(1, [1, 2]);
  const with_ = (patch: (e: Record<string, unknown>) => void): unknown => {
    const e = structuredClone(good()) as unknown as Record<string, unknown>;
    patch(e);
    return e;
  };
  const storedOf = (e: Record<string, unknown>) =>
    ((e.event as Record<string, unknown>).data as { stored: Record<string, unknown> }).stored;

  test.each([
    ['a missing worker_id', (e: Record<string, unknown>) => delete e.worker_id, /event\.worker_id is missing/],
    ['a negative worker_id', (e: Record<string, unknown>) => (e.worker_id = -1), /event\.worker_id must be a u64/],
    ['a fractional worker_id', (e: Record<string, unknown>) => (e.worker_id = 1.5), /event\.worker_id must be a u64/],
    ['an unsafe-integer number', (e: Record<string, unknown>) => (e.worker_id = 2 ** 53), /event\.worker_id must be a u64/],
    ['a u64 beyond 2^64', (e: Record<string, unknown>) => (e.worker_id = 1n << 64n), /event\.worker_id/],
    ['a non-decimal string', (e: Record<string, unknown>) => (e.worker_id = '0x10'), /event\.worker_id/],
    ['an unknown tier', (e: Record<string, unknown>) => (e.storage_tier = 'tape'), /storage_tier must be one of/],
    ['a bad dp_rank', (e: Record<string, unknown>) => ((e.event as Record<string, unknown>).dp_rank = 2 ** 32), /event\.event\.dp_rank/],
    ['a missing event_id', (e: Record<string, unknown>) => delete (e.event as Record<string, unknown>).event_id, /event_id is missing/],
    [
      'an unknown data variant',
      (e: Record<string, unknown>) => ((e.event as Record<string, unknown>).data = { moved: {} }),
      /unknown variant "moved"/,
    ],
    [
      'a string variant other than cleared',
      (e: Record<string, unknown>) => ((e.event as Record<string, unknown>).data = 'clear'),
      /must be \{stored\}/,
    ],
    [
      'two variants at once',
      (e: Record<string, unknown>) => ((e.event as Record<string, unknown>).data = { stored: {}, removed: {} }),
      /exactly one/,
    ],
    ['a missing parent_hash', (e: Record<string, unknown>) => delete storedOf(e).parent_hash, /parent_hash is missing/],
    ['blocks that are not an array', (e: Record<string, unknown>) => (storedOf(e).blocks = {}), /blocks must be an array/],
    [
      'a block without tokens_hash',
      (e: Record<string, unknown>) => delete (storedOf(e).blocks as Record<string, unknown>[])[1].tokens_hash,
      /blocks\[1\]\.tokens_hash/,
    ],
    [
      'a mistyped field',
      (e: Record<string, unknown>) => ((storedOf(e).blocks as Record<string, unknown>[])[0].blok_hash = 1),
      /unknown field "blok_hash"/,
    ],
    ['a bad start_position', (e: Record<string, unknown>) => (storedOf(e).start_position = -1), /start_position/],
    [
      'bad multimodal offsets',
      (e: Record<string, unknown>) =>
        ((storedOf(e).blocks as Record<string, unknown>[])[0].mm_extra_info = { mm_objects: [{ mm_hash: 1, offsets: [[1]] }] }),
      /offsets\[0\] must be a pair/,
    ],
  ])('%s is rejected with ERR_INVALID_EVENT naming the field', (_name, patch, message) => {
    const i = make();
    expectKvError(() => i.applyEvent(with_(patch) as RouterEvent), 'ERR_INVALID_EVENT', message);
    expect(i.stats().events.stored).toBe(0);
  });

  test('u64 values may be numbers, bigints or decimal strings, and huge ones keep every bit', async () => {
    const i = make();
    i.applyEvents([
      {
        worker_id: '5',
        event: {
          event_id: 1n,
          dp_rank: '1',
          data: { stored: { parent_hash: null, blocks: [{ block_hash: BIG.toString(), tokens_hash: BIG }] } },
        },
      },
      {
        worker_id: 5n,
        event: { event_id: 2, dp_rank: 1, data: { stored: { parent_hash: BIG, blocks: [{ block_hash: 3, tokens_hash: '4' }] } } },
      },
    ]);
    await i.flush();
    expect(i.findMatches([BIG, 4n]).scores).toEqual([{ workerId: 5n, dpRank: 1, blocks: 2, treeSize: 2 }]);
  });

  test('JSON text keeps integers above 2^53 exact, in arrays and NDJSON, and dumps round-trip as text', async () => {
    const json = `[{"worker_id": 9, "event": {"event_id": 1, "data": {"stored": {"parent_hash": null, "blocks": [{"block_hash": ${BIG}, "tokens_hash": ${BIG - 2n}}]}}}}]`;
    const i = make();
    i.applyEvents(json);
    i.applyEvents(
      `\n{"worker_id": 9, "event": {"event_id": 2, "data": {"stored": {"parent_hash": ${BIG}, "blocks": [{"block_hash": 12345678901234567890, "tokens_hash": 7}]}}}}\n\n`,
    );
    i.applyEvent('{"worker_id": 9, "event": {"event_id": 3, "data": "cleared"}, "residency_domain": "worker"}');
    await i.flush();
    expect(i.stats().events).toEqual({ stored: 2, removed: 0, cleared: 1 });
    const j = make();
    j.applyEvents(json);
    await j.flush();
    expect(j.findMatches([BIG - 2n]).scores[0].blocks).toBe(1);
    const text = stringifyEvents(j.dump());
    expect(text).toContain(String(BIG));
    const back = KvIndex.fromDump(text, { blockSize: 4, backend });
    open.push(back);
    expect(back.dump()).toEqual(j.dump());
    expect(KvIndex.fromDump(stringifyEvents(j.dump(), 'ndjson'), { blockSize: 4, backend }).dump()).toEqual(j.dump());
    expect(parseEvents(text)).toHaveLength(1);
  });

  test('invalid JSON and bad NDJSON lines are rejected with their line number', () => {
    const i = make();
    expectKvError(() => i.applyEvent('{"worker_id": 1,'), 'ERR_INVALID_EVENT', /invalid JSON/);
    const ndjson = stringifyEvents([good(), { worker_id: -3, event: good().event }], 'ndjson');
    expectKvError(() => i.applyEvents(ndjson), 'ERR_INVALID_EVENT', /^line 2\.worker_id must be a u64/);
    expectKvError(() => i.applyEvents(`${stringifyEvents([good()], 'ndjson')}\n{oops`), 'ERR_INVALID_EVENT', /^line 2: invalid JSON/);
    expectKvError(() => i.applyEvents(42 as unknown as RouterEvent[]), 'ERR_INVALID_EVENT', /iterable/);
  });

  test('a batch is all or nothing: one bad event rejects the whole batch', async () => {
    const i = make();
    const bad = with_((e) => (e.worker_id = -1));
    expectKvError(() => i.applyEvents([good(), stored(2, [1]), bad as RouterEvent]), 'ERR_INVALID_EVENT', /^events\[2\]\.worker_id/);
    await i.flush();
    expect(i.findMatches(q(1)).scores).toEqual([]);
    expect(i.stats().events.stored).toBe(0);
  });

  test('constructor and method arguments are validated', () => {
    expectKvError(() => new KvIndex(undefined as never), 'ERR_INVALID_ARG', /blockSize/);
    expectKvError(() => make({ blockSize: 0 }), 'ERR_INVALID_ARG', /opts\.blockSize/);
    expectKvError(() => make({ writerThreads: 0 }), 'ERR_INVALID_ARG', /writerThreads/);
    expectKvError(() => make({ approximate: { ttlMs: -1 } }), 'ERR_INVALID_ARG', /ttlMs/);
    expectKvError(() => make({ now: 5 as never }), 'ERR_INVALID_ARG', /opts\.now/);
    expectKvError(() => make({ blocksize: 4 } as never), 'ERR_INVALID_ARG', /unknown option "blocksize"/);
    const i = make();
    expectKvError(() => i.findMatches([-1n]), 'ERR_INVALID_ARG', /localHashes\[0\]/);
    expectKvError(() => i.removeWorker(-1), 'ERR_INVALID_ARG', /workerId/);
    expectKvError(() => i.removeWorker(1, 1.5), 'ERR_INVALID_ARG', /dpRank/);
    expectKvError(() => i.findMatchesForRequest([1, 2, 3, 4], { backend: 'js' } as never), 'ERR_INVALID_ARG', /unknown option "backend"/);
    expectKvError(() => i.recordRouting(1, 0, [1, 2, 3, 4]), 'ERR_INVALID_ARG', /approximate mode/);
  });
});
