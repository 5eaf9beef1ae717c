/**
 * Validation of `RouterEvent`s, writing each valid event straight into a packed batch. A batch is
 * all-or-nothing: the first invalid event throws `ERR_INVALID_EVENT` naming the field, and the
 * partly written batch is discarded.
 *
 * This runs for every block of every event, so nothing is allocated on the success path: field
 * paths are static templates (`#` stands for an index) turned into text only when a check fails.
 * @internal
 * @module
 */

import { KvRouteError } from '../errors.js';
import { MAX_BLOCKS_PER_EVENT } from '../limits.js';
import { describe } from '../validate.js';
import {
  FLAG_HAS_PARENT,
  KIND_CLEARED,
  KIND_REMOVED,
  KIND_STORED,
  LOWER_TIER_NAMES,
  type PackedEvents,
  PackedWriter,
  tierFlags,
} from './packed.js';
import type { StorageTier } from './types.js';

const U64_MAX = (1n << 64n) - 1n;
const U32_MAX = 0xffffffff;
/**
 * Decimal strings: any number of leading zeros, then at most 20 significant digits (the value
 * must still fit in a u64). The cap on the whole string keeps a hostile megabyte of zeros cheap.
 */
const DECIMAL = /^0*([0-9]{1,20})$/;
const DECIMAL_MAX_LENGTH = 256;
const TIERS = new Set<string>(['device', ...LOWER_TIER_NAMES]);
const TOP_KEYS = new Set(['worker_id', 'storage_tier', 'event', 'residency_domain', 'state_source', 'session_id']);
const EVENT_KEYS = new Set(['event_id', 'dp_rank', 'data']);
const STORED_KEYS = new Set(['parent_hash', 'start_position', 'blocks']);
const BLOCK_KEYS = new Set(['block_hash', 'tokens_hash', 'mm_extra_info']);
const REMOVED_KEYS = new Set(['block_hashes']);
const MM_KEYS = new Set(['mm_objects']);
const MM_OBJECT_KEYS = new Set(['mm_hash', 'offsets']);

/** Where the event being validated sits: its label (`events[3]`, `line 7`) is built on failure. */
class Where {
  index = 0;
  constructor(readonly label: (i: number) => string) {}

  /** The full path of `field`, a template whose `#`s are replaced by `indexes` in order. */
  path(field: string, indexes: readonly number[]): string {
    let k = 0;
    return this.label(this.index) + field.replace(/#/g, () => String(indexes[k++]));
  }
}

function fail(at: Where, field: string, indexes: readonly number[], what: string, value: unknown): never {
  throw new KvRouteError('ERR_INVALID_EVENT', `${at.path(field, indexes)} ${what}, got ${describe(value)}`);
}

function missing(at: Where, field: string, hint = ''): never {
  throw new KvRouteError('ERR_INVALID_EVENT', `${at.path(field, [])} is missing${hint}`);
}

const NO_INDEX: readonly number[] = [];

function record(
  value: unknown,
  at: Where,
  field: string,
  keys: ReadonlySet<string>,
  indexes: readonly number[] = NO_INDEX,
): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) fail(at, field, indexes, 'must be an object', value);
  for (const key in value) {
    if (!keys.has(key)) throw new KvRouteError('ERR_INVALID_EVENT', `${at.path(field, indexes)} has an unknown field "${key}"`);
  }
  return value as Record<string, unknown>;
}

function list(value: unknown, at: Where, field: string, indexes: readonly number[] = NO_INDEX): readonly unknown[] {
  if (!Array.isArray(value)) fail(at, field, indexes, 'must be an array', value);
  return value;
}

/** Checks a u64 and writes it. */
function u64(w: PackedWriter, value: unknown, at: Where, field: string, i = -1, j = -1): void {
  if (typeof value === 'bigint') {
    if (value >= 0n && value <= U64_MAX) {
      w.pushBigInt(value);
      return;
    }
  } else if (typeof value === 'number') {
    if (Number.isSafeInteger(value) && value >= 0) {
      w.pushNumber(value);
      return;
    }
  } else if (typeof value === 'string' && value.length <= DECIMAL_MAX_LENGTH && DECIMAL.test(value)) {
    const v = BigInt(value);
    if (v <= U64_MAX) {
      w.pushBigInt(v);
      return;
    }
  }
  fail(at, field, [i, j], 'must be a u64 (a non-negative safe integer, a bigint or a decimal string)', value);
}

/** Checks a u32 given as a number, bigint or decimal string. */
function u32(value: unknown, at: Where, field: string): number {
  const n =
    typeof value === 'bigint'
      ? Number(value)
      : typeof value === 'string' && value.length <= DECIMAL_MAX_LENGTH && DECIMAL.test(value)
        ? Number(value)
        : value;
  if (typeof n === 'number' && Number.isInteger(n) && n >= 0 && n <= U32_MAX) return n;
  return fail(at, field, NO_INDEX, 'must be an integer in [0, 2^32)', value);
}

function checkMmExtraInfo(value: unknown, at: Where, b: number): void {
  const base = '.event.data.stored.blocks[#].mm_extra_info';
  const info = record(value, at, base, MM_KEYS, [b]);
  const scratch = new PackedWriter();
  list(info.mm_objects, at, `${base}.mm_objects`, [b]).forEach((o, i) => {
    const obj = record(o, at, `${base}.mm_objects[#]`, MM_OBJECT_KEYS, [b, i]);
    u64(scratch, obj.mm_hash, at, `${base}.mm_objects[#].mm_hash`, b, i);
    list(obj.offsets, at, `${base}.mm_objects[#].offsets`, [b, i]).forEach((pair, j) => {
      const ok = Array.isArray(pair) && pair.length === 2 && pair.every((x) => Number.isInteger(x) && (x as number) >= 0);
      if (!ok) fail(at, `${base}.mm_objects[#].offsets[#]`, [b, i, j], 'must be a pair of non-negative integers', pair);
    });
  });
}

function packStored(w: PackedWriter, data: unknown, at: Where, dpRank: number, flags: number, head: () => void): void {
  // Every field is read exactly once, and lengths before the loop: a getter that answers
  // differently on each read cannot make the packed batch disagree with what was checked.
  const s = record(data, at, '.event.data.stored', STORED_KEYS);
  if (!('parent_hash' in s)) missing(at, '.event.data.stored.parent_hash', ' (use null for none)');
  const start = s.start_position;
  if (start !== undefined && start !== null) u32(start, at, '.event.data.stored.start_position');
  const blocks = list(s.blocks, at, '.event.data.stored.blocks');
  const count = blocks.length;
  if (count > MAX_BLOCKS_PER_EVENT)
    fail(at, '.event.data.stored.blocks', NO_INDEX, `must hold at most ${MAX_BLOCKS_PER_EVENT} blocks`, `${count} blocks`);
  const parent = s.parent_hash;
  const hasParent = parent !== null;
  w.pushMeta(KIND_STORED, dpRank, flags | (hasParent ? FLAG_HAS_PARENT : 0), count);
  head();
  if (hasParent) u64(w, parent, at, '.event.data.stored.parent_hash');
  for (let i = 0; i < count; i++) {
    const b = record(blocks[i], at, '.event.data.stored.blocks[#]', BLOCK_KEYS, [i]);
    u64(w, b.block_hash, at, '.event.data.stored.blocks[#].block_hash', i);
    u64(w, b.tokens_hash, at, '.event.data.stored.blocks[#].tokens_hash', i);
    const mm = b.mm_extra_info;
    if (mm !== undefined && mm !== null) checkMmExtraInfo(mm, at, i);
  }
}

function packRemoved(w: PackedWriter, data: unknown, at: Where, dpRank: number, flags: number, head: () => void): void {
  const r = record(data, at, '.event.data.removed', REMOVED_KEYS);
  const hashes = list(r.block_hashes, at, '.event.data.removed.block_hashes');
  const count = hashes.length;
  if (count > MAX_BLOCKS_PER_EVENT)
    fail(at, '.event.data.removed.block_hashes', NO_INDEX, `must hold at most ${MAX_BLOCKS_PER_EVENT} hashes`, `${count} hashes`);
  w.pushMeta(KIND_REMOVED, dpRank, flags, count);
  head();
  for (let i = 0; i < count; i++) u64(w, hashes[i], at, '.event.data.removed.block_hashes[#]', i);
}

/**
 * Validates one event and appends it to `w`. Returns false, appending nothing, for an event of a
 * cache owner's lane (`residency_domain: "cache_owner"`), which kvroute does not model yet: the
 * caller counts it.
 */
function packEvent(w: PackedWriter, value: unknown, at: Where): boolean {
  const e = record(value, at, '', TOP_KEYS);
  const tier = e.storage_tier ?? 'device';
  if (typeof tier !== 'string' || !TIERS.has(tier))
    fail(at, '.storage_tier', NO_INDEX, 'must be one of device, host_pinned, disk, external', tier);
  const residency = e.residency_domain;
  if (residency !== undefined && residency !== null && typeof residency !== 'string')
    fail(at, '.residency_domain', NO_INDEX, 'must be a string', residency);
  const session = e.session_id;
  if (session !== undefined && session !== null && typeof session !== 'string')
    fail(at, '.session_id', NO_INDEX, 'must be a string or null', session);
  const ev = record(e.event, at, '.event', EVENT_KEYS);
  const rankValue = ev.dp_rank;
  const dpRank = rankValue === undefined || rankValue === null ? 0 : u32(rankValue, at, '.event.dp_rank');
  if (!('worker_id' in e)) missing(at, '.worker_id');
  if (!('event_id' in ev)) missing(at, '.event.event_id');
  const workerId = e.worker_id;
  const eventId = ev.event_id;
  const lower = LOWER_TIER_NAMES.indexOf(tier as StorageTier);
  const flags = tierFlags(lower < 0 ? undefined : lower);
  const head = () => {
    u64(w, workerId, at, '.worker_id');
    u64(w, eventId, at, '.event.event_id');
  };
  if (residency === 'cache_owner') {
    // Still validated whole (into a scratch batch, made only here: three typed arrays per event
    // were a twentieth of a replay's time), then left out.
    const scratch = new PackedWriter();
    packData(scratch, ev.data, at, dpRank, flags, () => {
      u64(scratch, workerId, at, '.worker_id');
      u64(scratch, eventId, at, '.event.event_id');
    });
    return false;
  }
  packData(w, ev.data, at, dpRank, flags, head);
  return true;
}

function packData(w: PackedWriter, data: unknown, at: Where, dpRank: number, flags: number, head: () => void): void {
  if (data === 'cleared') {
    w.pushMeta(KIND_CLEARED, dpRank, flags, 0);
    head();
    return;
  }
  if (data === null || typeof data !== 'object' || Array.isArray(data))
    fail(at, '.event.data', NO_INDEX, 'must be {stored}, {removed} or "cleared"', data);
  const d = data as Record<string, unknown>;
  let variant: string | undefined;
  let count = 0;
  for (const key in d) {
    variant = key;
    count++;
  }
  if (count !== 1) fail(at, '.event.data', NO_INDEX, 'must have exactly one of "stored" or "removed"', Object.keys(d).join(', '));
  if (variant === 'stored') packStored(w, d.stored, at, dpRank, flags, head);
  else if (variant === 'removed') packRemoved(w, d.removed, at, dpRank, flags, head);
  else
    throw new KvRouteError(
      'ERR_INVALID_EVENT',
      `${at.path('.event.data', NO_INDEX)} has an unknown variant "${variant}" (expected stored, removed or "cleared")`,
    );
}

/** A validated batch, and how many valid events were left out as a cache owner's. */
export interface ValidatedEvents extends PackedEvents {
  cacheOwnerEvents: number;
}

/** Validates and packs a batch; `label(i)` names event i in error messages. */
export function packEvents(values: Iterable<unknown>, label: (i: number) => string): ValidatedEvents {
  const w = new PackedWriter();
  const at = new Where(label);
  let cacheOwnerEvents = 0;
  for (const value of values) {
    if (!packEvent(w, value, at)) cacheOwnerEvents++;
    at.index++;
  }
  return { ...w.finish(), cacheOwnerEvents };
}
