/**
 * The native index backend: `NativeKvIndex` behind the `IndexBackend` interface.
 * @internal
 * @module
 */

import type { IndexBackend, IngestBackend, RawIndexStats, RawScore, RawSnapshotInfo } from '../backend-types.js';
import { callNative, fromCodedText, fromNativeError } from '../errors.js';
import type { NativeBinding } from './binding.js';
import { nativeIngest } from './ingest.js';

/** The binding object behind each native index wrapper, for the router core that shares it. */
export const rawIndexes = new WeakMap<IndexBackend, InstanceType<NativeBinding['NativeKvIndex']>>();

export function nativeIndex(binding: NativeBinding, writerThreads: number): IndexBackend {
  const inner = callNative(() => new binding.NativeKvIndex(writerThreads));
  let ingest: IngestBackend | undefined;
  // Result buffers reused across calls; grown when a query matches more ranks than they hold.
  let ids = new BigUint64Array(64);
  let nums = new Uint32Array(3 * 64);
  function findMatches(locals: BigUint64Array, nowMs: number): RawScore[] {
    let n: number;
    try {
      n = inner.findMatchesInto(locals, nowMs, ids, nums);
      if (n > ids.length) {
        ids = new BigUint64Array(2 * n);
        nums = new Uint32Array(6 * n);
        n = inner.findMatchesInto(locals, nowMs, ids, nums);
      }
    } catch (err) {
      throw fromNativeError(err);
    }
    const out: RawScore[] = new Array(n);
    for (let i = 0; i < n; i++) out[i] = { workerId: ids[i], dpRank: nums[3 * i], blocks: nums[3 * i + 1], treeSize: nums[3 * i + 2] };
    return out;
  }
  const wrapper: IndexBackend = {
    applyPacked: (meta, words, nowMs) => callNative(() => inner.applyPacked(meta, words, nowMs)),
    applyJson: (text, batch, nowMs) => callNative(() => inner.applyJson(text, batch, nowMs)),
    async applySnapshotJson(text, model, blockSize, nowMs) {
      const outcome = (await callNative(() => inner.applySnapshotJson(text, model, blockSize, nowMs))) as RawSnapshotInfo | string;
      if (typeof outcome === 'string') throw fromCodedText(outcome);
      return outcome;
    },
    removeWorker: (workerId, dpRank) => callNative(() => inner.removeWorker(workerId, dpRank)),
    recordRouting: (workerId, dpRank, locals, nowMs, expiresAtMs) =>
      callNative(() => inner.recordRouting(workerId, dpRank, locals, nowMs, expiresAtMs)),
    findMatches,
    tieredMatches: (locals, nowMs, workers, ranks, out) => callNative(() => inner.tieredMatches(locals, nowMs, workers, ranks, out)),
    async flush() {
      const outcome = (await inner.flush()) as string;
      if (outcome !== '') throw fromCodedText(outcome);
    },
    flushSync: () => callNative(() => inner.flushBlocking()),
    dump: () => callNative(() => inner.dump()),
    stats: (): RawIndexStats => callNative(() => inner.stats()),
    pending: () => callNative(() => inner.pending()),
    close: () => callNative(() => inner.close()),
    ingest(blockSize) {
      ingest ??= nativeIngest(binding, inner, blockSize);
      return ingest;
    },
  };
  rawIndexes.set(wrapper, inner);
  return wrapper;
}
