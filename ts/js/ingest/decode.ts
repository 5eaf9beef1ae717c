/**
 * msgpack payload → decoded engine batch, the twin of kvroute-core's `ingest::decode`: the same
 * layouts, the same tolerance (unknown tags skip one event; missing trailing fields, unknown
 * keys and extra elements are counted), the same failures (a wrong type anywhere fails the
 * whole batch). `msgpackr` reads the bytes; this file interprets the values.
 *
 * msgpackr returns an integral float (`5.0`) as the number 5, so both decoders read an integral
 * float within 64-bit range as the integer it holds, and refuse any other float where an integer
 * belongs. One difference the library imposes: msgpackr cannot read an extension type it
 * does not know and reads its own ones (an `Error`, a `Date`, a `Set`...) into objects, some with
 * other framings than msgpack's, so a batch holding any extension value fails here, even in a
 * field the native decoder skips. The reserved byte 0xc1, which msgpackr returns as a sentinel,
 * fails the batch on both.
 * Strings msgpackr reads leniently (invalid UTF-8 becomes U+FFFD) are checked as the native
 * reader checks them ({@link text}). In a map, a repeated key's last value wins on both.
 * `test/ingest-differential.test.ts` holds both decoders to this on damaged payloads.
 * @internal
 * @module
 */

import type { RawDecodedBatch, RawEngineEvent, RawExtraKey } from '../../backend-types.js';
import { loadMsgpackr } from './deps.js';

export class DecodeError extends Error {}

type Unpackr = InstanceType<ReturnType<typeof loadMsgpackr>['Unpackr']>;
let unpackr: Unpackr | undefined;

function reader(): Unpackr {
  unpackr ??= new (loadMsgpackr().Unpackr)({ int64AsType: 'bigint', mapsAsObjects: false, useRecords: false });
  return unpackr;
}

const U64 = 0xffffffffffffffffn;

function fail(path: string, what: string): never {
  throw new DecodeError(`${path}: ${what}`);
}

function typeName(v: unknown): string {
  if (v === null || v === undefined) return 'nil';
  if (typeof v === 'boolean') return 'a boolean';
  if (typeof v === 'bigint') return 'an integer';
  if (typeof v === 'number') return isInt(v) ? 'an integer' : 'a float';
  if (typeof v === 'string') return 'a string';
  if (v instanceof Uint8Array) return 'bytes';
  if (Array.isArray(v)) return 'an array';
  if (v instanceof Map) return 'a map';
  return 'an extension value';
}

const isNil = (v: unknown): boolean => v === null || v === undefined;
/**
 * An integer, or a number msgpackr read from an integral float within 64-bit range (it cannot
 * tell `5.0` from `5`; the native reader reads such floats as integers too). Past that range a
 * number can only have been a float, and stays one, as on the native side.
 */
const isInt = (v: unknown): v is number | bigint =>
  typeof v === 'bigint' || (typeof v === 'number' && Number.isInteger(v) && v >= -(2 ** 63) && v < 2 ** 64);

function bigOf(v: number | bigint): bigint {
  return typeof v === 'bigint' ? v : BigInt(v);
}

function uint(v: unknown, path: string): number {
  if (!isInt(v)) fail(path, `expected an unsigned integer, got ${typeName(v)}`);
  const b = bigOf(v);
  if (b < 0n) fail(path, 'must not be negative');
  if (b > U64) fail(path, 'out of range');
  return Number(b);
}

function int(v: unknown, path: string): bigint {
  if (!isInt(v)) fail(path, `expected an integer, got ${typeName(v)}`);
  return bigOf(v);
}

/** The payload being decoded, for {@link text}: decoding is synchronous, one payload at a time. */
let source: Buffer | undefined;

/**
 * A string the decoder interprets, checked as UTF-8 as the native reader checks it: msgpackr
 * reads invalid UTF-8 as U+FFFD instead of failing. A string with U+FFFD is the engine's own only
 * if its UTF-8 form is in the payload; otherwise its bytes were not UTF-8, and the batch fails.
 */
function text(s: string, path: string): string {
  if (s.includes('\uFFFD') && source && source.indexOf(Buffer.from(s, 'utf8')) < 0) fail(path, 'is not UTF-8');
  return s;
}

function optText(v: unknown, path: string): string | null {
  if (isNil(v)) return null;
  if (typeof v !== 'string') fail(path, `expected a string, got ${typeName(v)}`);
  return text(v, path);
}

interface Notes {
  unknownEvents: number;
  extraFields: number;
  foldedHashes: number;
  oddLengthHashes: number;
}

/** One engine hash as u64: unsigned as is, signed bit-cast, bytes folded (last 8, big-endian). */
function hash(v: unknown, path: string, notes: Notes): bigint {
  if (isInt(v)) return BigInt.asUintN(64, bigOf(v));
  if (v instanceof Uint8Array && v.length > 0) {
    if (v.length === 32) notes.foldedHashes++;
    else notes.oddLengthHashes++;
    let out = 0n;
    for (const byte of v.subarray(Math.max(0, v.length - 8))) out = (out << 8n) | BigInt(byte);
    return out;
  }
  return fail(path, `expected an integer or bytes hash, got ${typeName(v)}`);
}

function hashes(v: unknown, path: string, notes: Notes): BigUint64Array {
  if (!Array.isArray(v)) fail(path, `expected an array, got ${typeName(v)}`);
  const out = new BigUint64Array(v.length);
  for (let i = 0; i < v.length; i++) out[i] = hash(v[i], `${path}[${i}]`, notes);
  return out;
}

function token(v: unknown, path: string): number {
  if (!isInt(v)) fail(path, `expected a token id, got ${typeName(v)}`);
  const b = bigOf(v);
  if (b < 0n || b > 0xffffffffn) fail(path, 'token id must be in [0, 2^32)');
  return Number(b);
}

function tokens(v: unknown, path: string): { ids: Uint32Array; eagle: boolean } {
  if (!Array.isArray(v)) fail(path, `expected an array, got ${typeName(v)}`);
  if (Array.isArray(v[0])) {
    const out = new Uint32Array(v.length + 1);
    v.forEach((pair: unknown, i: number) => {
      if (!Array.isArray(pair)) fail(`${path}[${i}]`, 'mixes pairs and token ids');
      if (pair.length !== 2) fail(`${path}[${i}]`, `a bigram pair has 2 tokens, got ${pair.length}`);
      out[i] = token(pair[0], `${path}[${i}][0]`);
      if (i + 1 === v.length) out[i + 1] = token(pair[1], `${path}[${i}][1]`);
    });
    return { ids: v.length === 0 ? new Uint32Array(0) : out, eagle: true };
  }
  const out = new Uint32Array(v.length);
  for (let i = 0; i < v.length; i++) out[i] = token(v[i], `${path}[${i}]`);
  return { ids: out, eagle: false };
}

function extraKey(v: unknown, path: string): RawExtraKey {
  if (typeof v === 'string') return { kind: 'text', text: text(v, path) };
  if (isInt(v)) return { kind: 'int', int: bigOf(v) };
  if (v instanceof Uint8Array) return { kind: 'bytes', bytes: Uint8Array.from(v) };
  if (Array.isArray(v) && v.length === 2 && typeof v[0] === 'string') {
    if (!isInt(v[1])) return { kind: 'other' };
    const offset = bigOf(v[1]);
    return {
      kind: 'pair',
      text: text(v[0], path),
      offset: offset > BigInt(Number.MAX_SAFE_INTEGER) || offset < -(2n ** 63n) ? -1 : Number(offset),
    };
  }
  return { kind: 'other' };
}

function extraKeys(v: unknown, path: string): (RawExtraKey[] | null)[] {
  if (!Array.isArray(v)) fail(path, `expected an array (one entry per block), got ${typeName(v)}`);
  return v.map((block: unknown, i: number) => {
    if (isNil(block)) return null;
    if (!Array.isArray(block)) fail(`${path}[${i}]`, `expected a list of keys or nil, got ${typeName(block)}`);
    return block.map((k: unknown, j: number) => extraKey(k, `${path}[${i}][${j}]`));
  });
}

const STORED_KEYS = new Set([
  'type',
  'block_hashes',
  'parent_block_hash',
  'token_ids',
  'block_size',
  'lora_id',
  'medium',
  'lora_name',
  'extra_keys',
  'group_idx',
  'kv_cache_spec_kind',
  'kv_cache_spec_sliding_window',
  'locality',
  'ownership',
  'session_id',
  'lookahead_token_ids',
  'cache_salt',
]);
const REMOVED_KEYS = new Set(['type', 'block_hashes', 'medium', 'group_idx', 'locality', 'ownership']);
const CLEARED_KEYS = new Set(['type', 'ownership']);

function tagOf(v: unknown, path: string): string {
  if (typeof v !== 'string') fail(path, `expected the event tag (a string), got ${typeName(v)}`);
  return text(v, path);
}

function mapEvent(entries: Map<unknown, unknown>, path: string, notes: Notes): RawEngineEvent | undefined {
  if (!entries.has('type')) fail(path, 'map event has no "type"');
  const kind = tagOf(entries.get('type'), `${path}.type`);
  const known =
    kind === 'BlockStored' ? STORED_KEYS : kind === 'BlockRemoved' ? REMOVED_KEYS : kind === 'AllBlocksCleared' ? CLEARED_KEYS : undefined;
  if (!known) return undefined;
  for (const k of entries.keys()) if (typeof k !== 'string' || !known.has(k)) notes.extraFields++;
  const at = (name: string) => `${path}.${name}`;
  const opt = (name: string): unknown => {
    const v = entries.get(name);
    return isNil(v) ? undefined : v;
  };
  const require = (name: string): unknown => {
    const v = opt(name);
    if (v === undefined) fail(path, `${kind} has no "${name}"`);
    return v;
  };
  const optUint = (name: string) => {
    const v = opt(name);
    return v === undefined ? null : uint(v, at(name));
  };
  if (kind === 'BlockStored') {
    const { ids, eagle } = tokens(require('token_ids'), at('token_ids'));
    const blockHashes = hashes(require('block_hashes'), at('block_hashes'), notes);
    const parent = opt('parent_block_hash');
    return {
      type: kind,
      blockHashes,
      parentBlockHash: parent === undefined ? null : hash(parent, at('parent_block_hash'), notes),
      tokenIds: ids,
      eagle,
      blockSize: uint(require('block_size'), at('block_size')),
      loraId: opt('lora_id') === undefined ? null : int(opt('lora_id'), at('lora_id')),
      medium: optText(opt('medium'), at('medium')),
      loraName: optText(opt('lora_name'), at('lora_name')),
      cacheSalt: optText(opt('cache_salt'), at('cache_salt')),
      extraKeys: opt('extra_keys') === undefined ? null : extraKeys(opt('extra_keys'), at('extra_keys')),
      groupIdx: optUint('group_idx'),
      kvCacheSpecKind: optText(opt('kv_cache_spec_kind'), at('kv_cache_spec_kind')),
      kvCacheSpecSlidingWindow: optUint('kv_cache_spec_sliding_window'),
      locality: optText(opt('locality'), at('locality')),
      ownership: optText(opt('ownership'), at('ownership')),
      sessionId: optText(opt('session_id'), at('session_id')),
    };
  }
  if (kind === 'BlockRemoved') {
    return {
      type: kind,
      blockHashes: hashes(require('block_hashes'), at('block_hashes'), notes),
      medium: optText(opt('medium'), at('medium')),
      groupIdx: optUint('group_idx'),
      locality: optText(opt('locality'), at('locality')),
      ownership: optText(opt('ownership'), at('ownership')),
    };
  }
  return { type: kind, ownership: optText(opt('ownership'), at('ownership')) };
}

interface Tail {
  groupIdx: number | null;
  kind: string | null;
  window: number | null;
  locality: string | null;
  ownership: string | null;
}

/** A positional tail: fixed layout when the types fit, else the heuristic (see the Rust twin). */
function tail(items: unknown[], path: string, notes: Notes): Tail {
  // Every string of the tail is read as text, whichever layout it turns out to be.
  for (const [i, v] of items.entries()) if (typeof v === 'string') text(v, `${path}[${i}]`);
  const isUint = (v: unknown) => isNil(v) || (isInt(v) && bigOf(v) >= 0n && bigOf(v) <= U64);
  const isText = (v: unknown) => isNil(v) || typeof v === 'string';
  const fixed = [isUint, isText, isUint, isText, isText];
  if (items.every((v, i) => i >= 5 || fixed[i](v))) {
    notes.extraFields += Math.max(0, items.length - 5);
    const get = (i: number) => (isNil(items[i]) ? undefined : items[i]);
    return {
      groupIdx: get(0) === undefined ? null : uint(get(0), `${path}[group_idx]`),
      kind: optText(get(1), `${path}[kv_cache_spec_kind]`),
      window: get(2) === undefined ? null : uint(get(2), `${path}[kv_cache_spec_sliding_window]`),
      locality: optText(get(3), `${path}[locality]`),
      ownership: optText(get(4), `${path}[ownership]`),
    };
  }
  const out: Tail = { groupIdx: null, kind: null, window: null, locality: null, ownership: null };
  for (const v of items) {
    if (isNil(v)) continue;
    if (isInt(v) && bigOf(v) >= 0n && bigOf(v) <= U64 && out.groupIdx === null) out.groupIdx = Number(v);
    else if (isInt(v) && bigOf(v) >= 0n && bigOf(v) <= U64 && out.window === null) out.window = Number(v);
    else if (typeof v === 'string' && out.kind === null) out.kind = v;
    else notes.extraFields++;
  }
  return out;
}

/** SGLang 0.5.19's `{"cache_salt": str}`; `""` means no salt. */
function saltMetadata(entries: Map<unknown, unknown>, path: string, notes: Notes): string | null {
  let salt: string | undefined;
  for (const [k, v] of entries) {
    if (k === 'cache_salt') {
      if (typeof v !== 'string') fail(path, `cache_salt must be a string, got ${typeName(v)}`);
      salt = text(v, path);
    } else notes.extraFields++;
  }
  if (salt === undefined) fail(path, 'metadata map has no cache_salt');
  return salt === '' ? null : salt;
}

function arrayEvent(fields: unknown[], path: string, notes: Notes): RawEngineEvent | undefined {
  if (fields.length === 0) fail(path, 'array event is empty');
  const kind = tagOf(fields[0], `${path}[0]`);
  const at = (i: number, name: string) => `${path}[${i}] (${name})`;
  const get = (i: number) => (isNil(fields[i]) ? undefined : fields[i]);
  if (kind === 'BlockStored') {
    if (fields.length < 5) fail(path, `BlockStored needs at least hashes, parent, tokens and block_size, got ${fields.length - 1} fields`);
    if (get(1) === undefined) fail(at(1, 'block_hashes'), 'is nil');
    if (get(3) === undefined) fail(at(3, 'token_ids'), 'is nil');
    if (get(4) === undefined) fail(at(4, 'block_size'), 'is nil');
    const { ids, eagle } = tokens(get(3), at(3, 'token_ids'));
    let loraName: string | null = null;
    let cacheSalt: string | null = null;
    const slot = get(7);
    if (typeof slot === 'string') loraName = text(slot, at(7, 'lora_name'));
    else if (slot instanceof Map) cacheSalt = saltMetadata(slot, at(7, 'metadata'), notes);
    else if (slot !== undefined) fail(at(7, 'lora_name'), `expected a string or a metadata map, got ${typeName(slot)}`);
    const t = tail(fields.slice(9), path, notes);
    const blockHashes = hashes(get(1), at(1, 'block_hashes'), notes);
    return {
      type: kind,
      blockHashes,
      parentBlockHash: get(2) === undefined ? null : hash(get(2), at(2, 'parent_block_hash'), notes),
      tokenIds: ids,
      eagle,
      blockSize: uint(get(4), at(4, 'block_size')),
      loraId: get(5) === undefined ? null : int(get(5), at(5, 'lora_id')),
      medium: optText(get(6), at(6, 'medium')),
      loraName,
      cacheSalt,
      extraKeys: get(8) === undefined ? null : extraKeys(get(8), at(8, 'extra_keys')),
      groupIdx: t.groupIdx,
      kvCacheSpecKind: t.kind,
      kvCacheSpecSlidingWindow: t.window,
      locality: t.locality,
      ownership: t.ownership,
      sessionId: null,
    };
  }
  if (kind === 'BlockRemoved') {
    if (get(1) === undefined) fail(at(1, 'block_hashes'), 'is missing or nil');
    const t = tail(fields.slice(3), path, notes);
    return {
      type: kind,
      blockHashes: hashes(get(1), at(1, 'block_hashes'), notes),
      medium: optText(get(2), at(2, 'medium')),
      groupIdx: t.groupIdx,
      locality: t.locality,
      ownership: t.ownership,
    };
  }
  if (kind === 'AllBlocksCleared') {
    notes.extraFields += Math.max(0, fields.length - 2);
    return { type: kind, ownership: optText(get(1), at(1, 'ownership')) };
  }
  return undefined;
}

/** Deepest container nesting accepted (the batch is level 1), as on the native decoder. */
const MAX_DEPTH = 32;

/**
 * Why `v` (at nesting `level`) is not a payload the native reader takes, or `undefined`: a
 * container deeper than {@link MAX_DEPTH}; the reserved byte 0xc1, which msgpackr returns as its
 * `C1` sentinel where msgpack forbids it; or an extension value. msgpackr turns its own extension
 * types into objects (an `Error`, a `Date`, a `Set`...), some read with other framings than
 * msgpack's, so the rest of the payload may be read differently from the native reader's:
 * whatever field holds one, the batch fails.
 */
function unreadable(v: unknown, level: number, c1: unknown): string | undefined {
  if (v === c1) return 'is not msgpack: reserved byte 0xc1';
  if (typeof v !== 'object' || v === null || v instanceof Uint8Array) return undefined;
  if (Array.isArray(v)) {
    if (level > MAX_DEPTH) return 'is not msgpack: depth limit exceeded';
    for (const item of v) {
      if (typeof item !== 'object' || item === null) continue;
      const why = unreadable(item, level + 1, c1);
      if (why) return why;
    }
    return undefined;
  }
  if (v instanceof Map) {
    if (level > MAX_DEPTH) return 'is not msgpack: depth limit exceeded';
    for (const [k, item] of v) {
      const why = unreadable(k, level + 1, c1) ?? unreadable(item, level + 1, c1);
      if (why) return why;
    }
    return undefined;
  }
  return `holds a msgpack extension value (read as ${v.constructor?.name ?? 'an object'}), which engines never send`;
}

function decodeOrThrow(payload: Uint8Array): RawDecodedBatch {
  source = Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
  try {
    return decodeValue(payload);
  } finally {
    source = undefined;
  }
}

function decodeValue(payload: Uint8Array): RawDecodedBatch {
  let value: unknown;
  try {
    value = reader().unpack(payload);
  } catch (err) {
    fail('payload', `is not msgpack: ${err instanceof Error ? err.message : String(err)}`);
  }
  const why = unreadable(value, 1, loadMsgpackr().C1);
  if (why) fail('payload', why);
  if (!Array.isArray(value)) fail('batch', `expected an array [ts, events, dp_rank], got ${typeName(value)}`);
  if (value.length < 2) fail('batch', `expected [ts, events, dp_rank], got ${value.length} elements`);
  const notes: Notes = { unknownEvents: 0, extraFields: Math.max(0, value.length - 3), foldedHashes: 0, oddLengthHashes: 0 };
  const tsValue = value[0];
  if (typeof tsValue !== 'number' && typeof tsValue !== 'bigint') fail('batch.ts', `expected a number, got ${typeName(tsValue)}`);
  let dpRank: number | null = null;
  if (!isNil(value[2])) {
    if (!isInt(value[2])) fail('batch.dp_rank', `expected an integer or nil, got ${typeName(value[2])}`);
    const r = bigOf(value[2]);
    if (r > 2n ** 63n - 1n) fail('batch.dp_rank', 'out of range');
    dpRank = Number(r);
  }
  const rawEvents = value[1];
  if (!Array.isArray(rawEvents)) fail('batch.events', `expected an array, got ${typeName(rawEvents)}`);
  const events: RawEngineEvent[] = [];
  let maps = false;
  let arrays = false;
  rawEvents.forEach((raw: unknown, i: number) => {
    const path = `events[${i}]`;
    let decoded: RawEngineEvent | undefined;
    if (raw instanceof Map) {
      maps = true;
      decoded = mapEvent(raw, path, notes);
    } else if (Array.isArray(raw)) {
      arrays = true;
      decoded = arrayEvent(raw, path, notes);
    } else fail(path, `expected a tagged map or array, got ${typeName(raw)}`);
    if (decoded) events.push(decoded);
    else notes.unknownEvents++;
  });
  const layout = maps && arrays ? 'mixed' : maps ? 'map' : arrays ? 'array' : 'empty';
  return { ts: Number(tsValue), dpRank, events, layout, ...notes };
}

/** Decodes a payload; a failure is reported in `error` (nothing decoded), as the native twin does. */
export function decodeEngineBatchJs(payload: Uint8Array): RawDecodedBatch {
  try {
    return decodeOrThrow(payload);
  } catch (err) {
    if (!(err instanceof DecodeError) && !(err instanceof RangeError)) throw err;
    return {
      error: err.message,
      ts: 0,
      dpRank: null,
      layout: 'empty',
      events: [],
      unknownEvents: 0,
      extraFields: 0,
      foldedHashes: 0,
      oddLengthHashes: 0,
    };
  }
}
