/**
 * What a mock worker reports of itself (`MockWorker.stats()`), summed over its ranks.
 * @internal
 * @module
 */

import { acceptedTokens } from '../replay/speculative.js';
import type { MockFault } from './options.js';
import type { RankPublisher } from './publisher.js';
import type { MockRank } from './rank.js';

/**
 * What a mock worker did so far.
 * @group Mock worker
 */
export interface MockWorkerStats {
  /** Requests finished, per rank in rank order. */
  finished: number[];
  /** Requests cut by a client disconnect or a fault. */
  aborted: number;
  /**
   * Running requests preempted for lack of KV blocks, all ranks (`/metrics`:
   * `vllm:num_preemptions_total`); which one goes is `preemptionMode`'s choice.
   */
  preemptions: number;
  /** Running requests, per rank. */
  running: number[];
  /** Waiting requests, per rank. */
  waiting: number[];
  /** KV pool usage per rank (0 to 1). */
  kvUsage: number[];
  /** Prompt tokens looked up in the prefix cache, all ranks. */
  prefixQueries: number;
  /** Prompt tokens the prefix cache served, all ranks (blocks loaded back from host memory included). */
  prefixHits: number;
  /** Blocks held in host memory per rank (with `cpuOffloadBlocks`). */
  hostBlocks: number[];
  /** Blocks loaded back from host memory instead of recomputed, all ranks (since each rank's last restart). */
  hostLoadedBlocks: number;
  /** KV-event batches published, all ranks. */
  batchesPublished: number;
  /** Batches not sent live because of `drop-events` faults. */
  batchesDropped: number;
  /** Replay requests answered. */
  replayRequests: number;
  /**
   * Legs of disaggregated requests: prefill legs that offered their KV to a decode worker
   * (vLLM's: answered with `kv_transfer_params`; SGLang's: met in a bootstrap room), and decode
   * legs that pulled their prompt's KV (filled in without compute).
   */
  kvTransfers: {
    /** Prefill legs that offered their KV. */
    offered: number;
    /** Decode legs that pulled their prompt's KV. */
    pulled: number;
  };
  /** With `speculative`: vLLM's `spec_decode_*` totals, all ranks (as `/metrics` gives them); absent without. */
  speculative?: {
    /** Decode steps that verified drafts. */
    drafts: number;
    /** Drafts verified. */
    draftTokens: number;
    /** Drafts accepted (counted as drawn, before a request's end cut its last burst). */
    acceptedTokens: number;
  };
  /** Faults applied, in order. */
  faults: MockFault['kind'][];
  /** True after a `crash` fault or `close()`. */
  closed: boolean;
}

/** A worker's stats from its ranks, publishers and own counters. */
export function collectStats(
  ranks: readonly MockRank[],
  publishers: readonly RankPublisher[],
  kvTransfers: MockWorkerStats['kvTransfers'],
  speculative: boolean,
  faults: readonly MockFault['kind'][],
  closed: boolean,
): MockWorkerStats {
  const sum = (f: (r: MockRank) => number) => ranks.reduce((n, r) => n + f(r), 0);
  return {
    finished: ranks.map((r) => r.counters.finished),
    aborted: sum((r) => r.counters.aborted),
    preemptions: sum((r) => r.counters.preemptions),
    running: ranks.map((r) => r.running),
    waiting: ranks.map((r) => r.waiting),
    kvUsage: ranks.map((r) => r.kvUsage),
    prefixQueries: sum((r) => r.counters.prefixQueries),
    prefixHits: sum((r) => r.counters.prefixHits),
    hostBlocks: ranks.map((r) => r.host.blocks),
    hostLoadedBlocks: sum((r) => r.host.loaded),
    batchesPublished: publishers.reduce((n, p) => n + p.stats.batches, 0),
    batchesDropped: publishers.reduce((n, p) => n + p.stats.dropped, 0),
    replayRequests: publishers.reduce((n, p) => n + p.stats.replayRequests, 0),
    kvTransfers,
    ...(speculative
      ? {
          speculative: {
            drafts: sum((r) => r.speculative?.drafts ?? 0),
            draftTokens: sum((r) => r.speculative?.draftTokens ?? 0),
            acceptedTokens: sum((r) => (r.speculative ? acceptedTokens(r.speculative) : 0)),
          },
        }
      : {}),
    faults: [...faults],
    closed,
  };
}
