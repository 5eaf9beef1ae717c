/**
 * Validation of `RouterEvent`s, writing each valid event straight into a packed batch. A batch is
 * all-or-nothing: the first invalid event throws `ERR_INVALID_EVENT` naming the field, and the
 * partly written batch is discarded.
 * @internal
 * @module
 */

import { KvRouteError } from '../errors.js';
import { describe } from '../validate.js';
import { FLAG_DEVICE_TIER, FLAG_HAS_PARENT, KIND_CLEARED, KIND_REMOVED, KIND_STORED, type PackedEvents, PackedWriter } from './packed.js';

const U64_MAX = (1n << 64n) - 1n;
const U32_MAX = 0xffffffff;
const DECIMAL = /^[0-9]{1,20}$/;
const TIERS = new Set(['device', 'host_pinned', 'disk', 'external']);
const TOP_KEYS = new Set(['worker_id', 'storage_tier', 'event', 'residency_domain', 'state_source']);
const EVENT_KEYS = new Set(['event_id', 'dp_rank', 'data']);
const STORED_KEYS = new Set(['parent_hash', 'start_position', 'blocks']);
const BLOCK_KEYS = new Set(['block_hash', 'tokens_hash', 'mm_extra_info']);
const REMOVED_KEYS = new Set(['block_hashes']);
const MM_KEYS = new Set(['mm_objects']);
const MM_OBJECT_KEYS = new Set(['mm_hash', 'offsets']);

function fail(where: string, what: string, value: unknown): never {
  throw new KvRouteError('ERR_INVALID_EVENT', `${where} ${what}, got ${describe(value)}`);
}

function record(value: unknown, where: string, keys: ReadonlySet<string>): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) fail(where, 'must be an object', value);
  for (const key in value) {
    if (!keys.has(key)) throw new KvRouteError('ERR_INVALID_EVENT', `${where} has an unknown field "${key}"`);
  }
  return value as Record<string, unknown>;
}

function list(value: unknown, where: string): readonly unknown[] {
  if (!Array.isArray(value)) fail(where, 'must be an array', value);
  return value;
}

/** Checks a u64 and writes it. */
function u64(w: PackedWriter, value: unknown, where: string): void {
  if (typeof value === 'number') {
    if (Number.isSafeInteger(value) && value >= 0) {
      w.pushNumber(value);
      return;
    }
  } else if (typeof value === 'bigint') {
    if (value >= 0n && value <= U64_MAX) {
      w.pushBigInt(value);
      return;
    }
  } else if (typeof value === 'string' && DECIMAL.test(value)) {
    const v = BigInt(value);
    if (v <= U64_MAX) {
      w.pushBigInt(v);
      return;
    }
  }
  fail(where, 'must be a u64 (a non-negative safe integer, a bigint or a decimal string)', value);
}

/** Checks a u32 given as a number, bigint or decimal string. */
function u32(value: unknown, where: string): number {
  const n = typeof value === 'bigint' ? Number(value) : typeof value === 'string' && DECIMAL.test(value) ? Number(value) : value;
  if (typeof n === 'number' && Number.isInteger(n) && n >= 0 && n <= U32_MAX) return n;
  return fail(where, 'must be an integer in [0, 2^32)', value);
}

function checkMmExtraInfo(value: unknown, where: string, scratch: PackedWriter): void {
  if (value === null || value === undefined) return;
  const info = record(value, where, MM_KEYS);
  list(info.mm_objects, `${where}.mm_objects`).forEach((o, i) => {
    const obj = record(o, `${where}.mm_objects[${i}]`, MM_OBJECT_KEYS);
    u64(scratch, obj.mm_hash, `${where}.mm_objects[${i}].mm_hash`);
    list(obj.offsets, `${where}.mm_objects[${i}].offsets`).forEach((pair, j) => {
      const at = `${where}.mm_objects[${i}].offsets[${j}]`;
      const p = list(pair, at);
      if (p.length !== 2 || !p.every((x) => Number.isInteger(x) && (x as number) >= 0))
        fail(at, 'must be a pair of non-negative integers', pair);
    });
  });
}

function packStored(w: PackedWriter, data: unknown, where: string, dpRank: number, flags: number, head: () => void): void {
  const s = record(data, where, STORED_KEYS);
  if (!('parent_hash' in s)) throw new KvRouteError('ERR_INVALID_EVENT', `${where}.parent_hash is missing (use null for none)`);
  if (s.start_position !== undefined && s.start_position !== null) u32(s.start_position, `${where}.start_position`);
  const blocks = list(s.blocks, `${where}.blocks`);
  const hasParent = s.parent_hash !== null;
  w.pushMeta(KIND_STORED, dpRank, flags | (hasParent ? FLAG_HAS_PARENT : 0), blocks.length);
  head();
  if (hasParent) u64(w, s.parent_hash, `${where}.parent_hash`);
  for (let i = 0; i < blocks.length; i++) {
    const at = `${where}.blocks[${i}]`;
    const b = record(blocks[i], at, BLOCK_KEYS);
    u64(w, b.block_hash, `${at}.block_hash`);
    u64(w, b.tokens_hash, `${at}.tokens_hash`);
    if (b.mm_extra_info !== undefined && b.mm_extra_info !== null)
      checkMmExtraInfo(b.mm_extra_info, `${at}.mm_extra_info`, new PackedWriter());
  }
}

function packRemoved(w: PackedWriter, data: unknown, where: string, dpRank: number, flags: number, head: () => void): void {
  const r = record(data, where, REMOVED_KEYS);
  const hashes = list(r.block_hashes, `${where}.block_hashes`);
  w.pushMeta(KIND_REMOVED, dpRank, flags, hashes.length);
  head();
  for (let i = 0; i < hashes.length; i++) u64(w, hashes[i], `${where}.block_hashes[${i}]`);
}

/** Validates one event and appends it to `w`. */
export function packEvent(w: PackedWriter, value: unknown, where: string): void {
  const e = record(value, where, TOP_KEYS);
  const tier = e.storage_tier ?? 'device';
  if (typeof tier !== 'string' || !TIERS.has(tier))
    fail(`${where}.storage_tier`, 'must be one of device, host_pinned, disk, external', tier);
  if (e.residency_domain !== undefined && typeof e.residency_domain !== 'string')
    fail(`${where}.residency_domain`, 'must be a string', e.residency_domain);
  const ev = record(e.event, `${where}.event`, EVENT_KEYS);
  const dpRank = ev.dp_rank === undefined || ev.dp_rank === null ? 0 : u32(ev.dp_rank, `${where}.event.dp_rank`);
  if (!('worker_id' in e)) throw new KvRouteError('ERR_INVALID_EVENT', `${where}.worker_id is missing`);
  if (!('event_id' in ev)) throw new KvRouteError('ERR_INVALID_EVENT', `${where}.event.event_id is missing`);
  const flags = tier === 'device' ? FLAG_DEVICE_TIER : 0;
  const head = () => {
    u64(w, e.worker_id, `${where}.worker_id`);
    u64(w, ev.event_id, `${where}.event.event_id`);
  };
  const data = ev.data;
  const at = `${where}.event.data`;
  if (data === 'cleared') {
    w.pushMeta(KIND_CLEARED, dpRank, flags, 0);
    head();
    return;
  }
  if (data === null || typeof data !== 'object' || Array.isArray(data)) fail(at, 'must be {stored}, {removed} or "cleared"', data);
  const keys = Object.keys(data);
  if (keys.length !== 1) fail(at, 'must have exactly one of "stored" or "removed"', keys.join(', '));
  const d = data as Record<string, unknown>;
  if (keys[0] === 'stored') packStored(w, d.stored, `${at}.stored`, dpRank, flags, head);
  else if (keys[0] === 'removed') packRemoved(w, d.removed, `${at}.removed`, dpRank, flags, head);
  else throw new KvRouteError('ERR_INVALID_EVENT', `${at} has an unknown variant "${keys[0]}" (expected stored, removed or "cleared")`);
}

/** Validates and packs a batch; `label(i)` names event i in error messages. */
export function packEvents(values: Iterable<unknown>, label: (i: number) => string): PackedEvents {
  const w = new PackedWriter();
  let i = 0;
  for (const value of values) {
    packEvent(w, value, label(i));
    i++;
  }
  return w.finish();
}
