/**
 * Warm-start snapshot documents: the native backend reads them in Rust, the JS backend in
 * TypeScript. Both must take the same documents to the same index and the same resume points,
 * and refuse the same documents with the same code and message. Each document is served by a
 * real HTTP peer (`/dump`), as a replica's is; seeded mutations of a valid document cover the
 * shapes a damaged or foreign snapshot takes.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { KvIndex, KvRouteError, warmStart } from '../ts/index.js';
import type { BACKENDS } from './helpers/backends.js';
import { Rng } from './helpers/random.js';

const BS = 4;
let served = '';
let server: Server;
let peer = '';

beforeAll(async () => {
  server = createServer((req, res) => {
    res.writeHead(req.url === '/dump' ? 200 : 404, { 'content-type': 'application/json' });
    res.end(served);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  peer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

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
  seqs: ['', 'null', '[]', '3', '[null]', '[{"dp_rank": 0, "seq": 1}]', '[{"worker_id": 1, "dp_rank": "0", "seq": -1}]', '[7]'],
  extra: [', "n:default": {"block_size": 4, "events": []}', ', "m:default": {"block_size": 4, "events": []}', ', "x": 1'],
};

type Outcome = { ok: true; events: number; blocks: number; resumable: number } | { ok: false; code: string; message: string };

async function outcome(backend: (typeof BACKENDS)[number], text: string, model?: string): Promise<Outcome> {
  served = text;
  const index = new KvIndex({ blockSize: BS, backend });
  try {
    const r = await warmStart(index, { peer, ...(model === undefined ? {} : { model }) });
    return { ok: true, events: r.events, blocks: r.blocks, resumable: r.resumableRanks };
  } catch (err) {
    expect(err).toBeInstanceOf(KvRouteError);
    const e = err as KvRouteError;
    // Nothing of a refused document is applied.
    expect(index.stats().blocks).toBe(0);
    return { ok: false, code: e.code, message: e.message };
  } finally {
    index.close();
  }
}

/**
 * Equal outcomes. Two refusals as "not JSON" may word the syntax error differently (serde and
 * the JavaScript parser), and so may two refusals of one event, whose reasons `applyEvents`
 * words (a missing field is serde's "missing field" natively: README, Limitations); the
 * snapshot's own messages ("warm start: …") must match exactly.
 */
function same(a: Outcome, b: Outcome): boolean {
  if (a.ok || b.ok) return JSON.stringify(a) === JSON.stringify(b);
  if (a.code !== b.code) return false;
  const NOT_JSON = 'warm start: the snapshot is not JSON';
  if (a.message.startsWith(NOT_JSON) && b.message.startsWith(NOT_JSON)) return true;
  const event = /^events\[\d+\]/;
  if (event.test(a.message) && event.test(b.message)) return a.message.match(event)?.[0] === b.message.match(event)?.[0];
  return a.message === b.message;
}

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
    served = render(VALID);
    for (const backend of ['native', 'js'] as const) {
      const index = new KvIndex({ blockSize: BS, backend });
      const started = warmStart(index, { peer });
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
