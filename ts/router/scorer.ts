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
import { BatchLoad } from './batch-prompts.js';
import type { ResolvedRouterOptions } from './options.js';
import type { Prepared } from './request.js';
import { type CandidateScore, chooseCandidate, costsFromFigures } from './select.js';
import type { RouteRequest } from './types.js';
import type { Candidates } from './workers.js';

export class Scorer {
  /** The backend's figures per candidate, reused across calls (grown as needed). */
  private figures = new Float64Array(CANDIDATE_FIGURES * 64);
  /** A batch's handles, then their shared blocks (see `RouterCoreBackend.sharedLeadingBlocks`), reused across calls. */
  private group = new Float64Array(64);

  constructor(
    private readonly core: RouterCoreBackend,
    private readonly opts: ResolvedRouterOptions,
    private readonly rng: SeededRandom,
  ) {}

  /**
   * Every candidate's score under `handle`, and the request's block count. The request's
   * `batchPrompts` are scored under `batchHandles` (one each; none when not given), their load
   * added to each candidate's cost (see batch-prompts.ts). The core then books or discards every
   * handle.
   */
  score(
    handle: number,
    p: Prepared,
    c: Candidates,
    now: number,
    batchHandles: readonly number[] = [],
  ): { scores: CandidateScore[]; blocks: number; batch: BatchLoad | undefined } {
    const n = c.ranks.length;
    if (this.figures.length < CANDIDATE_FIGURES * n) this.figures = new Float64Array(CANDIDATE_FIGURES * n * 2);
    const f = this.figures;
    const o = this.opts;
    let batch: BatchLoad | undefined;
    if (batchHandles.length > 0) {
      batch = new BatchLoad(n, batchHandles.length);
      for (const [j, h] of batchHandles.entries()) {
        const { tokens, loraName } = p.batch[j];
        batch.add(j, tokens.length, this.scoreTokens(h, tokens, loraName, p, c, now, f), f, o);
      }
    }
    const blocks = this.scoreTokens(handle, p.tokens, p.loraName, p, c, now, f, p.mmOffsets, p.mmHashes);
    if (batch && o.trackActiveBlocks) {
      const count = batchHandles.length + 1;
      if (this.group.length < count) this.group = new Float64Array(count * 2);
      this.group.set(batchHandles);
      this.group[count - 1] = handle;
      this.core.sharedLeadingBlocks(this.group, count);
      batch.settle(this.group, blocks, f, o);
    }
    return { scores: costsFromFigures(f, c, p, o, batch?.extra), blocks, batch };
  }

  /**
   * The scores without booking: the request under `handles[0]`, its batch prompts under the
   * rest (pass as many as it has, or one to score its own prompt alone); every handle discarded.
   */
  peek(handles: readonly number[], p: Prepared, c: Candidates, now: number): CandidateScore[] {
    try {
      return this.score(handles[0], p, c, now, handles.slice(1)).scores;
    } finally {
      for (const h of handles) this.core.discard(h);
    }
  }

  /** One prompt's figures on every candidate into `f`, under `handle`, its blocks hashed under `loraName`; its block count. */
  private scoreTokens(
    handle: number,
    tokens: Uint32Array,
    loraName: string | undefined,
    p: Prepared,
    c: Candidates,
    now: number,
    f: Float64Array,
    mmOffsets?: Uint32Array,
    mmHashes?: BigUint64Array,
  ): number {
    const o = this.opts;
    return this.core.score(
      handle,
      tokens,
      o.blockSize,
      loraName,
      p.cacheNamespace,
      false,
      mmOffsets,
      mmHashes,
      c.workers,
      c.ranks,
      now,
      o.assumeKvReuse,
      f,
    );
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
