/**
 * The native router core: `NativeRouterCore` behind the `RouterCoreBackend` interface.
 * @internal
 * @module
 */

import type { IndexBackend, RawRankLoad, RouterCoreBackend } from '../backend-types.js';
import { callNative, KvRouteError } from '../errors.js';
import type { NativeBinding } from './binding.js';
import { rawIndexes } from './index.js';

export function nativeRouterCore(binding: NativeBinding, index: IndexBackend): RouterCoreBackend {
  const raw = rawIndexes.get(index);
  if (!raw) throw new KvRouteError('ERR_INTERNAL', 'a native router core needs a native index');
  const core = new binding.NativeRouterCore(raw);
  return {
    score: (handle, tokens, blockSize, lora, ns, eagle, mmOffsets, mmHashes, workers, ranks, nowMs, assumeKvReuse, out) =>
      callNative(() =>
        core.score(handle, tokens, blockSize, lora, ns, eagle, mmOffsets, mmHashes, workers, ranks, nowMs, assumeKvReuse, out),
      ),
    book: (handle, workerId, dpRank, prefillTokens, trackBlocks, nowMs, predictUntilMs) =>
      callNative(() => core.book(handle, workerId, dpRank, prefillTokens, trackBlocks, nowMs, predictUntilMs)),
    bookRemote: (handle, workerId, dpRank, blocks, unshared, prefillTokens, nowMs) =>
      callNative(() => core.bookRemote(handle, workerId, dpRank, blocks, unshared, prefillTokens, nowMs)),
    bookedBlocks: (handle) => callNative(() => core.bookedBlocks(handle)),
    sharedLeadingBlocks: (group, count) => callNative(() => core.sharedLeadingBlocks(group, count)),
    discard: (handle) => callNative(() => core.discard(handle)),
    prefillCompleted: (handle) => callNative(() => core.prefillCompleted(handle)),
    addOutputBlocks: (handle, count, decay) => callNative(() => core.addOutputBlocks(handle, count, decay)),
    touch: (handle, nowMs) => callNative(() => core.touch(handle, nowMs)),
    free: (handle) => callNative(() => core.free(handle)),
    expire: (cutoffMs) => callNative(() => core.expire(cutoffMs)),
    removeWorker: (workerId) => callNative(() => core.removeWorker(workerId)),
    snapshot(): RawRankLoad[] {
      const { workers, figures } = callNative(() => core.snapshot());
      return Array.from(workers, (workerId, i) => ({
        workerId,
        dpRank: figures[4 * i],
        activePrefillTokens: figures[4 * i + 1],
        activeBlocks: figures[4 * i + 2],
        requests: figures[4 * i + 3],
      }));
    },
  };
}
