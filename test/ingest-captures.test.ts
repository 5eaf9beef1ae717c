import { describe, expect, test } from 'vitest';
import { decodeEngineBatch, KvIndex } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import {
  batchesByRank,
  CAPTURE_DIR,
  type Capture,
  captureNames,
  capturesPresent,
  readCapture,
  type TruthBatch,
  type TruthBlock,
} from './helpers/kvcap.js';

if (!capturesPresent()) console.log(`skipped: no engine captures in ${CAPTURE_DIR}`);
const NAMES = captureNames();

const u64 = (h: string) => String(BigInt.asUintN(64, BigInt(h)));

/**
 * A deliberately simple model of what kvroute's index must hold for one rank, from the truth
 * file's decoded batches (not from kvroute's decoder). Positions are paths of block contents
 * (tokens, LoRA, cache salt where the wire carries one), each named by the engine hash that last
 * stored it on this rank; GPU group-0 stores need a held parent; a removal drops the position and
 * everything below it (kvroute's hole-proof rule); a store reusing a name for another position is
 * rejected whole; clears and restarts empty the rank.
 */
function modelHeld(batches: TruthBatch[]): Set<string> {
  let names = new Map<string, string>(); // engine hash -> position
  let held = new Map<string, { name: string; salt: string | undefined }>(); // position -> its name
  let incarnation: number | undefined;
  for (const b of [...batches].sort((x, y) => x.incarnation - y.incarnation || x.seq - y.seq)) {
    if (incarnation !== undefined && b.incarnation !== incarnation) [names, held] = [new Map(), new Map()];
    incarnation = b.incarnation;
    for (const e of b.events) {
      if (e.type === 'AllBlocksCleared') [names, held] = [new Map(), new Map()];
      if (((e.medium as string | null) ?? 'GPU') !== 'GPU' || ((e.group_idx as number | null) ?? 0) !== 0) continue;
      const hashes = ((e.block_hashes as string[]) ?? []).map(u64);
      if (e.type === 'BlockRemoved') {
        for (const h of hashes) {
          const pos = names.get(h);
          if (pos === undefined) continue;
          for (const [p, v] of held) {
            if (p === pos || p.startsWith(`${pos}/`)) {
              held.delete(p);
              names.delete(v.name);
            }
          }
        }
        continue;
      }
      if (e.type !== 'BlockStored' || (e.token_ids as number[]).length === 0) continue;
      const parentName = e.parent_block_hash === null ? undefined : u64(e.parent_block_hash as string);
      const parentPos = parentName === undefined ? '' : names.get(parentName);
      if (parentPos === undefined) continue;
      const lora = (e.lora_name as string | null) ?? (e.lora_id != null ? `lora-id:${e.lora_id}` : '');
      const firstKeys = (e.extra_keys as (string[] | null)[] | undefined)?.[0] ?? [];
      const ownSalt =
        (e.metadata as { cache_salt?: string } | undefined)?.cache_salt ||
        firstKeys.find((k, i) => typeof k === 'string' && !(i === 0 && k === lora) && k !== lora) ||
        undefined;
      const salt = ownSalt ?? held.get(parentPos)?.salt;
      const bs = e.block_size as number;
      const tokens = e.token_ids as number[];
      const positions: string[] = [];
      let at = parentPos;
      for (let i = 0; i < hashes.length && (i + 1) * bs <= tokens.length; i++) {
        at = `${at}/${tokens.slice(i * bs, (i + 1) * bs).join(',')}~${lora}~${salt ?? ''}`;
        positions.push(at);
      }
      if (positions.some((p, i) => names.has(hashes[i]) && names.get(hashes[i]) !== p)) continue;
      positions.forEach((p, i) => {
        const old = held.get(p);
        if (old) names.delete(old.name);
        held.set(p, { name: hashes[i], salt });
        names.set(hashes[i], p);
      });
    }
  }
  return new Set([...held.values()].map((v) => v.name));
}

function heldByRank(index: KvIndex): Map<number, Set<string>> {
  const out = new Map<number, Set<string>>();
  for (const e of index.dump()) {
    if (e.storage_tier !== 'device') continue;
    const rank = e.event.dp_rank;
    const set = out.get(rank) ?? new Set();
    out.set(rank, set);
    for (const b of e.event.data.stored.blocks) set.add(String(b.block_hash));
  }
  return out;
}

async function ingestCapture(capture: Capture, backend: (typeof BACKENDS)[number]): Promise<KvIndex> {
  const index = new KvIndex({ blockSize: capture.truth.block_size, backend });
  for (const [rank, batches] of batchesByRank(capture)) {
    for (const b of batches) index.applyEngineBatch(7, rank, b.payload);
  }
  await index.flush();
  return index;
}

describe.skipIf(NAMES.length === 0).each(BACKENDS)('captured engine streams (%s)', (backend) => {
  test.each(NAMES)('%s: every batch decodes to what the truth file says was sent', (name) => {
    const capture = readCapture(name);
    for (const [rank, batches] of batchesByRank(capture)) {
      const truth = capture.truth.ranks[String(rank)].batches;
      expect(batches.map((b) => Number(b.seq))).toEqual([...new Set(truth.map((t) => t.seq))].sort((a, b) => a - b));
      for (const b of batches) {
        const want = truth.find((t) => t.seq === Number(b.seq)) as TruthBatch;
        const got = decodeEngineBatch(b.payload, { backend });
        expect(got.dpRank).toBe(want.dp_rank);
        expect(got.layout).toBe(capture.truth.layout);
        expect(got.unknownEvents).toBe(0);
        expect(got.events.map((e) => e.type)).toEqual(want.events.map((e) => e.type));
        got.events.forEach((e, i) => {
          const w = want.events[i];
          if (e.type === 'AllBlocksCleared') return;
          expect(e.blockHashes.map(String)).toEqual((w.block_hashes as string[]).map(u64));
          expect(e.medium ?? null).toBe(w.medium ?? null);
          expect(e.groupIdx ?? null).toBe(w.group_idx ?? null);
          if (e.type === 'BlockStored') {
            expect(e.parentBlockHash === null ? null : String(e.parentBlockHash)).toBe(
              w.parent_block_hash === null ? null : u64(w.parent_block_hash as string),
            );
            expect(e.tokenIds).toEqual(w.token_ids);
            expect(e.blockSize).toBe(w.block_size);
            expect(e.loraName).toBe(w.lora_name ?? null);
          }
        });
      }
    }
  });

  test.each(NAMES)('%s: the index holds exactly the reachable GPU group-0 blocks, and prompts match to their depth', async (name) => {
    const capture = readCapture(name);
    const index = await ingestCapture(capture, backend);
    try {
      const held = heldByRank(index);
      for (const [rankName, rank] of Object.entries(capture.truth.ranks)) {
        const r = Number(rankName);
        const ours = held.get(r) ?? new Set<string>();
        const model = modelHeld(rank.batches);
        expect([...ours].sort()).toEqual([...model].sort());
        // Against the truth file: equal, except that kvroute never resurrects the old
        // descendants of a re-stored mid-chain block (its hole-proof removal rule).
        const reachable = new Set(
          rank.final.blocks
            .filter((b) => b.reachable && !b.placeholder && (b.medium ?? 'GPU') === 'GPU' && (b.group_idx ?? 0) === 0)
            .map((b) => u64(b.hash)),
        );
        for (const h of ours) expect(reachable.has(h), `${name} rank ${r}: ${h} is not reachable in the truth`).toBe(true);
        const byHash = new Map(
          rank.final.blocks.filter((b) => (b.medium ?? 'GPU') === 'GPU' && (b.group_idx ?? 0) === 0).map((b) => [u64(b.hash), b]),
        );
        for (const h of ours) {
          const chain: TruthBlock[] = [];
          for (let b = byHash.get(h); b; b = b.parent === null ? undefined : byHash.get(u64(b.parent))) chain.unshift(b);
          const tokens = chain.flatMap((b) => b.tokens ?? []);
          const leaf = chain[chain.length - 1];
          const loraName = leaf.lora_name ?? (leaf.lora_id != null ? `lora-id:${leaf.lora_id}` : undefined);
          const cacheNamespace = chain.find((b) => b.cache_salt)?.cache_salt ?? undefined;
          const { scores } = index.findMatchesForRequest(tokens, { loraName, cacheNamespace });
          const mine = scores.find((s) => s.dpRank === r);
          expect(mine?.blocks, `${name} rank ${r} block ${h}`).toBe((leaf.depth as number) + 1);
        }
      }
      expect(index.engineStats().decodeErrors).toBe(0);
    } finally {
      index.close();
    }
  });
});

test.skipIf(NAMES.length === 0)('both backends build the same index from every capture', async () => {
  for (const name of NAMES) {
    const capture = readCapture(name);
    const [n, j] = [await ingestCapture(capture, 'native'), await ingestCapture(capture, 'js')];
    expect(j.dump()).toEqual(n.dump());
    expect(j.engineStats()).toEqual(n.engineStats());
    n.close();
    j.close();
  }
});
