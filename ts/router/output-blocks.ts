/**
 * Output-block tracking (`routerTrackOutputBlocks`, Dynamo's `router_track_output_blocks`): from
 * a request's reported output progress, how many blocks of its own to add to its rank's decode
 * load, and how much the blocks it alone holds still weigh. Dynamo adds a block each time
 * `ceil((ISL + generated) / blockSize)` grows, and then weighs the request's own blocks by
 * `max(0, 1 - generated / max(expected output, 1))` when the request came with an expected
 * output length: a request near its end is about to give its blocks back.
 * @internal
 * @module
 */

import { KvRouteError } from '../errors.js';
import { MAX_TOKENS_PER_REQUEST } from '../limits.js';
import { describe } from '../validate.js';

/** Refuses a reported output that is not an integer in [0, `MAX_TOKENS_PER_REQUEST`]. */
export function checkGeneratedTokens(generatedTokens: unknown): void {
  if (!Number.isInteger(generatedTokens) || (generatedTokens as number) < 0 || (generatedTokens as number) > MAX_TOKENS_PER_REQUEST)
    throw new KvRouteError(
      'ERR_INVALID_ARG',
      `generatedTokens must be an integer in [0, ${MAX_TOKENS_PER_REQUEST}], got ${describe(generatedTokens)}`,
    );
}

/** A routed request's output progress, kept from its routing to its `free`. */
export interface OutputProgress {
  /** Its prompt's tokens (ISL). */
  promptTokens: number;
  /** `maxOutputTokens` it was routed with, if any. */
  expectedOutputTokens: number | undefined;
  /** Tokens generated so far, as last reported. */
  generated: number;
  /** Output blocks added so far. */
  outputBlocks: number;
}

/** What a new report changes: blocks to add and, with an expected output, the decay to apply. */
export interface OutputStep {
  add: number;
  decay: number | undefined;
}

/**
 * The step for a report of `generated` tokens so far; `undefined` when nothing changes (no new
 * block boundary crossed, or a report older than the last one). Updates `progress`.
 */
export function outputStep(progress: OutputProgress, generated: number, blockSize: number): OutputStep | undefined {
  if (generated <= progress.generated) return undefined;
  progress.generated = generated;
  const blocks = (tokens: number) => Math.ceil(tokens / blockSize);
  const due = blocks(progress.promptTokens + generated) - blocks(progress.promptTokens);
  const add = due - progress.outputBlocks;
  if (add <= 0) return undefined;
  progress.outputBlocks = due;
  const expected = progress.expectedOutputTokens;
  return { add, decay: expected === undefined ? undefined : Math.max(0, 1 - generated / Math.max(expected, 1)) };
}
