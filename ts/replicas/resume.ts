/**
 * Engine seqs a warm start loaded, per index, until the worker's source is subscribed: the link
 * between {@link warmStart} and {@link KvIndex.subscribe} without widening either's API.
 * @internal
 * @module
 */

import type { EngineSeq } from './snapshot.js';

/** Per worker, per rank: the seq to resume after and the digest of its batch (-1n: unknown). */
const pending = new WeakMap<object, Map<bigint, Map<number, [bigint, bigint]>>>();

/** Remembers the seqs of a snapshot just loaded into `index` (replacing an earlier one's). */
export function recordResumeSeqs(index: object, seqs: readonly EngineSeq[]): void {
  const byWorker = new Map<bigint, Map<number, [bigint, bigint]>>();
  for (const s of seqs) {
    const ranks = byWorker.get(s.workerId) ?? new Map<number, [bigint, bigint]>();
    byWorker.set(s.workerId, ranks);
    ranks.set(s.dpRank, [s.seq, s.digest ?? -1n]);
  }
  pending.set(index, byWorker);
}

/**
 * The seqs to resume a worker's ranks after and the digests of their batches (-1n: none), taken
 * once: a later subscription of the same worker starts afresh, as the index has moved on since
 * the snapshot.
 */
export function takeResumeSeqs(
  index: object,
  workerId: bigint,
  ranks: readonly number[],
): { resumeAfter: bigint[]; resumeDigests: bigint[] } | undefined {
  const seqs = pending.get(index)?.get(workerId);
  if (!seqs) return undefined;
  pending.get(index)?.delete(workerId);
  const at = (r: number) => seqs.get(r) ?? ([-1n, -1n] as const);
  return { resumeAfter: ranks.map((r) => at(r)[0]), resumeDigests: ranks.map((r) => at(r)[1]) };
}
