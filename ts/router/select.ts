/**
 * Cost and choice. Per candidate (worker, dp rank):
 * `cost = overlapScoreWeight · prefillTokens / blockSize + decodeBlocks`, where `prefillTokens` is
 * the rank's active prefill load plus this request's uncached tokens, and `decodeBlocks` its
 * active blocks plus this request's blocks not already active there (Dynamo's classic cost).
 */

import { CANDIDATE_FIGURES } from '../backend-types.js';
import type { SeededRandom } from '../random.js';
import type { RouteRequest } from './types.js';

/**
 * What routing weighed for one candidate.
 * @group Router
 */
export interface CandidateScore {
  /** The worker. */
  workerId: bigint;
  /** Its data-parallel rank. */
  dpRank: number;
  /** Leading blocks of the request this rank already caches. */
  overlap: number;
  /** Active prefill tokens on the rank plus this request's uncached tokens. */
  prefillTokens: number;
  /** Active blocks on the rank plus this request's blocks not already active there. */
  decodeBlocks: number;
  /** Blocks the rank caches in total (tie-breaker). */
  treeSize: number;
  /** The routing cost; lower is better. */
  cost: number;
}

/**
 * A custom policy: returns the index of the chosen candidate.
 * @group Router
 */
export type Selector = (candidates: readonly CandidateScore[], req: RouteRequest) => number;

/**
 * The default choice. Temperature 0: the lowest cost; among equal costs the smallest tree, then a
 * seeded random pick. Temperature T > 0: sample with `p ∝ exp(−(c − cmin) / ((cmax − cmin) · T))`,
 * uniformly when all costs are equal.
 * @internal
 */
export function chooseCandidate(candidates: readonly CandidateScore[], temperature: number, rng: SeededRandom): number {
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (const c of candidates) {
    if (c.cost < min) min = c.cost;
    if (c.cost > max) max = c.cost;
  }
  if (temperature === 0 || min === max) {
    const cheapest = candidates.map((_, i) => i).filter((i) => candidates[i].cost === min);
    if (temperature > 0) return cheapest[Math.floor(rng.next() * cheapest.length)];
    // A loop, not Math.min(...): spreading hundreds of thousands of candidates overflows the stack.
    let smallest = Number.POSITIVE_INFINITY;
    for (const i of cheapest) if (candidates[i].treeSize < smallest) smallest = candidates[i].treeSize;
    const tied = cheapest.filter((i) => candidates[i].treeSize === smallest);
    return tied.length === 1 ? tied[0] : tied[Math.floor(rng.next() * tied.length)];
  }
  const weights = candidates.map((c) => Math.exp(-(c.cost - min) / ((max - min) * temperature)));
  const total = weights.reduce((a, b) => a + b, 0);
  let u = rng.next() * total;
  for (let i = 0; i < weights.length; i++) {
    u -= weights[i];
    if (u < 0) return i;
  }
  return weights.length - 1;
}

/**
 * The candidates' figures (overlap, tree size, active prefill tokens, active blocks, new blocks;
 * `CANDIDATE_FIGURES` per candidate, as the router core fills them) turned into scores and costs.
 * @internal
 */
export function costsFromFigures(
  f: Float64Array,
  c: { workers: BigUint64Array; ranks: Uint32Array },
  p: { tokens: Uint32Array; weight: number },
  o: { blockSize: number; trackPrefillTokens: boolean; trackActiveBlocks: boolean },
): CandidateScore[] {
  const n = c.ranks.length;
  const isl = p.tokens.length;
  const scores: CandidateScore[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const k = CANDIDATE_FIGURES * i;
    const overlap = f[k];
    const prefillTokens = f[k + 2] + (o.trackPrefillTokens ? Math.max(0, isl - overlap * o.blockSize) : 0);
    const decodeBlocks = f[k + 3] + (o.trackActiveBlocks ? f[k + 4] : 0);
    scores[i] = {
      workerId: c.workers[i],
      dpRank: c.ranks[i],
      overlap,
      prefillTokens,
      decodeBlocks,
      treeSize: f[k + 1],
      cost: (p.weight * prefillTokens) / o.blockSize + decodeBlocks,
    };
  }
  return scores;
}
