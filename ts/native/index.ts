/**
 * The native index backend: `NativeKvIndex` behind the `IndexBackend` interface.
 * @internal
 * @module
 */

import type { IndexBackend, RawIndexStats, RawScore } from '../backend-types.js';
import { fromNativeError, KvRouteError, type KvRouteErrorCode } from '../errors.js';
import type { NativeBinding } from './binding.js';

/** Decodes (worker id, dp rank << 32 | blocks, tree size) triples. */
export function decodeScores(packed: BigUint64Array): RawScore[] {
  const out: RawScore[] = new Array(packed.length / 3);
  for (let i = 0, j = 0; j < packed.length; i++, j += 3) {
    const mid = packed[j + 1];
    out[i] = { workerId: packed[j], dpRank: Number(mid >> 32n), blocks: Number(mid & 0xffffffffn), treeSize: Number(packed[j + 2]) };
  }
  return out;
}

function call<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw fromNativeError(err);
  }
}

export function nativeIndex(binding: NativeBinding, writerThreads: number): IndexBackend {
  const inner = call(() => new binding.NativeKvIndex(writerThreads));
  return {
    applyPacked: (meta, words, nowMs) => call(() => inner.applyPacked(meta, words, nowMs)),
    removeWorker: (workerId, dpRank) => call(() => inner.removeWorker(workerId, dpRank)),
    recordRouting: (workerId, dpRank, locals, nowMs, expiresAtMs) =>
      call(() => inner.recordRouting(workerId, dpRank, locals, nowMs, expiresAtMs)),
    findMatches: (locals, nowMs) => decodeScores(call(() => inner.findMatches(locals, nowMs))),
    async flush() {
      const outcome = (await inner.flush()) as string;
      if (outcome !== '') {
        const sep = outcome.indexOf(': ');
        throw new KvRouteError(outcome.slice(0, sep) as KvRouteErrorCode, outcome.slice(sep + 2));
      }
    },
    flushSync: () => call(() => inner.flushBlocking()),
    dump: () => call(() => inner.dump()),
    stats: (): RawIndexStats => call(() => inner.stats()),
    close: () => call(() => inner.close()),
  };
}
