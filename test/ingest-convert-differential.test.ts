/**
 * Both backends against each other on valid but varied engine batches: seeded vLLM map and
 * array events over a small pool of block names (so that parents, removals and clears meet
 * blocks that exist), with every field conversion reads drawn at random: hash forms (u64,
 * negative i64, 32-byte and odd-length digests), LoRA by name or id, salts and multimodal
 * `extra_keys`, tiers, groups and kinds, short and long token lists, a foreign block size. Each
 * batch must give the same result on both (or the same refusal), and the indexes must end equal:
 * the same dump, engine counters and answers. `test/ingest-differential.test.ts` does the same
 * for damaged bytes; this one reaches the conversion behind a successful decode.
 */

import { describe, expect, test } from 'vitest';
import { KvIndex } from '../ts/index.js';
import { callOutcome, json } from './helpers/call-outcome.js';
import { mapEvent, packBatch, type WireValue } from './helpers/engine-wire.js';
import { Rng } from './helpers/random.js';

const BS = 4;
const BATCHES = 400;

/** A block name from a pool of 40, written in one of the forms engines send. */
function hashValue(rng: Rng, name: number): WireValue {
  const form = rng.int(10);
  if (form === 0) return BigInt.asIntN(64, 0xfedc_ba98_0000_0000n + BigInt(name)); // negative i64
  if (form === 1) {
    const digest = new Uint8Array(32);
    digest[31] = name;
    return digest; // a 32-byte digest, folded to its last 8 bytes
  }
  return BigInt(name) * 0x1_0000_0001n;
}

function tokens(rng: Rng, blocks: number, blockSize: number): number[] {
  const out = Array.from({ length: blocks * blockSize }, () => rng.int(6));
  if (rng.chance(0.05)) out.length -= 1 + rng.int(blockSize); // short: the full blocks stay
  if (rng.chance(0.05)) out.push(7, 7); // extra tokens are ignored
  return out;
}

function extraKeys(rng: Rng, blocks: number): WireValue {
  if (rng.chance(0.7)) return null;
  return Array.from({ length: blocks }, () =>
    rng.pick<WireValue>([null, null, ['salt-a'], ['salt-b'], [['0123456789abcdef'.repeat(4), rng.int(3)]], [['lora-x', 'salt-a']]]),
  );
}

function stored(rng: Rng, parent: number | null): { event: WireValue; names: number[] } {
  const n = 1 + rng.int(4);
  const names = Array.from({ length: n }, () => 1 + rng.int(40));
  const blockSize = rng.chance(0.03) ? 8 : BS;
  const fields: Record<string, WireValue> = {
    block_hashes: names.map((h) => hashValue(rng, h)),
    parent_block_hash: parent === null ? null : hashValue(rng, parent),
    token_ids: tokens(rng, n, blockSize),
    block_size: blockSize,
    lora_id: rng.chance(0.1) ? 1 + rng.int(2) : null,
    medium: rng.pick(['GPU', 'GPU', 'GPU', 'GPU', 'CPU', 'CPU_PINNED', 'DISK', null, 'NVME']),
    lora_name: rng.chance(0.2) ? rng.pick(['lora-x', 'lora-y']) : null,
    extra_keys: extraKeys(rng, n),
    group_idx: rng.chance(0.08) ? 1 : 0,
    kv_cache_spec_kind: rng.chance(0.05) ? 'sliding_window' : 'full_attention',
  };
  if (rng.chance(0.15)) {
    // The array layout of vLLM 0.23 (12 fields, in this order).
    const order = ['block_hashes', 'parent_block_hash', 'token_ids', 'block_size', 'lora_id', 'medium', 'lora_name', 'extra_keys'];
    return { event: ['BlockStored', ...order.map((k) => fields[k]), fields.group_idx, fields.kv_cache_spec_kind, null], names };
  }
  return { event: mapEvent('BlockStored', fields), names };
}

function batch(rng: Rng, held: number[]): Uint8Array {
  const events: WireValue[] = [];
  for (let e = 1 + rng.int(3); e > 0; e--) {
    const kind = rng.int(60);
    if (kind < 40) {
      const parent = held.length > 0 && rng.chance(0.7) ? rng.pick(held) : rng.chance(0.1) ? 1 + rng.int(40) : null;
      const s = stored(rng, parent);
      held.push(...s.names);
      events.push(s.event);
    } else if (kind < 59) {
      const names = Array.from({ length: 1 + rng.int(3) }, () => (held.length > 0 && rng.chance(0.8) ? rng.pick(held) : 1 + rng.int(40)));
      const medium = rng.pick(['GPU', 'GPU', 'GPU', 'CPU', null]);
      events.push(mapEvent('BlockRemoved', { block_hashes: names.map((h) => hashValue(rng, h)), medium }));
    } else {
      held.length = 0;
      events.push(mapEvent('AllBlocksCleared', {}));
    }
  }
  return packBatch(events, { dpRank: rng.pick([0, 1, null]) });
}

describe('varied valid engine batches, native against pure JS', () => {
  test.each([1, 2, 3, 4])('seed %i: the same results, the same index, the same answers', async (seed) => {
    const rng = new Rng(seed);
    const [native, js] = [new KvIndex({ blockSize: BS, backend: 'native' }), new KvIndex({ blockSize: BS, backend: 'js' })];
    const held = new Map<string, number[]>();
    try {
      for (let i = 0; i < BATCHES; i++) {
        const [worker, rank] = [1 + rng.int(2), rng.int(2)];
        const key = `${worker}:${rank}`;
        const names = held.get(key) ?? [];
        held.set(key, names);
        const payload = batch(rng, names);
        const [a, b] = [native, js].map((index) => callOutcome(() => index.applyEngineBatch(worker, rank, payload)));
        expect(b, `batch ${i} (${Buffer.from(payload).toString('hex')})`).toEqual(a);
      }
      await native.flush();
      expect(json(js.dump())).toBe(json(native.dump()));
      expect(json(js.engineStats())).toBe(json(native.engineStats()));
      expect(js.stats().blocks).toBe(native.stats().blocks);
      expect(native.stats().blocks).toBeGreaterThan(0);
      for (let q = 0; q < 200; q++) {
        const prompt = Array.from({ length: BS * (1 + rng.int(6)) }, () => rng.int(6));
        const opts = rng.chance(0.3) ? { loraName: rng.pick(['lora-x', 'lora-y', 'lora-id:1']) } : undefined;
        expect(json(js.findMatchesForRequest(prompt, opts)), `query ${q}`).toBe(json(native.findMatchesForRequest(prompt, opts)));
      }
    } finally {
      native.close();
      js.close();
    }
  });
});
