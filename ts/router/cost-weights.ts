/**
 * The prefill term's weights, from router options or a request's overrides: Dynamo's current
 * `overlap_score_credit`, `prefill_load_scale` and `shared_cache_multiplier`, and its classic
 * `overlap_score_weight`, which is the older name of the scale. Both names together are refused: Dynamo lets the old one win
 * silently, which hides a mistake in a migrated config.
 * @internal
 * @module
 */

import { KvRouteError } from '../errors.js';
import { nonNegativeNumber } from '../validate.js';
import type { PrefillWeights } from './select.js';

/** The option names the weights are read from. */
export interface WeightFields {
  overlapScoreWeight?: unknown;
  overlapScoreCredit?: unknown;
  prefillLoadScale?: unknown;
  sharedCacheMultiplier?: unknown;
}

/** Dynamo's defaults: full credit per cached block, prefill counted once, no shared-cache credit. */
export const DEFAULT_PREFILL_WEIGHTS: PrefillWeights = { credit: 1, scale: 1, shared: 0 };

/**
 * The weights `fields` give, each missing one taken from `fallback`.
 * @param prefix the fields' path in error messages (`opts`, `req.overrides`)
 * @throws {KvRouteError} `ERR_INVALID_ARG` for a negative or non-finite value, or `overlapScoreWeight` beside `prefillLoadScale`.
 */
export function prefillWeights(fields: WeightFields, prefix: string, fallback: PrefillWeights): PrefillWeights {
  if (fields.overlapScoreWeight !== undefined && fields.prefillLoadScale !== undefined)
    throw new KvRouteError(
      'ERR_INVALID_ARG',
      `${prefix}.overlapScoreWeight is the older name of prefillLoadScale: give one of them, not both`,
    );
  const scaleName = fields.overlapScoreWeight !== undefined ? 'overlapScoreWeight' : 'prefillLoadScale';
  return {
    credit: nonNegativeNumber(fields.overlapScoreCredit, `${prefix}.overlapScoreCredit`, fallback.credit),
    scale: nonNegativeNumber(fields.overlapScoreWeight ?? fields.prefillLoadScale, `${prefix}.${scaleName}`, fallback.scale),
    shared: nonNegativeNumber(fields.sharedCacheMultiplier, `${prefix}.sharedCacheMultiplier`, fallback.shared),
  };
}
