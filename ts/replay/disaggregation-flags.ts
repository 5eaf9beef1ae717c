/**
 * `kvroute replay`'s flags for a disaggregated fleet (`--prefill-workers`, `--decode-workers`,
 * `--handoff-ms`, `--transfer-us-per-token`, `--transfer-timing`), read into {@link ReplayDisaggregation} and checked
 * with the flags' own names in the errors.
 * @internal
 * @module
 */

import { asFlagError, type Flags, UsageError } from '../cli-args.js';
import { checkDisaggregation, type ReplayDisaggregation, type ReplayTransferTiming } from './disaggregation.js';

export const DISAGGREGATION_FLAGS: Flags = {
  'prefill-workers': {
    kind: 'number',
    help: 'a disaggregated fleet: workers of the prefill pool (with --decode-workers, in place of --workers)',
  },
  'decode-workers': { kind: 'number', help: 'a disaggregated fleet: workers of the decode pool' },
  'handoff-ms': { kind: 'number', help: "a disaggregated fleet: each KV handoff's fixed delay, ms", default: '0' },
  'transfer-us-per-token': {
    kind: 'number',
    help: "a disaggregated fleet: KV transfer time per prompt token, µs (KV bytes per token / the link's bandwidth)",
    default: '0',
  },
  'transfer-timing': {
    kind: 'string',
    help: 'a disaggregated fleet: which prompt tokens the transfer time counts: full-prompt, or destination-missing (those the decode worker lacks)',
    default: 'full-prompt',
  },
};

/** The option names as the flags spell them. */
const FLAG_NAMES: Array<[RegExp, string]> = [
  [/\bdisaggregation\.prefillWorkers\b/g, '--prefill-workers'],
  [/\bdisaggregation\.decodeWorkers\b/g, '--decode-workers'],
  [/\bdisaggregation\.handoffMs\b/g, '--handoff-ms'],
  [/\bdisaggregation\.transferUsPerToken\b/g, '--transfer-us-per-token'],
  [/\bdisaggregation\.transferTiming\b/g, '--transfer-timing'],
];

/** `{ disaggregation }` from the flags, or `{}` when neither pool is given. */
export function disaggregationFromFlags(v: Record<string, unknown>, usage: string): { disaggregation?: ReplayDisaggregation } {
  const prefillWorkers = v['prefill-workers'] as number | undefined;
  const decodeWorkers = v['decode-workers'] as number | undefined;
  const handoffMs = v['handoff-ms'] as number | undefined;
  const transferUsPerToken = v['transfer-us-per-token'] as number | undefined;
  const transferTiming = v['transfer-timing'] as ReplayTransferTiming | undefined;
  if (prefillWorkers === undefined && decodeWorkers === undefined) {
    if (handoffMs !== undefined || transferUsPerToken !== undefined || transferTiming !== undefined)
      throw new UsageError(
        '--handoff-ms, --transfer-us-per-token and --transfer-timing need --prefill-workers and --decode-workers',
        usage,
      );
    return {};
  }
  if (prefillWorkers === undefined || decodeWorkers === undefined)
    throw new UsageError('a disaggregated fleet needs both --prefill-workers and --decode-workers', usage);
  if (v.workers !== undefined)
    throw new UsageError('--workers and --prefill-workers/--decode-workers exclude each other (the pools are the fleet)', usage);
  const disaggregation: ReplayDisaggregation = {
    prefillWorkers,
    decodeWorkers,
    ...(handoffMs !== undefined ? { handoffMs } : {}),
    ...(transferUsPerToken !== undefined ? { transferUsPerToken } : {}),
    ...(transferTiming !== undefined ? { transferTiming } : {}),
  };
  try {
    checkDisaggregation(disaggregation);
  } catch (err) {
    asFlagError(err, FLAG_NAMES, usage);
  }
  return { disaggregation };
}
