/**
 * Speculative decoding (MTP, EAGLE) as Dynamo's mocker models it (`aic_nextn`,
 * `aic_nextn_accept_rates`, `aic_mtp_seed`): each decode forward verifies `draftTokens` drafted
 * tokens, and a sequence emits the token it samples plus every leading draft accepted, so a step
 * yields 1 to `draftTokens + 1` tokens. Draft `i` is accepted with probability `acceptRates[i]`
 * given that every draft before it was. Each engine rank draws from its own seeded generator;
 * `kvroute_core::replay::speculative` is the Rust twin (the same generator, the same draws in the
 * same order), so both backends sample the same bursts. Used by the replay engine and the mock
 * worker.
 * @internal
 * @module
 */

import { invalidArg } from '../errors.js';
import { SeededRandom } from '../random.js';
import { checkOptions, describe, nonNegativeInteger } from '../validate.js';

/**
 * Speculative decoding of the simulated engines (vLLM's `--speculative-config`, MTP or EAGLE).
 * @group Replay
 */
export interface SpeculativeDecoding {
  /** Draft tokens each decode step verifies (vLLM's `num_speculative_tokens`, Dynamo's `aic_nextn`): 1 to 5. */
  draftTokens: number;
  /**
   * Conditional acceptance rate of each draft, in [0, 1]: entry `i` is the chance draft `i` is
   * accepted when every draft before it was. Shorter lists end in rates of 0. Default Dynamo's
   * `[0.85, 0.3]`.
   */
  acceptRates?: number[];
  /** Seeds the draws: engine rank `i` (in fleet order) draws from `seed + i`. Default 42, as Dynamo's `aic_mtp_seed`. */
  seed?: number;
}

/**
 * Speculative decoding as checked: one acceptance rate per draft (Dynamo's defaults filled in),
 * and the seed.
 * @group Replay
 */
export interface ResolvedSpeculative {
  /** Draft tokens each decode step verifies. */
  draftTokens: number;
  /** Conditional acceptance rate of each draft: `draftTokens` of them. */
  acceptRates: number[];
  /** Rank `i` draws from `seed + i`. */
  seed: number;
}

/** The most draft tokens a step verifies (Dynamo's mocker accepts `aic_nextn` in 1..=5). */
export const MAX_DRAFT_TOKENS = 5;
/** Dynamo's default conditional acceptance rates. */
const DEFAULT_ACCEPT_RATES = [0.85, 0.3];

/**
 * Both model speculative decoding's speed-up (Dynamo's mocker refuses `aic_nextn` with a
 * `decode_speedup_ratio` other than 1 for the same reason): the message, with the options' prefix.
 */
export const SPECULATIVE_WITH_DECODE_SPEEDUP = (prefix: string) =>
  `${prefix}speculative and ${prefix}decodeSpeedup both model speculative decoding's speed-up: give one (decodeSpeedup 1 with speculative)`;

/** Checks `value` (undefined: no speculative decoding) and gives one rate per draft. */
export function checkSpeculative(value: unknown, name: string): ResolvedSpeculative | undefined {
  if (value === undefined) return undefined;
  const { draftTokens, acceptRates, seed } = checkOptions(value, name, ['draftTokens', 'acceptRates', 'seed']);
  if (typeof draftTokens !== 'number' || !Number.isInteger(draftTokens) || draftTokens < 1 || draftTokens > MAX_DRAFT_TOKENS)
    throw invalidArg(`${name}.draftTokens must be an integer in [1, ${MAX_DRAFT_TOKENS}], got ${describe(draftTokens)}`);
  const rates = acceptRates ?? DEFAULT_ACCEPT_RATES.slice(0, draftTokens);
  if (!Array.isArray(rates)) throw invalidArg(`${name}.acceptRates must be an array of numbers in [0, 1], got ${describe(rates)}`);
  if (rates.length > draftTokens)
    throw invalidArg(`${name}.acceptRates has ${rates.length} rates for ${draftTokens} draft tokens: at most one per draft`);
  rates.forEach((r, i) => {
    if (typeof r !== 'number' || !(r >= 0 && r <= 1))
      throw invalidArg(`${name}.acceptRates[${i}] must be a number in [0, 1], got ${describe(r)}`);
  });
  const checkedSeed = nonNegativeInteger(seed, `${name}.seed`, 42);
  if (checkedSeed > 0xffffffff) throw invalidArg(`${name}.seed must be below 2^32, got ${checkedSeed}`);
  const padded = [...(rates as number[])];
  while (padded.length < draftTokens) padded.push(0);
  return { draftTokens, acceptRates: padded, seed: checkedSeed };
}

/**
 * The engine's own check of resolved knobs (the replay fleets' spec), as the Rust core makes it:
 * at most {@link MAX_DRAFT_TOKENS} drafts, each with a rate in [0, 1].
 */
export function checkEngineSpeculative(spec: ResolvedSpeculative | undefined): void {
  if (!spec) return;
  const { draftTokens, acceptRates, seed } = spec;
  if (!(Number.isInteger(draftTokens) && draftTokens >= 1 && draftTokens <= MAX_DRAFT_TOKENS) || acceptRates.length !== draftTokens)
    throw invalidArg(`speculative config must have at most ${MAX_DRAFT_TOKENS} draft tokens (0: none), each with its acceptance rate`);
  if (!(Number.isInteger(seed) && seed >= 0 && seed <= 0xffffffff)) throw invalidArg('speculative seed must be below 2^32');
  const bad = acceptRates.find((r) => !(r >= 0 && r <= 1));
  if (bad !== undefined) throw invalidArg(`speculative acceptRates must be numbers in [0, 1], got ${bad}`);
}

/** The mean tokens a decode step emits: 1 plus each draft's chance that it and all before it are accepted. */
export function meanBurst(spec: ResolvedSpeculative): number {
  let mean = 1;
  let all = 1;
  for (const r of spec.acceptRates) {
    all *= r;
    mean += all;
  }
  return mean;
}

/** Drafts verified and accepted, as vLLM counts them (`vllm:spec_decode_*`). */
export interface SpeculativeStats {
  /** Decode steps that verified drafts. */
  drafts: number;
  /** Draft tokens verified (`drafts` × the draft tokens a step). */
  draftTokens: number;
  /** Drafts accepted at each position (index 0: the first draft). */
  acceptedPerPosition: number[];
}

export function emptySpeculativeStats(spec: ResolvedSpeculative): SpeculativeStats {
  return { drafts: 0, draftTokens: 0, acceptedPerPosition: spec.acceptRates.map(() => 0) };
}

/** Drafts accepted at every position. */
export function acceptedTokens(stats: SpeculativeStats): number {
  return stats.acceptedPerPosition.reduce((a, b) => a + b, 0);
}

/** One engine rank's draws. */
export class BurstSampler {
  private readonly random: SeededRandom;

  /** `stats` counts every draw (the mock worker's metrics; the replay keeps none). */
  constructor(
    private readonly spec: ResolvedSpeculative,
    rank: number,
    private readonly stats?: SpeculativeStats,
  ) {
    this.random = new SeededRandom((spec.seed + rank) >>> 0);
  }

  /** The most tokens one step can emit. */
  get maxBurst(): number {
    return this.spec.draftTokens + 1;
  }

  /** Tokens one decode step emits: the sampled one plus the drafts accepted before the first rejection. */
  burst(): number {
    let tokens = 1;
    for (const rate of this.spec.acceptRates) {
      if (this.random.next() >= rate) break;
      tokens++;
    }
    const stats = this.stats;
    if (stats) {
      stats.drafts++;
      stats.draftTokens += this.spec.draftTokens;
      for (let i = 0; i < tokens - 1; i++) stats.acceptedPerPosition[i]++;
    }
    return tokens;
  }
}
