/**
 * A request's `batchPrompts`: prompts that run beside its own on the worker it is sent to (an
 * SGLang `/generate` batch goes whole to one server). Each is scored on every candidate under a
 * core handle of its own, and what it would add there, its uncached tokens and its blocks not
 * active on the rank, joins the candidate's prefill and decode terms, so the batch is placed by
 * all the work it brings and not by its first prompt alone. Once a rank is chosen each is booked
 * there under its handle, and lives and ends with the request (see `KvRouter`).
 * @internal
 * @module
 */

import { CANDIDATE_FIGURES } from '../backend-types.js';
import { KvRouteError } from '../errors.js';
import { parseBlockHashOptions } from '../hashing.js';
import { MAX_PROMPTS_PER_BATCH } from '../limits.js';
import { checkOptions, describe, toTokens } from '../validate.js';
import type { PromptBooking } from './booking.js';
import { type CostOptions, cachedTokensOf, tierTokensAt } from './select.js';

/** A batch prompt as the router scores it: its tokens, and the adapter its blocks are hashed under. */
export interface PreparedBatchPrompt {
  tokens: Uint32Array;
  loraName: string | undefined;
}

/**
 * `req.batchPrompts` checked: each a non-empty token list, or `{ tokens, loraName }` (a name, or
 * null for none: the base model's blocks; absent: the request's `loraName`), at most
 * `MAX_PROMPTS_PER_BATCH`.
 */
export function parseBatchPrompts(value: unknown, name: string, requestLora: string | undefined): PreparedBatchPrompt[] {
  if (value === undefined) return [];
  if (!Array.isArray(value))
    throw new KvRouteError(
      'ERR_INVALID_ARG',
      `${name} must be an array of token lists or { tokens, loraName } objects, got ${describe(value)}`,
    );
  if (value.length > MAX_PROMPTS_PER_BATCH)
    throw new KvRouteError('ERR_INVALID_ARG', `${name} has ${value.length} prompts; at most ${MAX_PROMPTS_PER_BATCH} are accepted`);
  return value.map((entry: unknown, i) => {
    const at = `${name}[${i}]`;
    const own = entry !== null && typeof entry === 'object' && !Array.isArray(entry) && !(entry instanceof Uint32Array);
    const o = own ? checkOptions(entry, at, ['tokens', 'loraName']) : { tokens: entry };
    const tokens = toTokens(o.tokens, own ? `${at}.tokens` : at);
    if (tokens.length === 0) throw new KvRouteError('ERR_INVALID_ARG', `${own ? `${at}.tokens` : at} must not be empty`);
    if (!own || o.loraName === undefined) return { tokens, loraName: requestLora };
    if (o.loraName === null) return { tokens, loraName: undefined };
    return { tokens, loraName: parseBlockHashOptions({ loraName: o.loraName }, at).loraName };
  });
}

/**
 * Of a prompt's `blocks`, the ones neither active on the rank (the first `blocks − fresh`) nor
 * accounted to another prompt (the first `shared`): the ones it alone adds there.
 */
function distinctFresh(blocks: number, fresh: number, shared: number): number {
  return Math.max(0, blocks - Math.max(shared, blocks - fresh));
}

/**
 * What a batch's prompts add to each of `n` candidates, summed over the prompts: in `extra`,
 * uncached tokens at `2i` and blocks not active on the rank at `2i + 1`. Uncached tokens are each
 * prompt's own (each is prefilled as a request of its own, as Dynamo counts two requests sharing
 * a prefix); blocks are counted as the booking holds them, once however many of the batch's
 * prompts (the request's own among them) share them, unless KV reuse is not assumed.
 */
export class BatchLoad {
  readonly extra: Float64Array;
  /** Prompt j's uncached tokens on candidate i at `j · n + i` (what it books there). */
  readonly uncached: Float64Array;
  /** Prompt j's blocks not active on candidate i at `j · n + i`. */
  private readonly fresh: Float64Array;
  /** Prompt j's full blocks (what a replica peer is told it holds). */
  readonly blocks: number[] = [];

  constructor(
    readonly n: number,
    prompts: number,
  ) {
    this.extra = new Float64Array(2 * n);
    this.uncached = new Float64Array(prompts * n);
    this.fresh = new Float64Array(prompts * n);
  }

  /** The prompts' bookings on candidate `i`, under their `handles`. */
  bookings(handles: readonly number[], i: number): PromptBooking[] {
    return handles.map((handle, j) => ({ handle, prefillTokens: this.uncached[j * this.n + i], blocks: this.blocks[j] }));
  }

  /** Adds prompt `j` (`length` tokens, `blocks` full blocks) from its candidates' figures `f`. */
  add(
    j: number,
    length: number,
    blocks: number,
    f: Float64Array,
    o: Pick<CostOptions, 'blockSize' | 'hostCacheHitWeight' | 'diskCacheHitWeight' | 'trackPrefillTokens'>,
  ): void {
    this.blocks[j] = blocks;
    for (let i = 0; i < this.n; i++) {
      const k = CANDIDATE_FIGURES * i;
      const uncached = o.trackPrefillTokens ? Math.max(0, length - cachedTokensOf(f[k], tierTokensAt(f, k, o), o.blockSize)) : 0;
      this.uncached[j * this.n + i] = uncached;
      this.extra[2 * i] += uncached;
      this.fresh[j * this.n + i] = f[k + 4];
    }
  }

  /**
   * Sets the blocks the prompts add on each candidate, once every prompt and the request are
   * scored: `shared` the leading blocks of each that another accounts for (the core's
   * `sharedLeadingBlocks` of the batch's handles, then the request's), `ownBlocks` the request's
   * full blocks, its figures in `f`. A rank's active blocks of a prompt are a prefix of it (a
   * block's identity names its whole prefix), so a prompt adds its blocks past both that prefix
   * and the ones another accounts for, which counts every distinct block once.
   */
  settle(shared: Float64Array, ownBlocks: number, f: Float64Array, o: Pick<CostOptions, 'trackActiveBlocks'>): void {
    if (!o.trackActiveBlocks) return;
    const n = this.n;
    const prompts = this.blocks.length;
    for (let i = 0; i < n; i++) {
      let added = 0;
      for (let j = 0; j < prompts; j++) added += distinctFresh(this.blocks[j], this.fresh[j * n + i], shared[j]);
      // The request's blocks not active here count in its own term already; any of them
      // accounted to a prompt are counted above too, so the difference comes off.
      const ownFresh = f[CANDIDATE_FIGURES * i + 4];
      added += distinctFresh(ownBlocks, ownFresh, shared[prompts]) - ownFresh;
      this.extra[2 * i + 1] = added;
    }
  }
}
