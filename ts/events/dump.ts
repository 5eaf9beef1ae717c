/**
 * Turns a backend's packed dump back into `RouterEvent` objects.
 * @internal
 * @module
 */

import { FLAG_HAS_PARENT, storageTierOf } from './packed.js';
import type { DumpedEvent } from './types.js';

export function unpackDump(meta: Uint32Array, words: BigUint64Array): DumpedEvent[] {
  const out: DumpedEvent[] = [];
  let w = 0;
  for (let m = 0; m < meta.length; m += 4) {
    const dpRank = meta[m + 1];
    const flags = meta[m + 2];
    const count = meta[m + 3];
    const workerId = words[w++];
    w++; // event id: renumbered below
    const parent = flags & FLAG_HAS_PARENT ? words[w++] : null;
    const blocks: Array<{ block_hash: bigint; tokens_hash: bigint; mm_extra_info: null }> = new Array(count);
    for (let i = 0; i < count; i++) {
      blocks[i] = { block_hash: words[w], tokens_hash: words[w + 1], mm_extra_info: null };
      w += 2;
    }
    out.push({
      worker_id: workerId,
      storage_tier: storageTierOf(flags),
      event: { event_id: BigInt(out.length), dp_rank: dpRank, data: { stored: { parent_hash: parent, start_position: null, blocks } } },
    });
  }
  return out;
}
