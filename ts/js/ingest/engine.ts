/**
 * Decode → convert → apply into a {@link JsIndex}, with per-rank state and counters: the twin
 * of kvroute-core's `ingest::engine`. The pure-JS backend applies synchronously, on the caller's
 * thread.
 * @internal
 * @module
 */

import type { IngestBackend, RawBatchResult, RawSourceConfig, SourceBackend } from '../../backend-types.js';
import { FLAG_DEVICE_TIER, KIND_CLEARED, PackedWriter } from '../../events/packed.js';
import type { JsIndex } from '../index/js-index.js';
import { type ConvertOutcome, RankConverter } from './convert.js';
import { addCounters, emptyCounters } from './counters.js';
import { decodeEngineBatchJs } from './decode.js';
import { JsEngineSource } from './source.js';

/** Largest payload accepted, as on the native backend (64 MiB). */
export const MAX_PAYLOAD_BYTES = 64 << 20;

export interface JsBatchOutcome extends RawBatchResult {
  convert: ConvertOutcome;
  ts?: number;
}

export class JsIngest implements IngestBackend {
  private readonly ranks = new Map<string, { workerId: bigint; dpRank: number; conv: RankConverter }>();

  constructor(
    private readonly index: JsIndex,
    readonly blockSize: number,
  ) {}

  private converter(workerId: bigint, dpRank: number): RankConverter {
    const key = `${workerId}:${dpRank}`;
    let entry = this.ranks.get(key);
    if (!entry) {
      entry = { workerId, dpRank, conv: new RankConverter() };
      this.ranks.set(key, entry);
    }
    return entry.conv;
  }

  applyBatch(workerId: bigint, dpRank: number, payload: Uint8Array, nowMs: number, eventId = 0n): JsBatchOutcome {
    const conv = this.converter(workerId, dpRank);
    const batchCounters = emptyCounters();
    const decoded =
      payload.length > MAX_PAYLOAD_BYTES
        ? { error: `payload of ${payload.length} bytes exceeds the ${MAX_PAYLOAD_BYTES}-byte limit` }
        : decodeEngineBatchJs(payload);
    if (decoded.error != null || !('events' in decoded)) {
      batchCounters.decodeErrors++;
      batchCounters.firstDecodeError = decoded.error;
      addCounters(conv.counters, batchCounters);
      return { error: decoded.error, indexEvents: 0, counters: batchCounters, convert: { freshRootStore: false, cleared: false } };
    }
    batchCounters.batches++;
    batchCounters.unknownEvents += decoded.unknownEvents;
    batchCounters.extraFields += decoded.extraFields;
    batchCounters.foldedHashes += decoded.foldedHashes;
    batchCounters.oddLengthHashes += decoded.oddLengthHashes;
    if (decoded.dpRank != null && decoded.dpRank !== dpRank) batchCounters.dpRankMismatches++;
    const totals = conv.counters;
    conv.counters = batchCounters;
    const out = new PackedWriter();
    const convert = conv.convert(workerId, dpRank, this.blockSize, eventId, decoded.events, out);
    conv.counters = totals;
    addCounters(totals, batchCounters);
    const packed = out.finish();
    if (out.eventCount > 0) this.index.applyPacked(packed.meta, packed.words, nowMs);
    return {
      indexEvents: out.eventCount,
      blockSizeMismatch: convert.blockSizeMismatch,
      counters: batchCounters,
      convert,
      ts: decoded.ts,
    };
  }

  /** Drops everything of the rank: an engine restart or an unrecoverable gap. */
  resetRank(workerId: bigint, dpRank: number, nowMs: number): void {
    this.ranks.get(`${workerId}:${dpRank}`)?.conv.reset();
    const out = new PackedWriter();
    out.pushMeta(KIND_CLEARED, dpRank, FLAG_DEVICE_TIER, 0);
    out.pushBigInt(workerId);
    out.pushBigInt(0n);
    const packed = out.finish();
    this.index.applyPacked(packed.meta, packed.words, nowMs);
  }

  counters(workerId: bigint | undefined, dpRank: number | undefined) {
    const total = emptyCounters();
    for (const entry of this.ranks.values()) {
      if ((workerId !== undefined && entry.workerId !== workerId) || (dpRank !== undefined && entry.dpRank !== dpRank)) continue;
      addCounters(total, { ...entry.conv.counters, tierBlocks: entry.conv.tierBlocks() });
    }
    return total;
  }

  forgetWorker(workerId: bigint): void {
    for (const [key, entry] of this.ranks) if (entry.workerId === workerId) this.ranks.delete(key);
  }

  startSource(config: RawSourceConfig): SourceBackend {
    return new JsEngineSource(this, config);
  }
}
