/**
 * What an engine rank (`engine.ts`) is configured with, and what one of its passes produces.
 * @internal
 * @module
 */

import type { CacheEvent, FullBlock } from './kv-cache.js';
import type { PreemptionMode } from './preemption.js';
import type { SimRequest } from './sim-request.js';
import type { ResolvedSpeculative } from './speculative.js';
import type { TimingModel } from './timing.js';

/** Engine knobs (vLLM's names). */
export interface EngineConfig {
  blockSize: number;
  numGpuBlocks: number;
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  /** Divides every simulated duration. */
  speedup: number;
  /**
   * Divides the decode part of a pass on top of `speedup` (Dynamo's mocker
   * `decode_speedup_ratio`: an engine that emits several tokens a step, as with speculative
   * decoding, modelled as a faster step). Default 1: none.
   */
  decodeSpeedup?: number;
  /**
   * Multi-token decode steps (MTP, EAGLE) as Dynamo's mocker samples them (see
   * `speculative.ts`): a decode step makes room for its longest burst, then emits the sampled
   * token and the drafts accepted; with it the first token after prefill takes a decode step
   * too, and the last block of a cached prefix is recomputed. Default: none.
   */
  speculative?: ResolvedSpeculative;
  /** How a pass's duration is computed (see {@link TimingModel}). Default `'dynamo'`. */
  timing?: TimingModel;
  /**
   * The identity of a request's `index`-th output block (the block after its full prompt blocks,
   * `promptBlocks.length + index` from the start), given the block before it. Default: unique to
   * the request (replay's generated tokens are unique). The live mock worker derives it from the
   * tokens, so a later prompt that repeats a response hits the cache, as in vLLM.
   */
  outputBlock?: (r: SimRequest, index: number, parent: FullBlock | undefined) => FullBlock;
  /** Blocks of host memory behind the GPU pool (vLLM's CPU offload; see `host-pool.ts`). Default 0: none. */
  hostBlocks?: number;
  /**
   * Time to load one block from host memory back to the GPU (ms, before `speedup`). The request
   * waits for its load; the rank's passes go on; one load at a time per rank. Default 0: loads
   * are instant, and the request prefills in the pass that admits it.
   */
  hostLoadMsPerBlock?: number;
  /** Which running request is preempted when blocks run out (`preemption.ts`). Default `'lifo'`. */
  preemptionMode?: PreemptionMode;
}

/** What a pass produced. */
export interface PassResult {
  durationMs: number;
  /** Requests whose first token came out at the end of the pass. */
  firstTokens: SimRequest[];
  /** Requests that finished at the end of the pass. */
  finished: SimRequest[];
  /** Preemptions in the pass (for vLLM's `num_preemptions` counter; the replay counts per request). */
  preempted: number;
  events: CacheEvent[];
}

/**
 * Whether a pass ran nothing (it lasts 0 ms and produces no token): the rank then waits for its
 * first load from host memory (`nextLoadReadyMs`), or is stuck when none is in flight.
 */
export function ranNothing(pass: PassResult): boolean {
  return pass.durationMs === 0 && pass.firstTokens.length === 0 && pass.finished.length === 0;
}
