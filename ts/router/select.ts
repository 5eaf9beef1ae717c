/**
 * Cost and choice: Dynamo's current cost, which equals its classic one at the defaults. Per
 * candidate (worker, dp rank):
 * `cost = prefillLoadScale · max(0, activePrefill + ISL − credit · overlap · blockSize) / blockSize
 *  + decodeBlocks + decodeActiveRequestWeight · activeRequests`,
 * where `credit = overlapScoreCredit / (1 + overlapScoreCreditDecay · excess / requestBlocks)`,
 * `excess` being the rank's active prefill blocks above the least loaded candidate's (no decay at
 * the default 0), and `decodeBlocks` the rank's active blocks plus this request's blocks not
 * already active there. With credit 1, no decay and no request weight this is the classic
 * `overlapScoreWeight · prefillTokens / blockSize + decodeBlocks`, to the last bit. With
 * `selectionPolicy: 'lmetric'` the same credited prefill blocks multiply `decodeBlocks + 1`
 * instead (Dynamo's `lmetric`), without the scale and the request weight. A decode pool's router
 * (`workerType: 'decode'`, prefill not tracked, credit above 0) costs
 * `max(0, decodeBlocks − credit · overlap − tierBlocks − sharedCredit) + decodeActiveRequestWeight ·
 * activeRequests` (Dynamo's decode-only branch). `sharedCredit`, `sharedCacheMultiplier` per block
 * of the request's `sharedCacheHits` at or past the rank's device prefix, lowers the prefill
 * term like the tiers' credit.
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
  /** Leading blocks of the request this rank already caches in device (GPU) memory. */
  overlap: number;
  /** Blocks past `overlap` the rank holds in host memory (its engine offloaded them). */
  hostBlocks: number;
  /** Blocks past the host run the rank holds on disk or external storage. */
  diskBlocks: number;
  /**
   * Blocks of the request's `sharedCacheHits` at or past `overlap`: what the rank could load from
   * the cache all workers share rather than compute (0 without shared-cache hits).
   */
  sharedBlocks: number;
  /**
   * The request's tokens the rank would not compute: `round((overlap + hostCacheHitWeight ·
   * hostBlocks + diskCacheHitWeight · diskBlocks) · blockSize)` (Dynamo's effective cached tokens).
   */
  cachedTokens: number;
  /** Active prefill tokens on the rank plus this request's uncached tokens. */
  prefillTokens: number;
  /** Active blocks on the rank plus this request's blocks not already active there. */
  decodeBlocks: number;
  /** Requests in flight on the rank (booked and not freed), by this router and its replicas; a batch's prompts count one each. */
  activeRequests: number;
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

/** The weights of the cost's prefill term for one request (its overrides applied). */
export interface PrefillWeights {
  /** Credit per cached block, ≥ 0 (Dynamo's `overlap_score_credit`). */
  credit: number;
  /** Multiplier of the credited prefill blocks (Dynamo's `prefill_load_scale`). */
  scale: number;
  /** Credit per shared-cache block past a rank's device prefix (Dynamo's `shared_cache_multiplier`). */
  shared: number;
}

/** The router-wide terms of the cost. */
export interface CostOptions {
  blockSize: number;
  trackPrefillTokens: boolean;
  trackActiveBlocks: boolean;
  overlapScoreCreditDecay: number;
  decodeActiveRequestWeight: number;
  /** `'lmetric'`: the cost is `prefillBlocks · (decodeBlocks + 1)` instead of the linear sum. */
  selectionPolicy: 'linear' | 'lmetric';
  /** `'decode'`: Dynamo's decode-only branch, when prefill is not tracked and the credit is positive. */
  workerType: 'aggregated' | 'prefill' | 'decode';
  /** Credit per host-tier block past the device prefix (Dynamo's `host_cache_hit_weight`). */
  hostCacheHitWeight: number;
  /** Credit per disk or external block past the host run (`disk_cache_hit_weight`). */
  diskCacheHitWeight: number;
}

/**
 * The candidates' figures (overlap, tree size, active prefill tokens, active blocks, new blocks,
 * active requests, host blocks, disk blocks; `CANDIDATE_FIGURES` per candidate, as the router
 * core fills them) turned into scores and costs. Lower-tier blocks are credited at their weights
 * beside the device overlap (Dynamo's `overlap_credit_blocks`), never scaled by the device credit
 * or its decay. `batch`: what a batch's other prompts add to each candidate (uncached tokens at
 * `2i`, blocks not active there at `2i + 1`; see batch-prompts.ts), joining its prefill and
 * decode terms uncredited.
 * @internal
 */
export function costsFromFigures(
  f: Float64Array,
  c: { workers: BigUint64Array; ranks: Uint32Array },
  p: { tokens: Uint32Array; weights: PrefillWeights; sharedHits: Uint32Array | undefined },
  o: CostOptions,
  batch?: Float64Array,
): CandidateScore[] {
  const n = c.ranks.length;
  const isl = p.tokens.length;
  const bs = o.blockSize;
  const { credit, scale } = p.weights;
  // Decay trades a cache-rich rank's credit for balance once its prefill backlog exceeds the
  // least loaded candidate's, measured in requests of this one's size (Dynamo's rule).
  const decays = o.overlapScoreCreditDecay > 0 && o.trackPrefillTokens;
  let leastActive = Number.POSITIVE_INFINITY;
  if (decays) for (let i = 0; i < n; i++) leastActive = Math.min(leastActive, f[CANDIDATE_FIGURES * i + 2]);
  const requestBlocks = Math.ceil(isl / bs);
  // A decode pool's router: cached blocks offset decode load (no KV transfer), not prefill work.
  const decodeOnly = o.workerType === 'decode' && !o.trackPrefillTokens && credit > 0;
  const scores: CandidateScore[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const k = CANDIDATE_FIGURES * i;
    const overlap = f[k];
    const active = f[k + 2];
    const hostBlocks = f[k + 6];
    const diskBlocks = f[k + 7];
    const tierTokens = tierTokensAt(f, k, o);
    const cachedTokens = cachedTokensOf(overlap, tierTokens, bs);
    const uncached = o.trackPrefillTokens ? Math.max(0, isl - cachedTokens) : 0;
    const sharedBlocks = p.sharedHits ? hitsFrom(p.sharedHits, overlap) : 0;
    // Like the tiers, credited in the cost only: the engine still loads these blocks.
    const sharedTokens = p.weights.shared * sharedBlocks * bs;
    const rankCredit = decays ? credit / (1 + (o.overlapScoreCreditDecay * ((active - leastActive) / bs)) / requestBlocks) : credit;
    // In tokens, so that credit 1 gives the classic cost's exact figures (and ties). A credit
    // above 1 may cancel the rank's backlog too, down to nothing (Dynamo clamps at 0).
    let prefill = active + uncached;
    if (o.trackPrefillTokens && tierTokens !== 0) prefill = active + Math.max(0, isl - overlap * bs - tierTokens);
    if (o.trackPrefillTokens && (rankCredit !== 1 || sharedTokens !== 0))
      prefill = Math.max(0, active + isl - rankCredit * overlap * bs - tierTokens - sharedTokens);
    const batchTokens = batch ? batch[2 * i] : 0;
    prefill += batchTokens;
    const decodeBlocks = f[k + 3] + (o.trackActiveBlocks ? f[k + 4] : 0) + (batch ? batch[2 * i + 1] : 0);
    const activeRequests = f[k + 5];
    scores[i] = {
      workerId: c.workers[i],
      dpRank: c.ranks[i],
      overlap,
      hostBlocks,
      diskBlocks,
      sharedBlocks,
      cachedTokens,
      prefillTokens: active + uncached + batchTokens,
      decodeBlocks,
      activeRequests,
      treeSize: f[k + 1],
      cost: decodeOnly
        ? Math.max(0, decodeBlocks - (credit * overlap + (tierTokens + sharedTokens) / bs)) + o.decodeActiveRequestWeight * activeRequests
        : o.selectionPolicy === 'lmetric'
          ? (prefill / bs) * (decodeBlocks + 1)
          : (scale * prefill) / bs + decodeBlocks + o.decodeActiveRequestWeight * activeRequests,
    };
  }
  return scores;
}

/** What a candidate's lower tiers save, in tokens, from its figures at `k`: zero unless a lower tier holds blocks. */
export function tierTokensAt(
  f: Float64Array,
  k: number,
  o: Pick<CostOptions, 'blockSize' | 'hostCacheHitWeight' | 'diskCacheHitWeight'>,
): number {
  return (o.hostCacheHitWeight * f[k + 6] + o.diskCacheHitWeight * f[k + 7]) * o.blockSize;
}

/**
 * The tokens a candidate would not compute: its device overlap's, and its lower tiers' at their
 * weights (exactly `overlap × blockSize`, the classic figure, when no lower tier holds any).
 */
export function cachedTokensOf(overlap: number, tierTokens: number, blockSize: number): number {
  return tierTokens === 0 ? overlap * blockSize : Math.round(overlap * blockSize + tierTokens);
}

/** Hits at block positions `from` and past, in sorted half-open `[start, end)` pairs (Dynamo's `hits_beyond`). */
function hitsFrom(pairs: Uint32Array, from: number): number {
  let n = 0;
  for (let i = 0; i < pairs.length; i += 2) n += Math.max(0, pairs[i + 1] - Math.max(pairs[i], from));
  return n;
}
