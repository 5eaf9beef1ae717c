/**
 * Both backends against each other on damaged engine payloads: the captured batches with bytes
 * flipped, cut short or replaced by msgpack markers, seeded. Each payload must decode to the same
 * batch on both or fail on both, apply with the same outcome, and leave both indexes the same.
 * This found five differences (all fixed): the native reader dropped a uint64 token id past
 * 2^32 and read the next item in its place; the JS one read bytes that are not UTF-8, took the
 * reserved byte 0xc1 (msgpackr's sentinel) in an event both skip, read a value of one of
 * msgpackr's own extension types with msgpackr's framing, not msgpack's, and took an integral
 * float for an integer where the native one refused it (both now read one within 64-bit range
 * as that integer; the JS one had wrapped a larger one into a u64 hash).
 * One difference is left, documented: the JS decoder fails a batch holding any msgpack
 * extension value, where the native one skips one in a field it ignores. Engines send none.
 */

import { describe, expect, test } from 'vitest';
import { decodeEngineBatch, KvIndex } from '../ts/index.js';
import { SeededRandom } from '../ts/random.js';
import { json, callOutcome as outcome } from './helpers/call-outcome.js';
import { batchesByRank, CAPTURE_DIR, captureNames, readCapture } from './helpers/kvcap.js';

const NAMES = captureNames();
if (NAMES.length === 0) console.log(`skipped: no engine captures in ${CAPTURE_DIR}`);
const MUTATIONS = 3000;
const MARKERS = [0xc0, 0xc2, 0xc3, 0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd3, 0xca, 0xcb, 0x90, 0x80, 0xa0, 0xdc, 0xde];

function damage(payload: Uint8Array, rng: SeededRandom): Uint8Array {
  const out = Uint8Array.from(payload);
  const at = () => rng.int(0, out.length - 1);
  switch (rng.int(0, 3)) {
    case 0:
      for (let i = rng.int(1, 4); i > 0; i--) out[at()] ^= 1 << rng.int(0, 7);
      return out;
    case 1:
      return out.subarray(0, at());
    case 2:
      out[at()] = MARKERS[rng.int(0, MARKERS.length - 1)];
      return out;
    default:
      out[at()] = rng.int(0, 255);
      return out;
  }
}

describe.skipIf(NAMES.length === 0)('damaged engine payloads, native against pure JS', () => {
  // Seeds 15 and 30 found the last two differences fixed: 0xc1 in an event both skip (msgpackr
  // returns it as a sentinel), and an extension type msgpackr reads with its own framing.
  test.each([1, 2, 3, 4, 15, 30])('seed %i: the same decode, the same apply, the same index', async (seed) => {
    const payloads = NAMES.flatMap((name) => [...batchesByRank(readCapture(name)).values()].flat().map((b) => b.payload));
    const rng = new SeededRandom(seed);
    const native = new KvIndex({ blockSize: 16, backend: 'native' });
    const js = new KvIndex({ blockSize: 16, backend: 'js' });
    let documented = 0;
    try {
      for (let i = 0; i < MUTATIONS; i++) {
        const payload = damage(payloads[rng.int(0, payloads.length - 1)], rng);
        const a = outcome(() => decodeEngineBatch(payload, { backend: 'native' }));
        const b = outcome(() => decodeEngineBatch(payload, { backend: 'js' }));
        // The documented difference, left out of both indexes: an extension value msgpackr cannot read.
        if (a.ok && !b.ok && /Unknown extension type|extension value/.test(b.text)) {
          documented++;
          continue;
        }
        expect(b.ok, `payload ${Buffer.from(payload).toString('hex')}: native ${a.text.slice(0, 200)}, js ${b.text.slice(0, 200)}`).toBe(
          a.ok,
        );
        if (a.ok) expect(b.text).toBe(a.text);
        const applied = [native, js].map((index) => outcome(() => index.applyEngineBatch(1, 0, payload)));
        expect(applied[1].ok).toBe(applied[0].ok);
        if (applied[0].ok) expect(applied[1].text).toBe(applied[0].text);
      }
      await native.flush();
      expect(json(js.dump())).toBe(json(native.dump()));
      expect(native.engineStats(1, 0).batches).toBeGreaterThan(0);
      expect(documented).toBeLessThan(MUTATIONS / 100);
    } finally {
      native.close();
      js.close();
    }
  });
});
