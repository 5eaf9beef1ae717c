/**
 * A request as a simulated engine rank sees it (`engine.ts`): its prompt's blocks, its progress
 * through prefill and decode, the blocks it holds, and what the report reads back. The twin of
 * `kvroute_core::replay::request`.
 * @internal
 * @module
 */

import type { CacheEvent, FullBlock } from './kv-cache.js';

/** A request as an engine sees it. */
export class SimRequest {
  /** Arrival in virtual ms. */
  arrivalMs = 0;
  firstAdmitMs = -1;
  firstTokenMs = -1;
  lastTokenMs = -1;
  /** Prompt tokens found in the prefix cache, the best over admissions. */
  reusedTokens = 0;
  /**
   * Prompt tokens found in a cache at the first admission, before any preemption (Dynamo's
   * `first_admission_prefix_cache_reused_ratio` counts these).
   */
  firstReusedTokens = 0;
  /**
   * The part of `reusedTokens` that came back from host memory (CPU offload), not the GPU pool:
   * the live mock worker reports it as vLLM's external (connector) hits. Bookkeeping only, so the
   * Rust twin, which reports neither, does not keep it.
   */
  reusedHostTokens = 0;
  generated = 0;
  /** Tokens whose KV is computed or cached (prompt plus regenerated output after preemption). */
  prefilled = 0;
  admitted = false;
  /**
   * The request's place in its rank's running order: set each time it leaves the queue, so a
   * request restarted after a preemption is the newest running one, as in vLLM's `running`
   * list, which preemption picks its victims from (`preemption.ts`).
   */
  admittedSeq = 0;
  preemptions = 0;
  /** Full blocks in use, in order. */
  held: FullBlock[] = [];
  promptTaken = 0;
  outputFull = 0;
  partial = false;
  justPrefilled = false;
  inDecode = false;
  /** While its prefix loads back from host memory: when the load ends (ms); -1 otherwise. */
  loadReadyMs = -1;
  /** While it loads: the Stored event of the blocks its load fills, announced when it ends. */
  loadStored: CacheEvent | undefined = undefined;
  /**
   * Prompt tokens whose KV a prefill worker computed and this rank pulls (a disaggregated
   * decode): prefilling them takes no compute time, as Dynamo's decode workers skip prefill
   * time. Lost at a preemption (the prefill worker freed them after the transfer). Only the live
   * mock worker sets it, so the Rust twin, which replay alone drives, does not keep it.
   */
  remoteTokens = 0;

  constructor(
    readonly uid: number,
    readonly inputLength: number,
    readonly outputLength: number,
    /** Full prompt blocks at the engine block size. */
    readonly promptBlocks: FullBlock[],
  ) {}

  get context(): number {
    return this.inputLength + this.generated;
  }
}

const OUTPUT_TAG = 0x6f75747075745f62n;

/** The `index`-th output block of `r`: unique to the request (replay's generated tokens are unique). */
export function uniqueOutputBlock(r: SimRequest, index: number): FullBlock {
  const i = BigInt(index);
  // Negative ids never meet the prompt blocks' (interned from 0 up): output blocks are never shared.
  return { seq: (BigInt(r.uid) << 24n) ^ i ^ OUTPUT_TAG, local: (BigInt(r.uid) << 24n) ^ i, id: -(r.uid * 2 ** 24 + index + 1) };
}
