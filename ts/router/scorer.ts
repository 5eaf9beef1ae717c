/**
 * Scoring and choosing, the heart of a routing decision: one backend call gives every
 * candidate's hashes, overlap and load; the costs are computed in TypeScript (so both backends
 * share them); then the choice, by softmax temperature or by the caller's `selector`.
 * @internal
 * @module
 */

import { CANDIDATE_FIGURES, type RouterCoreBackend } from '../backend-types.js';
import { KvRouteError } from '../errors.js';
import type { SeededRandom } from '../random.js';
import { describe } from '../validate.js';
import type { ResolvedRouterOptions } from './options.js';
import type { Prepared } from './request.js';
import { type CandidateScore, chooseCandidate, costsFromFigures } from './select.js';
import type { RouteRequest } from './types.js';
import type { Candidates } from './workers.js';

export class Scorer {
  /** The backend's figures per candidate, reused across calls (grown as needed). */
  private figures = new Float64Array(CANDIDATE_FIGURES * 64);

  constructor(
    private readonly core: RouterCoreBackend,
    private readonly opts: ResolvedRouterOptions,
    private readonly rng: SeededRandom,
  ) {}

  /** Every candidate's score under `handle` (which the core then books or discards), and the request's block count. */
  score(handle: number, p: Prepared, c: Candidates, now: number): { scores: CandidateScore[]; blocks: number } {
    const n = c.ranks.length;
    if (this.figures.length < CANDIDATE_FIGURES * n) this.figures = new Float64Array(CANDIDATE_FIGURES * n * 2);
    const f = this.figures;
    const o = this.opts;
    const blocks = this.core.score(
      handle,
      p.tokens,
      o.blockSize,
      p.loraName,
      p.cacheNamespace,
      false,
      p.mmOffsets,
      p.mmHashes,
      c.workers,
      c.ranks,
      now,
      o.assumeKvReuse,
      f,
    );
    return { scores: costsFromFigures(f, c, p, o), blocks };
  }

  /**
   * The index of the chosen candidate.
   * @throws {KvRouteError} `ERR_INVALID_ARG` when a `selector` returns something else than an index of `scores`.
   */
  choose(scores: CandidateScore[], p: Prepared): number {
    const selector = this.opts.selector as ((c: readonly CandidateScore[], r: RouteRequest) => number) | undefined;
    if (!selector) return chooseCandidate(scores, p.temperature, this.rng);
    const i = selector(scores, p.req);
    if (!Number.isInteger(i) || i < 0 || i >= scores.length) {
      throw new KvRouteError('ERR_INVALID_ARG', `selector returned ${describe(i)}, not an index in [0, ${scores.length})`);
    }
    return i;
  }
}
