/**
 * The hit-ratio ceiling of a trace: prompt tokens a single infinite prefix cache would serve,
 * requests taken in trace order. Mirrored by `Fleet::upper_bound_hit_ratio` in the Rust core.
 * @internal
 * @module
 */

/**
 * `ids[i]`: request i's prompt block ids (interned, below `distinct`); `requests[i]` its
 * prompt length. Missing requests count for nothing.
 */
export function prefixCeiling(
  ids: ReadonlyArray<Int32Array | undefined>,
  requests: ReadonlyArray<{ inputLength: number } | undefined>,
  blockSize: number,
  distinct: number,
): number {
  const seen = new Uint8Array(distinct);
  let hit = 0;
  let total = 0;
  for (let i = 0; i < ids.length; i++) {
    const blocks = ids[i];
    const req = requests[i];
    if (!blocks || !req) continue;
    let n = 0;
    while (n < blocks.length && seen[blocks[n]] === 1) n++;
    hit += Math.min(n * blockSize, req.inputLength);
    total += req.inputLength;
    for (const id of blocks) seen[id] = 1;
  }
  return total > 0 ? hit / total : 0;
}
