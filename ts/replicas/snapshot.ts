/**
 * The index snapshot a replica warm-starts from: Dynamo's `/dump` document (per model and routing
 * group: `block_size` and the `events` that rebuild the index, lower tiers included) plus, as a
 * kvroute extension that Dynamo's readers ignore, `engine_seqs`: the last engine seq each active
 * rank had applied when the snapshot began, so the new replica's engine sources continue from the
 * next seq and repair the gap through the engines' replay sockets.
 *
 * The seqs are read *before* the index is flushed and dumped, so the dump holds at least what
 * they say (perhaps a little more: re-applying those events is harmless, stores are idempotent and
 * removals of absent blocks are counted and ignored).
 */

import { KvRouteError } from '../errors.js';
import { parseJsonDocument, stringifyLossless } from '../events/json.js';
import { nestsTooDeep, TOO_DEEP } from '../events/json-rules.js';
import type { RouterEvent } from '../events/types.js';
import type { KvIndex } from '../kv-index.js';

/** One rank's position in its engine's stream. @internal */
export interface EngineSeq {
  workerId: bigint;
  dpRank: number;
  seq: bigint;
  /** Digest of the batch applied at `seq`, when known (older snapshots lack it). */
  digest?: bigint | null;
}

/** A parsed snapshot. @internal */
export interface ParsedSnapshot {
  blockSize: number;
  events: unknown[];
  engineSeqs: EngineSeq[];
}

/** The seqs of every rank whose stream is contiguous now (`active`); others start afresh. */
function activeSeqs(index: KvIndex): EngineSeq[] {
  const out: EngineSeq[] = [];
  for (const source of index.engineSources()) {
    const s = source.stats();
    for (const r of s.ranks)
      if (r.state === 'active' && r.lastSeq !== null)
        out.push({ workerId: s.workerId, dpRank: r.dpRank, seq: r.lastSeq, digest: r.lastBatchDigest });
  }
  return out;
}

/**
 * The snapshot document of an index, as `GET /dump` serves it and the snapshot writer stores it.
 * @internal
 */
export async function snapshotDocument(index: KvIndex, model: string): Promise<{ [key: string]: unknown }> {
  const seqs = activeSeqs(index);
  await index.flush();
  return {
    [`${model}:default`]: {
      block_size: index.blockSize,
      events: index.dump(),
      engine_seqs: seqs.map((s) => ({
        worker_id: s.workerId,
        dp_rank: s.dpRank,
        seq: s.seq,
        ...(s.digest == null ? {} : { digest: s.digest }),
      })),
    },
  };
}

/** The snapshot as JSON text (u64s exact). @internal */
export async function snapshotText(index: KvIndex, model: string): Promise<string> {
  return stringifyLossless(await snapshotDocument(index, model));
}

function bad(what: string): never {
  throw new KvRouteError('ERR_INVALID_EVENT', `warm start: ${what}`);
}

function u64(v: unknown, what: string): bigint {
  if (typeof v === 'bigint' && v >= 0n) return v;
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return BigInt(v);
  // The lossless parser keeps integers beyond 2^53 as their digits.
  if (typeof v === 'string' && /^[0-9]{1,20}$/.test(v) && BigInt(v) < 2n ** 64n) return BigInt(v);
  bad(`${what} must be a u64, got ${JSON.stringify(String(v))}`);
}

/**
 * Parses a snapshot document: Dynamo's dump shape (one entry per model and group), or a bare
 * event array as `KvIndex.dump()` gives. With several entries, `model` picks one.
 * @throws {KvRouteError} `ERR_INVALID_EVENT` for a malformed document; `ERR_INVALID_ARG` when its block size is not `blockSize`.
 * @internal
 */
export function parseSnapshot(text: string, blockSize: number, model?: string): ParsedSnapshot {
  let doc: unknown;
  try {
    // The rules of `events/json-rules.ts` hold for the whole document, as in the native reader
    // (`json/rules.rs`); an event's nesting limit counts from the event (`eventsWithinLimit`).
    doc = parseJsonDocument(text);
  } catch (err) {
    bad(`the snapshot is not JSON (${(err as Error).message})`);
  }
  if (Array.isArray(doc)) return { blockSize, events: eventsWithinLimit(doc), engineSeqs: [] };
  if (doc === null || typeof doc !== 'object') bad('the snapshot must be a JSON object or an event array');
  const entries = Object.entries(doc as Record<string, unknown>);
  const chosen = model === undefined ? entries : entries.filter(([k]) => k === `${model}:default` || k === model);
  if (chosen.length !== 1) {
    bad(
      chosen.length === 0
        ? `no entry${model === undefined ? '' : ` for model ${JSON.stringify(model)}`} in the snapshot (has: ${entries.map(([k]) => k).join(', ') || 'none'})`
        : `the snapshot has ${chosen.length} entries (${chosen.map(([k]) => k).join(', ')}): name the model`,
    );
  }
  const entry = chosen[0][1] as Record<string, unknown> | null;
  if (entry === null || typeof entry !== 'object' || !Array.isArray(entry.events)) bad('an entry must have an events array');
  const size = Number(u64(entry.block_size, 'block_size'));
  if (size !== blockSize)
    throw new KvRouteError('ERR_INVALID_ARG', `warm start: the snapshot's block size is ${size}, this index's is ${blockSize}`);
  const seqs = entry.engine_seqs ?? [];
  if (!Array.isArray(seqs)) bad('engine_seqs must be an array');
  const engineSeqs = seqs.map((s: unknown, i) => {
    const o = (s ?? {}) as Record<string, unknown>;
    const dpRank = Number(u64(o.dp_rank, `engine_seqs[${i}].dp_rank`));
    const digest = o.digest == null ? null : u64(o.digest, `engine_seqs[${i}].digest`);
    return { workerId: u64(o.worker_id, `engine_seqs[${i}].worker_id`), dpRank, seq: u64(o.seq, `engine_seqs[${i}].seq`), digest };
  });
  return { blockSize: size, events: eventsWithinLimit(entry.events), engineSeqs };
}

/** A snapshot's events, refused as `applyEvents` refuses one nested too deep. */
function eventsWithinLimit(events: unknown[]): RouterEvent[] {
  const deep = events.findIndex(nestsTooDeep);
  if (deep >= 0) throw new KvRouteError('ERR_INVALID_EVENT', `events[${deep}]: invalid JSON: ${TOO_DEEP}`);
  return events as RouterEvent[];
}
