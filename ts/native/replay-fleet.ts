/**
 * The native replay fleet: `NativeReplayFleet` behind the `ReplayFleetBackend` interface.
 * @internal
 * @module
 */

import type { ReplayFleetBackend, ReplayFleetSpec, ReplayRankRole } from '../backend-types.js';
import { callNative, KvRouteError } from '../errors.js';
import type { NativeBinding } from './binding.js';
import { rawIndexes } from './index.js';

/** The binding's numbers for the ranks' roles. */
const ROLE_NUMBERS: Record<ReplayRankRole, number> = { aggregated: 0, prefill: 1, decode: 2 };

export function nativeReplayFleet(binding: NativeBinding, spec: ReplayFleetSpec): ReplayFleetBackend {
  const engine = Float64Array.of(
    spec.blockSize,
    spec.numGpuBlocks,
    spec.maxNumSeqs,
    spec.maxNumBatchedTokens,
    spec.speedup,
    spec.hostBlocks,
    spec.hostLoadMsPerBlock,
    spec.decodeSpeedup,
  );
  const s = spec.speculative;
  // Draft tokens (0: none), the seed, one rate per draft.
  const speculative = s ? Float64Array.of(s.draftTokens, s.seed, ...s.acceptRates) : Float64Array.of(0, 0);
  const fleet = callNative(
    () =>
      new binding.NativeReplayFleet(
        engine,
        speculative,
        spec.timing,
        spec.preemptionMode,
        Float64Array.from(spec.workers),
        Uint32Array.from(spec.dpRanks),
        Uint32Array.from(spec.workers, (_, i) => ROLE_NUMBERS[spec.roles?.[i] ?? 'aggregated']),
        spec.requests,
        spec.publishEvents,
      ),
  );
  if (spec.handoff) {
    const { fixedMs, msPerToken, destinationMissing = false } = spec.handoff;
    callNative(() => fleet.setHandoffDelay(fixedMs, msPerToken, destinationMissing));
  }
  for (const index of spec.indexes) {
    const raw = rawIndexes.get(index);
    if (!raw) throw new KvRouteError('ERR_INTERNAL', 'a native replay fleet needs native indexes');
    fleet.attachIndex(raw);
  }
  return {
    load: (at, uids) => callNative(() => fleet.load(at, uids)),
    setNextTurn: (prev, next, delayMs) => callNative(() => fleet.setNextTurn(prev, next, delayMs)),
    addRequest: (uid, inputLength, outputLength, seqs, locals) =>
      callNative(() => fleet.addRequest(uid, inputLength, outputLength, seqs, locals)),
    enqueue: (rank, uid) => callNative(() => fleet.enqueue(rank, uid)),
    run: (header) => callNative(() => fleet.run(header)),
    syncIndexes: () => callNative(() => fleet.syncIndexes()),
    firstTokens: (rank) => fleet.firstTokens(rank),
    finished: (rank) => fleet.finished(rank),
    upperBoundHitRatio: () => fleet.upperBoundHitRatio(),
    outcomes: () => fleet.outcomes(),
    tokenGaps: () => fleet.tokenGaps(),
    hostLoadedBlocks: () => fleet.hostLoadedBlocks(),
    speculativeSteps: () => {
      const [steps, tokens] = fleet.speculativeSteps();
      return [steps, tokens];
    },
  };
}
