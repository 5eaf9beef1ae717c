/**
 * The native backend: the napi binding behind the backend interfaces. It only forwards and
 * translates errors; arguments were validated by the caller.
 * @internal
 * @module
 */

import type { Backend, HashingBackend } from '../backend-types.js';
import { callNative } from '../errors.js';
import { blockCount } from '../validate.js';
import type { NativeBinding } from './binding.js';
import { nativeIndex } from './index.js';
import { nativeReplayFleet } from './replay-fleet.js';
import { nativeRouterCore } from './router-core.js';
import { nativeTextTokenizer } from './text-tokenizer.js';

export function nativeBackend(binding: NativeBinding): Backend {
  const hashing: HashingBackend = {
    blockHashes(tokens, blockSize, loraName, cacheNamespace, eagle, mmOffsets, mmHashes) {
      const out = new BigUint64Array(blockCount(tokens.length, blockSize, eagle));
      callNative(() => binding.blockHashesInto(tokens, blockSize, loraName, cacheNamespace, eagle, mmOffsets, mmHashes, out));
      return out;
    },
    sequenceHashes: (localHashes) => callNative(() => binding.sequenceHashes(localHashes)),
    xxh3: (data, seedHi, seedLo) => callNative(() => binding.xxh3_64(data, seedHi, seedLo)[0]),
  };
  return {
    name: 'native',
    hashing,
    createIndex: (writerThreads) => nativeIndex(binding, writerThreads),
    decodeEngineBatch: (payload) => callNative(() => binding.decodeEngineBatch(payload)),
    createRouterCore: (index) => nativeRouterCore(binding, index),
    createReplayFleet: (spec) => nativeReplayFleet(binding, spec),
    createTextTokenizer: (json) => nativeTextTokenizer(binding, json),
  };
}
