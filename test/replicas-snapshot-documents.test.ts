/**
 * Warm-start snapshot documents: the native backend reads them in Rust, the JS backend in
 * TypeScript. Both must take the same documents to the same index and the same resume points,
 * and refuse the same documents with the same code and message. Each document is served by a
 * real HTTP peer (`/dump`), as a replica's is; seeded mutations of a valid document cover the
 * shapes a damaged or foreign snapshot takes.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { KvIndex, warmStart } from '../ts/index.js';
import type { BACKENDS } from './helpers/backends.js';
import { Rng } from './helpers/random.js';
import { type Outcome, SnapshotPeer, sameOutcome as same } from './helpers/snapshot-peer.js';

const BS = 4;
const peer = new SnapshotPeer();
beforeAll(() => peer.start());
afterAll(() => peer.close());

const stored = (worker: string, parent: string, hashes: number[]) =>
  `{"worker_id": ${worker}, "event": {"event_id": 1, "dp_rank": 0, "data": {"stored": {"parent_hash": ${parent}, "blocks": [${hashes
    .map((h) => `{"block_hash": ${h}, "tokens_hash": ${h + 1000}}`)
    .join(', ')}]}}}}`;

/** The pieces of a valid document, each of which a mutation may replace. */
interface Parts {
  key: string;
  blockSize: string;
  events: string;
  seqs: string;
  extra: string;
}

const VALID: Parts = {
  key: '"m:default"',
  blockSize: '4',
  events: `[${stored('18446744073709551615', 'null', [1, 2, 3])}, ${stored('"7"', 'null', [4])}]`,
  seqs: '[{"worker_id": "18446744073709551615", "dp_rank": 0, "seq": 41}, {"worker_id": 7, "dp_rank": 1, "seq": "9007199254740993"}]',
  extra: '',
};

const render = (p: Parts) =>
  `{${p.key}: {"block_size": ${p.blockSize}, "events": ${p.events}${p.seqs === '' ? '' : `, "engine_seqs": ${p.seqs}`}}${p.extra}}`;

/** Replacements for each part: valid variants, damaged ones and foreign shapes. */
const MUTATIONS: Record<keyof Parts, string[]> = {
  key: ['"m"', '"other:default"', '"m:default:x"'],
  blockSize: ['"4"', '8', '-4', '4.0', 'null', '"x"', '[4]', '{}', '18446744073709551620', '"00000000000000000004"'],
  events: ['[]', '{}', 'null', '5', `[${stored('-1', 'null', [1])}]`, `[${stored('1', 'null', [1])}, 7]`, '[{"worker_id": 1}]'],
  seqs: [
    '',
    'null',
    '[]',
    '3',
    '[null]',
    '[{"dp_rank": 0, "seq": 1}]',
    '[{"worker_id": 1, "dp_rank": "0", "seq": -1}]',
    '[7]',
    // The digest of the batch at that seq: optional, a u64 when given.
    '[{"worker_id": 1, "dp_rank": 0, "seq": 1, "digest": "18446744073709551615"}, {"worker_id": 2, "dp_rank": 0, "seq": 1, "digest": null}]',
    '[{"worker_id": 1, "dp_rank": 0, "seq": 1, "digest": -1}]',
    '[{"worker_id": 1, "dp_rank": 0, "seq": 1, "digest": 1.5}]',
  ],
  extra: [', "n:default": {"block_size": 4, "events": []}', ', "m:default": {"block_size": 4, "events": []}', ', "x": 1'],
};

const outcome = (backend: (typeof BACKENDS)[number], text: string, model?: string): Promise<Outcome> =>
  peer.outcome(backend, text, BS, model);

describe('snapshot documents read the same on both backends', () => {
  test('a valid document, a bare event array, and the choice of entry by model', async () => {
    for (const [text, model] of [
      [render(VALID), undefined],
      [VALID.events, undefined],
      // A byte-order mark, which the fetch's UTF-8 decoding takes off the body.
      [`\uFEFF${render(VALID)}`, undefined],
      [render({ ...VALID, extra: ', "n:default": {"block_size": 4, "events": []}' }), 'm'],
      [render({ ...VALID, extra: ', "n": {"block_size": 4, "events": []}' }), 'n'],
    ] as const) {
      const [native, js] = [await outcome('native', text, model), await outcome('js', text, model)];
      expect(native, text).toEqual(js);
      expect(native.ok, text).toBe(true);
    }
    expect(await outcome('native', render(VALID))).toEqual({ ok: true, events: 2, blocks: 4, resumable: 2 });
  });

  test('seeded mutations of a document: the same result or the same refusal', async () => {
    const rng = new Rng(20261204);
    const parts = Object.keys(MUTATIONS) as (keyof Parts)[];
    let refused = 0;
    for (let i = 0; i < 150; i++) {
      const p = { ...VALID };
      for (let m = 1 + rng.int(2); m > 0; m--) {
        const part = rng.pick(parts);
        p[part] = rng.pick(MUTATIONS[part]);
      }
      const text = render(p);
      const model = rng.int(4) === 0 ? 'm' : undefined;
      const [native, js] = [await outcome('native', text, model), await outcome('js', text, model)];
      expect(same(native, js), `${text} (model ${model}): ${JSON.stringify([native, js])}`).toBe(true);
      if (!native.ok) refused++;
    }
    // The mutations reach both sides of the line.
    expect(refused).toBeGreaterThan(30);
    expect(refused).toBeLessThan(140);
  });

  test('the nesting limit counts from each event, not from the document around it', async () => {
    const deep = (levels: number) =>
      `[{"worker_id": 1, "state_source": ${'['.repeat(levels)}${']'.repeat(levels)}, "event": {"event_id": 0, "data": "cleared"}}]`;
    for (const [events, ok] of [
      [deep(126), true],
      [deep(127), false],
    ] as const) {
      for (const text of [render({ ...VALID, events }), events]) {
        const [native, js] = [await outcome('native', text), await outcome('js', text)];
        expect(same(native, js), `${text.slice(0, 60)}: ${JSON.stringify([native, js])}`).toBe(true);
        expect(native.ok, text.slice(0, 60)).toBe(ok);
        if (!native.ok) expect(js).toMatchObject({ code: 'ERR_INVALID_EVENT', message: expect.stringMatching(/^events\[0\]/) });
      }
    }
  });

  test('closing the index while a warm start is in flight rejects it with ERR_CLOSED and applies nothing', async () => {
    peer.serve(render(VALID));
    for (const backend of ['native', 'js'] as const) {
      const index = new KvIndex({ blockSize: BS, backend });
      const started = warmStart(index, { peer: peer.url });
      index.close();
      await expect(started, backend).rejects.toMatchObject({ code: 'ERR_CLOSED' });
      expect(() => index.stats()).toThrow(/closed/);
    }
  });

  test('documents that are not a snapshot at all', async () => {
    for (const text of [
      '',
      '{',
      '5',
      '"x"',
      'null',
      '{}',
      '[',
      '[1]',
      '[[1]]',
      '{"m": 5}',
      '{"m": []}',
      '{"m": {"events": [], "events": [1]}}',
      // Not JSON's whitespace before the document (Unicode spaces).
      `\u00A0${VALID.events}`,
      `\u0085${render(VALID)}`,
    ]) {
      const [native, js] = [await outcome('native', text), await outcome('js', text)];
      expect(native.ok, text).toBe(false);
      expect(same(native, js), `${text}: ${JSON.stringify([native, js])}`).toBe(true);
    }
  });
});
