/**
 * How well the index predicts one worker's cache: each answer's engine-reported `cached_tokens`
 * against the prompt tokens the router expected that worker to hold. A worker whose engine keeps
 * reporting less than predicted has an index that drifted from its cache (events lost unseen, an
 * engine restarted unheard), so the tally is kept per worker, where the gateway-wide metrics
 * would average it away.
 * @internal
 * @module
 */

/** A worker's predictions against its engine's reports since it joined. */
export interface CacheAccuracySnapshot {
  /** Answers whose engine reported exactly the predicted cached tokens. */
  exact: number;
  /** Answers whose engine reported fewer (the index claimed blocks the engine did not use). */
  over: number;
  /** Answers whose engine reported more (it held blocks the index did not know of). */
  under: number;
  /** Prompt tokens predicted cached over those answers. */
  predictedTokens: number;
  /** Prompt tokens the engine reported cached over those answers. */
  reportedTokens: number;
}

export class CacheAccuracy {
  private readonly tally: CacheAccuracySnapshot = { exact: 0, over: 0, under: 0, predictedTokens: 0, reportedTokens: 0 };

  /** Counts one answer; returns its outcome. */
  record(predicted: number, reported: number): 'exact' | 'over' | 'under' {
    const outcome = predicted === reported ? 'exact' : predicted > reported ? 'over' : 'under';
    this.tally[outcome]++;
    this.tally.predictedTokens += predicted;
    this.tally.reportedTokens += reported;
    return outcome;
  }

  snapshot(): CacheAccuracySnapshot {
    return { ...this.tally };
  }
}
