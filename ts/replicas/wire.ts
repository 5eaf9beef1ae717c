/**
 * The load-sync wire format: msgpack arrays (no field names on the wire), block identities as one
 * byte string of little-endian u64s. A message that does not decode is rejected whole and
 * counted; nothing from it is applied.
 *
 * ```
 * message  = [1, kind, replicaId, instance, seq, body]
 * kind 0   ops:       body = [op, ...]
 *   book            = [0, key, workerId (decimal string), dpRank, prefillTokens, blocks (bytes), unshared]
 *   prefill done    = [1, key]
 *   free            = [2, key]
 * kind 1   heartbeat: body = [inFlight]
 * kind 2   state:     body = [part, parts, [book, ...]]   (the sender's whole in-flight set as of seq)
 * kind 3   join:      body = [] or [targetReplicaId, targetInstance]   (asks for state)
 * kind 4   leave:     body = []
 * kind 5   sessions:  body = [binding, ...]
 *   binding         = [sessionId, workerId (decimal string), dpRank, stamp, origin, idleMs]
 * ```
 *
 * `key` is the sending router's request handle: unique per router instance and never reused, so
 * a request id used again later is a new key, and duplicates are recognised by (replica, key).
 *
 * Session bindings travel in their own kind, so a peer of an older kvroute rejects (and counts)
 * only those messages and still applies the load. A binding is idempotent: `stamp` (a Lamport
 * counter) and `origin` (the replica that bound it) order competing bindings of one session the
 * same way on every replica, and `idleMs` is how long the sender has seen it idle (0: in use).
 */

import { KvRouteError } from '../errors.js';
import { loadOptional } from '../js/ingest/deps.js';
import { MAX_SESSION_ID_LENGTH } from '../limits.js';

type Msgpackr = typeof import('msgpackr');

/** The message kinds. @internal */
export const Kind = { ops: 0, heartbeat: 1, state: 2, join: 3, leave: 4, sessions: 5 } as const;

/** A booking as published. @internal */
export interface WireBooking {
  key: number;
  workerId: bigint;
  dpRank: number;
  prefillTokens: number;
  blocks: BigUint64Array;
  unshared: number;
}

/** A session's binding as published (see session-affinity.ts). @internal */
export interface WireSession {
  sessionId: string;
  workerId: bigint;
  dpRank: number;
  /** Lamport counter of the binding: a later binding of the session has a higher one. */
  stamp: number;
  /** The replica that bound it (breaks ties between equal stamps). */
  origin: string;
  /** How long the sender has seen the session idle, ms (0 while a request of it is in flight). */
  idleMs: number;
}

/** One change of a replica's in-flight set. @internal */
export type WireOp = { op: 'book'; booking: WireBooking } | { op: 'prefill'; key: number } | { op: 'free'; key: number };

/** @internal */
export type WireBody =
  | { kind: 'ops'; ops: WireOp[] }
  | { kind: 'heartbeat'; inFlight: number }
  | { kind: 'state'; part: number; parts: number; bookings: WireBooking[] }
  | { kind: 'join'; target?: { replicaId: string; instance: number } }
  | { kind: 'leave' }
  | { kind: 'sessions'; sessions: WireSession[] };

/** @internal */
export type WireMessage = { replicaId: string; instance: number; seq: number } & WireBody;

const VERSION = 1;
/** A peer's booking holds at most this many blocks (a 16M-token prompt at block size 16). */
const MAX_BLOCKS = 1 << 20;
/** The longest replica id. */
const MAX_REPLICA_ID = 128;

let packr: InstanceType<Msgpackr['Packr']> | undefined;

function codec(): InstanceType<Msgpackr['Packr']> {
  if (!packr) {
    const m = loadOptional<Msgpackr>('msgpackr', 'router replica sync', 'it is an optional dependency of kvroute');
    packr = new m.Packr({ useRecords: false, mapsAsObjects: true, int64AsType: 'number' });
  }
  return packr;
}

function bookingTuple(b: WireBooking): unknown[] {
  const bytes = new Uint8Array(b.blocks.buffer, b.blocks.byteOffset, b.blocks.byteLength);
  return [0, b.key, b.workerId.toString(), b.dpRank, b.prefillTokens, bytes, b.unshared];
}

function bodyTuple(m: WireBody): [number, unknown[]] {
  switch (m.kind) {
    case 'ops':
      return [Kind.ops, m.ops.map((o) => (o.op === 'book' ? bookingTuple(o.booking) : [o.op === 'prefill' ? 1 : 2, o.key]))];
    case 'heartbeat':
      return [Kind.heartbeat, [m.inFlight]];
    case 'state':
      return [Kind.state, [m.part, m.parts, m.bookings.map(bookingTuple)]];
    case 'join':
      return [Kind.join, m.target ? [m.target.replicaId, m.target.instance] : []];
    case 'leave':
      return [Kind.leave, []];
    case 'sessions':
      return [Kind.sessions, m.sessions.map((b) => [b.sessionId, b.workerId.toString(), b.dpRank, b.stamp, b.origin, b.idleMs])];
  }
}

/** Encodes one message. @internal */
export function encodeMessage(m: WireMessage): Uint8Array {
  const [kind, body] = bodyTuple(m);
  return codec().pack([VERSION, kind, m.replicaId, m.instance, m.seq, body]);
}

/** The estimated encoded size of a session binding, for chunking tables. @internal */
export function sessionBytes(b: WireSession): number {
  return 48 + b.sessionId.length * 3 + b.origin.length;
}

/** The estimated encoded size of a booking, for chunking states. @internal */
export function bookingBytes(b: WireBooking): number {
  return 40 + 8 * b.blocks.length;
}

class WireError extends Error {}

function fail(what: string): never {
  throw new WireError(what);
}

function count(v: unknown, what: string, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > max) fail(`${what} must be an integer in [0, ${max}]`);
  return v;
}

function array(v: unknown, what: string): unknown[] {
  if (!Array.isArray(v)) fail(`${what} must be an array`);
  return v;
}

function workerIdOf(v: unknown): bigint {
  if (typeof v !== 'string' || !/^(0|[1-9][0-9]{0,19})$/.test(v)) fail('workerId must be a decimal u64 string');
  const workerId = BigInt(v);
  if (workerId > 0xffff_ffff_ffff_ffffn) fail('workerId is out of the u64 range');
  return workerId;
}

function text(v: unknown, what: string, max: number): string {
  if (typeof v !== 'string' || v.length === 0 || v.length > max) fail(`${what} must be a string of 1-${max} characters`);
  return v;
}

function decodeBooking(v: unknown): WireBooking {
  const t = array(v, 'a booking');
  if (t.length !== 7 || t[0] !== 0) fail('a booking must be [0, key, workerId, dpRank, prefillTokens, blocks, unshared]');
  const workerId = workerIdOf(t[2]);
  const bytes = t[5];
  if (!(bytes instanceof Uint8Array) || bytes.byteLength % 8 !== 0 || bytes.byteLength > 8 * MAX_BLOCKS)
    fail('blocks must be a byte string of little-endian u64s');
  // Copied: the decoded bytes are a view into the message (a Buffer's slice is not a copy).
  const blocks = new BigUint64Array(new Uint8Array(bytes).buffer);
  return {
    key: count(t[1], 'key'),
    workerId,
    dpRank: count(t[3], 'dpRank', 0xffff_ffff),
    prefillTokens: count(t[4], 'prefillTokens'),
    blocks,
    unshared: count(t[6], 'unshared', MAX_BLOCKS),
  };
}

function decodeSession(v: unknown): WireSession {
  const t = array(v, 'a session binding');
  if (t.length !== 6) fail('a session binding must be [sessionId, workerId, dpRank, stamp, origin, idleMs]');
  return {
    sessionId: text(t[0], 'sessionId', MAX_SESSION_ID_LENGTH),
    workerId: workerIdOf(t[1]),
    dpRank: count(t[2], 'dpRank', 0xffff_ffff),
    stamp: count(t[3], 'stamp'),
    origin: text(t[4], 'origin', MAX_REPLICA_ID),
    idleMs: count(t[5], 'idleMs'),
  };
}

function decodeOp(v: unknown): WireOp {
  const t = array(v, 'an op');
  if (t[0] === 0) return { op: 'book', booking: decodeBooking(t) };
  if ((t[0] === 1 || t[0] === 2) && t.length === 2) return { op: t[0] === 1 ? 'prefill' : 'free', key: count(t[1], 'key') };
  fail('an op must be a book, prefill or free tuple');
}

function decodeBody(kind: unknown, body: unknown[]): WireBody {
  switch (kind) {
    case Kind.ops:
      return { kind: 'ops', ops: body.map(decodeOp) };
    case Kind.heartbeat:
      return { kind: 'heartbeat', inFlight: count(body[0], 'inFlight') };
    case Kind.state: {
      const parts = count(body[1], 'parts', 1 << 16);
      const part = count(body[0], 'part', parts - 1);
      return { kind: 'state', part, parts, bookings: array(body[2], 'bookings').map(decodeBooking) };
    }
    case Kind.join:
      if (body.length === 0) return { kind: 'join' };
      if (typeof body[0] !== 'string') fail('a join target must be [replicaId, instance]');
      return { kind: 'join', target: { replicaId: body[0], instance: count(body[1], 'instance', 0xffff_ffff) } };
    case Kind.leave:
      return { kind: 'leave' };
    case Kind.sessions:
      return { kind: 'sessions', sessions: body.map(decodeSession) };
    default:
      fail(`unknown message kind ${String(kind)}`);
  }
}

/**
 * Decodes one message.
 * @throws {KvRouteError} `ERR_INVALID_EVENT` naming what is wrong; nothing of the message is used.
 * @internal
 */
export function decodeMessage(data: Uint8Array): WireMessage {
  try {
    let raw: unknown;
    try {
      raw = codec().unpack(data);
    } catch {
      fail('not msgpack');
    }
    const t = array(raw, 'a message');
    if (t[0] !== VERSION) fail(`unsupported version ${String(t[0])} (this kvroute speaks ${VERSION})`);
    if (t.length !== 6) fail('a message must be [version, kind, replicaId, instance, seq, body]');
    const head = {
      replicaId: text(t[2], 'replicaId', MAX_REPLICA_ID),
      instance: count(t[3], 'instance', 0xffff_ffff),
      seq: count(t[4], 'seq'),
    };
    return { ...head, ...decodeBody(t[1], array(t[5], 'body')) };
  } catch (err) {
    throw new KvRouteError('ERR_INVALID_EVENT', `replica sync message rejected: ${(err as Error).message}`, { cause: err });
  }
}
