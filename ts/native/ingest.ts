/**
 * The native ingestion backend: `applyEngineBatch`, counters and `NativeEngineSource` behind the
 * `IngestBackend` interface. Sockets, decoding, hashing and applying run on a Rust thread per
 * source; this file only forwards calls.
 * @internal
 * @module
 */

import type { IngestBackend, RawBatchResult, RawIngestCounters, RawSourceConfig, SourceBackend } from '../backend-types.js';
import { callNative } from '../errors.js';
import type { NativeBinding } from './binding.js';

type RawIndex = InstanceType<NativeBinding['NativeKvIndex']>;

/** Unflattens `NativeBatchResult.figures` (layout in the binding's `flat_counters`). */
function fromFigures(error: string | null | undefined, f: Float64Array): RawBatchResult {
  const counters: RawIngestCounters = {
    batches: f[3],
    storedEvents: f[4],
    removedEvents: f[5],
    clearedEvents: f[6],
    storedBlocks: f[7],
    removedHashes: f[8],
    unknownEvents: f[9],
    extraFields: f[10],
    foldedHashes: f[11],
    oddLengthHashes: f[12],
    shortTokens: f[13],
    dpRankMismatches: f[14],
    decodeErrors: f[15],
    firstDecodeError: error ?? null,
    tierStored: [f[16], f[17], f[18]],
    tierRemoved: [f[19], f[20], f[21]],
    tierBlocks: [0, 0, 0],
    // A literal: `Array.from(f.subarray(22, 34))` cost 0.7 µs a batch, a fifth of a small
    // batch's whole `applyEngineBatch`.
    filtered: [f[22], f[23], f[24], f[25], f[26], f[27], f[28], f[29], f[30], f[31], f[32], f[33]],
  };
  return { error, indexEvents: f[0], blockSizeMismatch: f[1] >= 0 ? [f[1], f[2]] : undefined, counters };
}

/** Numbers per batch result (`BATCH_FIGURES` in the binding). */
const BATCH_FIGURES = 34;

export function nativeIngest(binding: NativeBinding, inner: RawIndex, blockSize: number): IngestBackend {
  const figures = new Float64Array(BATCH_FIGURES);
  return {
    applyBatch(workerId, dpRank, payload, nowMs) {
      const error = callNative(() => inner.applyEngineBatchInto(workerId, dpRank, payload, blockSize, nowMs, figures));
      return fromFigures(error, figures);
    },
    counters: (workerId, dpRank) => callNative(() => inner.ingestCounters(blockSize, workerId, dpRank)),
    forgetWorker: (workerId) => callNative(() => inner.forgetEngineWorker(blockSize, workerId)),
    startSource(config: RawSourceConfig): SourceBackend {
      const source = callNative(() => new binding.NativeEngineSource(inner, config));
      return {
        status: () => callNative(() => source.status()),
        takeChanges: () => callNative(() => source.takeChanges()),
        close: () => callNative(() => source.close()),
      };
    },
  };
}
