/**
 * The speculative decoding flags `kvroute replay` and `kvroute mock-worker` share
 * (`--num-speculative-tokens`, `--spec-accept-rates`, `--spec-seed`), read into
 * {@link SpeculativeDecoding} and checked with the flags' own names in the errors.
 * @internal
 * @module
 */

import { asFlagError, type Flags, UsageError } from '../cli-args.js';
import { checkSpeculative, type SpeculativeDecoding } from './speculative.js';

export const SPECULATIVE_FLAGS: Flags = {
  'num-speculative-tokens': {
    kind: 'number',
    help: "speculative decoding (MTP, EAGLE; Dynamo's aic_nextn): drafts each decode step verifies, 1-5",
  },
  'spec-accept-rates': {
    kind: 'string',
    value: 'r1,r2,…',
    help: "conditional acceptance rate of each draft (Dynamo's aic_nextn_accept_rates)",
    default: '0.85,0.3',
  },
  'spec-seed': { kind: 'number', help: "seeds the drafts' acceptance draws (rank i: seed + i)", default: '42' },
};

/** The option names as the flags spell them. */
const FLAG_NAMES: Array<[RegExp, string]> = [
  [/\bspeculative\.draftTokens\b/g, '--num-speculative-tokens'],
  [/\bspeculative\.acceptRates\b/g, '--spec-accept-rates'],
  [/\bspeculative\.seed\b/g, '--spec-seed'],
];

/** `{ speculative }` from the flags, or `{}` when `--num-speculative-tokens` is absent. */
export function speculativeFromFlags(v: Record<string, unknown>, usage: string): { speculative?: SpeculativeDecoding } {
  const draftTokens = v['num-speculative-tokens'] as number | undefined;
  const rates = v['spec-accept-rates'] as string | undefined;
  const seed = v['spec-seed'] as number | undefined;
  if (draftTokens === undefined) {
    if (rates !== undefined || seed !== undefined)
      throw new UsageError('--spec-accept-rates and --spec-seed need --num-speculative-tokens', usage);
    return {};
  }
  const decodeSpeedup = v['decode-speedup'] as number | undefined;
  if (decodeSpeedup !== undefined && decodeSpeedup !== 1)
    throw new UsageError("--num-speculative-tokens and --decode-speedup both model speculative decoding's speed-up: give one", usage);
  const speculative: SpeculativeDecoding = {
    draftTokens,
    ...(rates !== undefined ? { acceptRates: rates.split(',').map((r) => (r.trim() === '' ? Number.NaN : Number(r))) } : {}),
    ...(seed !== undefined ? { seed } : {}),
  };
  try {
    checkSpeculative(speculative, 'speculative');
  } catch (err) {
    asFlagError(err, FLAG_NAMES, usage);
  }
  return { speculative };
}
