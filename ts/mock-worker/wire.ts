/**
 * KV events as the engines' publishers lay them out on the wire, for the mock worker: batches
 * `[ts (float64), events, dp_rank]` with vLLM 0.33's map events (field order and omitted defaults
 * as its msgspec structs write them), vLLM 0.11's 7-field arrays, or SGLang 0.5.19's arrays with
 * signed hashes. The ingestion decoder reads all three back (a test checks this against the
 * engines' own captures).
 * @module
 */

import { KvRouteError } from '../errors.js';
import { loadMsgpackr } from '../js/ingest/deps.js';
import { describe } from '../validate.js';

/**
 * Which publisher the mock worker imitates.
 * @group Mock worker
 */
export type WireFormat = 'vllm-0.33' | 'vllm-0.11' | 'sglang';

/**
 * Blocks entered the engine's prefix cache.
 * @group Mock worker
 */
export interface WireBlockStored {
  /** Discriminant. */
  type: 'BlockStored';
  /** Engine hashes of consecutive full blocks (unsigned; SGLang's wire writes them signed). */
  blockHashes: bigint[];
  /** The block before the first, or null at a chain root. */
  parent: bigint | null;
  /** `blockHashes.length × blockSize` token ids. */
  tokens: number[];
  /** Tokens per block. */
  blockSize: number;
  /** The LoRA adapter's name (vLLM 0.33's `lora_name`; the array formats carry only `loraId`). */
  loraName?: string;
  /** vLLM's integer id of the adapter (`lora_id`, from 1). */
  loraId?: number;
  /** vLLM 0.33's `extra_keys` per block (adapter name, then the salt in a chain's first block); null for none. */
  extraKeys?: (string[] | null)[];
  /** SGLang's `cache_salt` of the stored chain (a trailing `{"cache_salt"}` in its arrays). */
  cacheSalt?: string;
  /** Where the blocks are: `GPU` (default), or a lower tier such as vLLM's `CPU` or SGLang's `CPU_PINNED`. */
  medium?: string;
}

/**
 * Blocks left the engine's prefix cache.
 * @group Mock worker
 */
export interface WireBlockRemoved {
  /** Discriminant. */
  type: 'BlockRemoved';
  /** Engine hashes removed. */
  blockHashes: bigint[];
  /** The tier they left: `GPU` (default), or a lower tier such as vLLM's `CPU`. */
  medium?: string;
}

/**
 * The engine dropped its whole cache.
 * @group Mock worker
 */
export interface WireAllBlocksCleared {
  /** Discriminant. */
  type: 'AllBlocksCleared';
}

/**
 * One KV event in engine terms; the wire format decides its encoding.
 * @group Mock worker
 */
export type WireEvent = WireBlockStored | WireBlockRemoved | WireAllBlocksCleared;

type Packr = InstanceType<ReturnType<typeof loadMsgpackr>['Packr']>;
let packr: Packr | undefined;

/** msgpackr is an optional dependency: loaded when the first batch is encoded. */
function packer(): Packr {
  packr ??= new (loadMsgpackr().Packr)({ useRecords: false, variableMapSize: true });
  return packr;
}

/** Replay replies carry a topic frame from vLLM 0.26 (and SGLang 0.5.22) on. */
export function replayHasTopicFrame(wire: WireFormat): boolean {
  return wire === 'vllm-0.33';
}

function hashOnWire(h: bigint, wire: WireFormat): bigint | number {
  const v = wire === 'sglang' ? BigInt.asIntN(64, h) : h;
  // Small values as numbers so they get msgpack's compact encodings, as msgspec writes them.
  return v >= -(2n ** 31n) && v < 2n ** 32n ? Number(v) : v;
}

function encodeEvent(e: WireEvent, wire: WireFormat): unknown {
  const hashes = e.type === 'AllBlocksCleared' ? [] : e.blockHashes.map((h) => hashOnWire(h, wire));
  if (wire === 'vllm-0.33') {
    if (e.type === 'BlockStored') {
      return new Map<string, unknown>([
        ['type', 'BlockStored'],
        ['block_hashes', hashes],
        ['parent_block_hash', e.parent === null ? null : hashOnWire(e.parent, wire)],
        ['token_ids', e.tokens],
        ['block_size', e.blockSize],
        ['lora_id', e.loraId ?? null],
        ['medium', e.medium ?? 'GPU'],
        ['lora_name', e.loraName ?? null],
        ['extra_keys', e.extraKeys ?? hashes.map(() => null)],
        ['group_idx', 0],
        ['kv_cache_spec_kind', 'full_attention'],
      ]);
    }
    if (e.type === 'BlockRemoved') {
      return new Map<string, unknown>([
        ['type', 'BlockRemoved'],
        ['block_hashes', hashes],
        ['medium', e.medium ?? 'GPU'],
        ['group_idx', 0],
      ]);
    }
    return new Map([['type', 'AllBlocksCleared']]);
  }
  if (e.type === 'BlockStored') {
    const stored = [
      'BlockStored',
      hashes,
      e.parent === null ? null : hashOnWire(e.parent, wire),
      e.tokens,
      e.blockSize,
      e.loraId ?? null,
      e.medium ?? 'GPU',
    ];
    // SGLang 0.5.19's salted store (`BlockStoredWithMetadata`) appends its metadata.
    return wire === 'sglang' && e.cacheSalt !== undefined ? [...stored, new Map([['cache_salt', e.cacheSalt]])] : stored;
  }
  if (e.type === 'BlockRemoved') return ['BlockRemoved', hashes, e.medium ?? 'GPU'];
  return ['AllBlocksCleared'];
}

/**
 * One batch's payload in an engine's wire format. The timestamp is always a float64, as msgspec
 * writes a Python float.
 * @group Mock worker
 * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument (events, dp rank, wire format).
 */
export function encodeBatch(tsSeconds: number, events: readonly WireEvent[], dpRank: number, wire: WireFormat): Uint8Array {
  checkBatchArgs(tsSeconds, events, dpRank, wire);
  const ts = new Uint8Array(9);
  ts[0] = 0xcb;
  new DataView(ts.buffer).setFloat64(1, tsSeconds, false);
  const body = packer().pack(events.map((e) => encodeEvent(e, wire)));
  const rank = packer().pack(dpRank);
  const out = new Uint8Array(1 + ts.length + body.length + rank.length);
  out[0] = 0x93;
  out.set(ts, 1);
  out.set(body, 1 + ts.length);
  out.set(rank, 1 + ts.length + body.length);
  return out;
}

const WIRES: readonly WireFormat[] = ['vllm-0.33', 'vllm-0.11', 'sglang'];
const U64_MAX = 2n ** 64n - 1n;

function checkHashes(v: unknown, name: string): void {
  if (!Array.isArray(v) || !v.every((h) => typeof h === 'bigint' && h >= 0n && h <= U64_MAX))
    throw new KvRouteError('ERR_INVALID_ARG', `${name} must be an array of u64 bigints, got ${describe(v)}`);
}

function checkBatchArgs(ts: unknown, events: unknown, dpRank: unknown, wire: unknown): void {
  const bad = (m: string) => new KvRouteError('ERR_INVALID_ARG', m);
  if (typeof ts !== 'number' || !Number.isFinite(ts)) throw bad(`tsSeconds must be a finite number, got ${describe(ts)}`);
  if (typeof dpRank !== 'number' || !Number.isInteger(dpRank) || dpRank < 0 || dpRank > 0xffffffff)
    throw bad(`dpRank must be an integer in [0, 2^32), got ${describe(dpRank)}`);
  if (!WIRES.includes(wire as WireFormat)) throw bad(`wire must be one of ${WIRES.join(', ')}, got ${describe(wire)}`);
  if (!Array.isArray(events)) throw bad(`events must be an array, got ${describe(events)}`);
  events.forEach((e: unknown, i: number) => {
    const ev = e as Record<string, unknown> | null;
    if (ev === null || typeof ev !== 'object') throw bad(`events[${i}] must be an event object, got ${describe(e)}`);
    if (ev.type === 'AllBlocksCleared') return;
    checkHashes(ev.blockHashes, `events[${i}].blockHashes`);
    if (ev.medium !== undefined && (typeof ev.medium !== 'string' || ev.medium === ''))
      throw bad(`events[${i}].medium must be a non-empty string, got ${describe(ev.medium)}`);
    if (ev.type === 'BlockRemoved') return;
    if (ev.type !== 'BlockStored')
      throw bad(`events[${i}].type must be BlockStored, BlockRemoved or AllBlocksCleared, got ${describe(ev.type)}`);
    if (ev.parent !== null && !(typeof ev.parent === 'bigint' && ev.parent >= 0n && ev.parent <= U64_MAX))
      throw bad(`events[${i}].parent must be a u64 bigint or null`);
    if (!Array.isArray(ev.tokens) || !ev.tokens.every((t) => Number.isInteger(t) && t >= 0 && t <= 0xffffffff))
      throw bad(`events[${i}].tokens must be token ids`);
    if (typeof ev.blockSize !== 'number' || !Number.isInteger(ev.blockSize) || ev.blockSize < 0)
      throw bad(`events[${i}].blockSize must be a non-negative integer`);
    for (const k of ['loraName', 'cacheSalt'] as const)
      if (ev[k] !== undefined && typeof ev[k] !== 'string') throw bad(`events[${i}].${k} must be a string`);
    if (ev.loraId !== undefined && !(Number.isInteger(ev.loraId) && (ev.loraId as number) > 0 && (ev.loraId as number) <= 0x7fffffff))
      throw bad(`events[${i}].loraId must be a positive integer`);
    const keys = ev.extraKeys;
    if (
      keys !== undefined &&
      !(
        Array.isArray(keys) &&
        keys.length === (ev.blockHashes as unknown[]).length &&
        keys.every((k) => k === null || (Array.isArray(k) && k.every((x) => typeof x === 'string')))
      )
    )
      throw bad(`events[${i}].extraKeys must hold, per block, a list of strings or null`);
  });
}
