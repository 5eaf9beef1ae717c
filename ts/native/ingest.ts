/**
 * The native ingestion backend: `applyEngineBatch`, counters and `NativeEngineSource` behind the
 * `IngestBackend` interface. Sockets, decoding, hashing and applying run on a Rust thread per
 * source; this file only forwards calls.
 * @internal
 * @module
 */

import type { IngestBackend, RawSourceConfig, SourceBackend } from '../backend-types.js';
import { callNative } from '../errors.js';
import type { NativeBinding } from './binding.js';

type RawIndex = InstanceType<NativeBinding['NativeKvIndex']>;

export function nativeIngest(binding: NativeBinding, inner: RawIndex, blockSize: number): IngestBackend {
  return {
    applyBatch: (workerId, dpRank, payload, nowMs) => callNative(() => inner.applyEngineBatch(workerId, dpRank, payload, blockSize, nowMs)),
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
