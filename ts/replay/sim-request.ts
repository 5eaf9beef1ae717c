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
   * decode): they are filled in whole, outside the pass's token budget, with no compute time (as
   * Dynamo's decode workers skip prefill time), and the first token after them takes a decode step (the prefill's forward ran
   * elsewhere). Lost at a preemption (the prefill worker freed them after the transfer). Set by
   * the live mock worker's decode legs and by a disaggregated replay's (`startDecodeLeg`).
   */
  remoteTokens = 0;
  /** Disaggregated replay: the output the decode leg generates, kept while the prefill leg asks for one token; 0 otherwise. */
  decodeOutputLength = 0;
  /** Disaggregated replay: the prefill leg ended and this is the decode leg. */
  handedOver = false;
  /**
   * Decode leg: its prompt's blocks are reserved on its rank and hold the KV received, until it
   * is admitted (`handoff-holds.ts`).
   */
  kvReserved = false;
  /** Decode leg: its place in its rank's handoffs, which orders it among the waiting requests. */
  transferSeq = 0;
  /** Disaggregated replay: the prefill rank that holds the leg's KV until the transfer ends, and the decode rank that receives it. */
  sourceRank = 0;
  destinationRank = 0;

  constructor(
    readonly uid: number,
    readonly inputLength: number,
    /** Tokens to generate (one on a disaggregated replay's prefill leg). */
    public outputLength: number,
    /** Full prompt blocks at the engine block size. */
    readonly promptBlocks: FullBlock[],
  ) {}

  /** Makes this the prefill leg of a disaggregated request: its prompt and one token. */
  startPrefillLeg(): void {
    this.decodeOutputLength = this.outputLength;
    this.outputLength = 1;
  }

  /**
   * After the prefill leg ended (its blocks held by the prefill rank): the decode leg, the whole
   * output to generate again from the prompt's KV received by transfer. What the report reads
   * (arrival, reused tokens at the best and the first admission, preemptions) carries over; the
   * decode leg's first admission adds no reused tokens, a recompute after a preemption adds what
   * it finds (see `Engine.admit`).
   */
  startDecodeLeg(): void {
    this.outputLength = this.decodeOutputLength;
    this.generated = 0;
    this.firstTokenMs = -1;
    this.lastTokenMs = -1;
    this.remoteTokens = this.inputLength;
    this.handedOver = true;
  }

  /** What the request knew of its blocks, once it holds none. */
  forgetBlocks(): void {
    this.promptTaken = 0;
    this.outputFull = 0;
    this.prefilled = 0;
    this.remoteTokens = 0;
    this.admitted = false;
    this.kvReserved = false;
  }

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
