/**
 * Decoded engine events → index events per (worker, dp rank): the twin of kvroute-core's
 * `ingest::convert`, rule for rule (its module docs list the rules).
 * @internal
 * @module
 */

import type { RawEngineEvent, RawExtraKey, RawIngestCounters } from '../../backend-types.js';
import {
  FLAG_DEVICE_TIER,
  FLAG_HAS_PARENT,
  KIND_CLEARED,
  KIND_REMOVED,
  KIND_STORED,
  type PackedWriter,
  tierFlags,
} from '../../events/packed.js';
import { blockCount } from '../../validate.js';
import { jsHashing } from '../hashing.js';
import { countFiltered, emptyCounters, type FilterReason } from './counters.js';

/** The prefix that marks a cache namespace in `extra_keys` (Dynamo's frontend convention). */
export const CACHE_SALT_PREFIX = 'dynamo-cache-salt:';

const AMBIGUOUS = Symbol('ambiguous');
type Namespace = string | typeof AMBIGUOUS;
type KindClass = 'main' | 'non-main' | 'unknown';

const MAIN_KINDS = new Set(['full_attention', 'mla_attention', 'sink_full_attention']);
const NON_MAIN_KINDS = new Set([
  'sliding_window',
  'chunked_local_attention',
  'mamba',
  'cross_attention',
  'encoder_only_attention',
  'sliding_window_mla',
  'mamba2',
  'short_conv',
  'linear_attention',
]);

function classifyKind(kind: string): KindClass {
  if (MAIN_KINDS.has(kind)) return 'main';
  return NON_MAIN_KINDS.has(kind) ? 'non-main' : 'unknown';
}

/** Lower tier of a medium (0 host pinned, 1 disk, 2 external), -1 for device, undefined if unknown. */
export function tierOf(medium: string | null | undefined): number | undefined {
  switch (medium ?? '') {
    case '':
    case 'GPU':
    case 'DEVICE':
      return -1;
    case 'CPU':
    case 'CPU_PINNED':
    case 'CPU_TIER1':
      return 0;
    case 'CPU_TIER2':
    case 'DISK':
    case 'NVME':
    case 'STORAGE':
      return 1;
    case 'EXTERNAL':
    case 'NETWORK':
    case 'REMOTE':
    case 'SHARED':
      return 2;
    default:
      return undefined;
  }
}

const HEX64 = /^[0-9a-fA-F]{64}$/;

/** A multimodal id as u64 (first 16 hex digits of a 64-hex id), or undefined. */
export function mmHashOf(id: string): bigint | undefined {
  return HEX64.test(id) ? BigInt(`0x${id.slice(0, 16)}`) : undefined;
}

function isMarker(id: string): boolean {
  return HEX64.test(id) && /^0{48}$/.test(id.slice(16));
}

export interface ConvertOutcome {
  blockSizeMismatch?: [number, number];
  freshRootStore: boolean;
  cleared: boolean;
}

export class RankConverter {
  private readonly namespaces = new Map<bigint, Namespace>();
  private readonly groups = new Map<number, KindClass>();
  private readonly tiers: Set<bigint>[] = [new Set(), new Set(), new Set()];
  counters: RawIngestCounters = emptyCounters();

  tierBlocks(): number[] {
    return this.tiers.map((t) => t.size);
  }

  reset(): void {
    this.namespaces.clear();
    this.groups.clear();
    for (const t of this.tiers) t.clear();
  }

  convert(
    workerId: bigint,
    dpRank: number,
    blockSize: number,
    eventId: bigint,
    events: RawEngineEvent[],
    out: PackedWriter,
  ): ConvertOutcome {
    const outcome: ConvertOutcome = { freshRootStore: false, cleared: false };
    for (const e of events) {
      if (e.type === 'BlockStored') this.stored(e, workerId, dpRank, blockSize, eventId, out, outcome);
      else if (e.type === 'BlockRemoved') this.removed(e, workerId, dpRank, eventId, out);
      else if (e.ownership != null) countFiltered(this.counters, 'unsupported_ownership');
      else {
        this.counters.clearedEvents++;
        this.reset();
        outcome.cleared = true;
        out.pushMeta(KIND_CLEARED, dpRank, FLAG_DEVICE_TIER, 0);
        out.pushBigInt(workerId);
        out.pushBigInt(eventId);
      }
    }
    return outcome;
  }

  private gate(e: RawEngineEvent): number | undefined {
    if (e.ownership != null) return this.filtered('unsupported_ownership');
    if (e.locality != null && e.locality !== 'LOCAL') return this.filtered('non_local_locality');
    const tier = tierOf(e.medium);
    if (tier === undefined) return this.filtered('unknown_medium');
    return tier;
  }

  private filtered(why: FilterReason): undefined {
    countFiltered(this.counters, why);
    return undefined;
  }

  private stored(
    e: RawEngineEvent,
    workerId: bigint,
    dpRank: number,
    blockSize: number,
    eventId: bigint,
    out: PackedWriter,
    outcome: ConvertOutcome,
  ): void {
    const tier = this.gate(e);
    if (tier === undefined) return;
    const hashes = e.blockHashes as BigUint64Array;
    const lower = tier >= 0 ? tier : undefined;
    if (lower !== undefined) {
      this.counters.tierStored[lower] += hashes.length;
      for (const h of hashes) this.tiers[lower].add(h);
    }
    const group = e.groupIdx ?? 0;
    if (e.kvCacheSpecKind != null) {
      const cls = classifyKind(e.kvCacheSpecKind);
      this.groups.set(group, cls);
      if (cls === 'non-main') return void this.filtered('non_main_attention_kind');
      if (cls === 'unknown') return void this.filtered('unknown_kind');
    } else if ((this.groups.get(group) ?? 'main') !== 'main') return void this.filtered('non_main_attention_group');
    if (group !== 0) return void this.filtered('non_main_group');
    const tokens = e.tokenIds as Uint32Array;
    if (e.blockSize === 0 || tokens.length === 0) return void this.filtered('placeholder');
    if (e.blockSize !== blockSize) {
      if (lower !== undefined) return void this.filtered('tier_block_size_mismatch');
      outcome.blockSizeMismatch ??= [e.blockSize as number, blockSize];
      return void this.filtered('block_size_mismatch');
    }
    const keys = e.extraKeys ?? [];
    if (keys.some((k) => k?.some((x) => x.kind === 'bytes'))) return void this.filtered('prompt_embeds');
    const lora = e.loraName ? e.loraName : e.loraId != null ? `lora-id:${e.loraId}` : undefined;
    let namespace: string | undefined = e.cacheSalt ? e.cacheSalt : saltFromExtraKeys(keys[0] ?? undefined, lora);
    if (namespace === undefined && e.parentBlockHash != null) {
      const inherited = this.namespaces.get(e.parentBlockHash);
      if (inherited === AMBIGUOUS) return void this.filtered('ambiguous_cache_namespace');
      namespace = inherited;
    }
    const eagle = e.eagle === true;
    const full = blockCount(tokens.length, blockSize, eagle);
    const count = Math.min(hashes.length, full);
    if (count < hashes.length) this.counters.shortTokens++;
    const { offsets, flat } = mmHashesOf(keys);
    const locals = jsHashing.blockHashes(tokens, blockSize, lora, namespace, eagle, offsets, flat);
    for (let i = 0; i < count; i++) {
      const h = hashes[i];
      const old = this.namespaces.get(h);
      if (namespace !== undefined) {
        if (old === undefined) this.namespaces.set(h, namespace);
        else if (old !== AMBIGUOUS && old !== namespace) this.namespaces.set(h, AMBIGUOUS);
      } else if (old !== undefined && old !== AMBIGUOUS) this.namespaces.set(h, AMBIGUOUS);
    }
    const parent = e.parentBlockHash;
    if (lower === undefined) {
      this.counters.storedEvents++;
      this.counters.storedBlocks += count;
      if (parent == null && count > 0) outcome.freshRootStore = true;
    }
    out.pushMeta(KIND_STORED, dpRank, tierFlags(lower) | (parent != null ? FLAG_HAS_PARENT : 0), count);
    out.pushBigInt(workerId);
    out.pushBigInt(eventId);
    if (parent != null) out.pushBigInt(parent);
    for (let i = 0; i < count; i++) {
      out.pushBigInt(hashes[i]);
      out.pushBigInt(locals[i]);
    }
  }

  private removed(e: RawEngineEvent, workerId: bigint, dpRank: number, eventId: bigint, out: PackedWriter): void {
    const tier = this.gate(e);
    if (tier === undefined) return;
    const hashes = e.blockHashes as BigUint64Array;
    const lower = tier >= 0 ? tier : undefined;
    if (lower !== undefined) for (const h of hashes) if (this.tiers[lower].delete(h)) this.counters.tierRemoved[lower]++;
    const group = e.groupIdx ?? 0;
    if ((this.groups.get(group) ?? 'main') !== 'main') return void this.filtered('non_main_attention_group');
    if (group !== 0) return void this.filtered('non_main_group');
    if (lower !== undefined) {
      // The namespaces are the device chain's: an offload tier dropping its copy says nothing of it.
      out.pushMeta(KIND_REMOVED, dpRank, tierFlags(lower), hashes.length);
      out.pushBigInt(workerId);
      out.pushBigInt(eventId);
      for (const h of hashes) out.pushBigInt(h);
      return;
    }
    for (const h of hashes) {
      const ns = this.namespaces.get(h);
      if (ns !== undefined && ns !== AMBIGUOUS) this.namespaces.delete(h);
    }
    this.counters.removedEvents++;
    this.counters.removedHashes += hashes.length;
    out.pushMeta(KIND_REMOVED, dpRank, FLAG_DEVICE_TIER, hashes.length);
    out.pushBigInt(workerId);
    out.pushBigInt(eventId);
    for (const h of hashes) out.pushBigInt(h);
  }
}

/** `dynamo-cache-salt:<ns>`, or vLLM's bare salt (not the LoRA name, not a multimodal id). */
function saltFromExtraKeys(firstBlock: RawExtraKey[] | undefined, lora: string | undefined): string | undefined {
  if (!firstBlock) return undefined;
  let loraSkipped = false;
  for (const key of firstBlock) {
    if (key.kind !== 'text') continue;
    const text = key.text as string;
    if (!loraSkipped && text === lora) {
      loraSkipped = true;
      continue;
    }
    if (text.startsWith(CACHE_SALT_PREFIX)) {
      const ns = text.slice(CACHE_SALT_PREFIX.length);
      if (ns !== '') return ns;
      continue;
    }
    if (text !== '' && mmHashOf(text) === undefined) return text;
  }
  return undefined;
}

function mmHashesOf(keys: (RawExtraKey[] | null | undefined)[]): { offsets?: Uint32Array; flat?: BigUint64Array } {
  const flat: bigint[] = [];
  const offsets = new Uint32Array(keys.length + 1);
  keys.forEach((block, i) => {
    for (const k of block ?? []) {
      const id = k.kind === 'pair' || (k.kind === 'text' && isMarker(k.text as string)) ? mmHashOf(k.text as string) : undefined;
      if (id !== undefined) flat.push(id);
    }
    offsets[i + 1] = flat.length;
  });
  if (flat.length === 0) return {};
  return { offsets, flat: BigUint64Array.from(flat) };
}
