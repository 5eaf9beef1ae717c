/**
 * Booking a routed request on the rank chosen: its own prompt and its batch's (see
 * batch-prompts.ts), each under its core handle, told to the replica peers as it lands. All or
 * nothing: a booking the core refuses (a prediction the index could not record) undoes those
 * made before it and drops the rest, so a failed route leaves no load behind.
 * @internal
 * @module
 */

import type { RouterCoreBackend } from '../backend-types.js';
import type { ReplicaLink } from './replica-link.js';

/** One prompt's booking: its handle, its uncached tokens on the rank, its full blocks. */
export interface PromptBooking {
  handle: number;
  prefillTokens: number;
  blocks: number;
}

/** Where and how: the rank, whether blocks are tracked, the clock, and the predictions' end (if any). */
export interface BookingPlace {
  workerId: bigint;
  dpRank: number;
  trackActiveBlocks: boolean;
  now: number;
  predictUntil: number | undefined;
}

/**
 * Books every prompt on the rank, in order; on a failure every handle is released (the booked
 * freed, the rest discarded) and the error thrown.
 */
export function bookAll(
  core: RouterCoreBackend,
  replicas: ReplicaLink | undefined,
  prompts: readonly PromptBooking[],
  at: BookingPlace,
): void {
  let booked = 0;
  try {
    for (const b of prompts) {
      core.book(b.handle, at.workerId, at.dpRank, b.prefillTokens, at.trackActiveBlocks, at.now, at.predictUntil);
      booked++;
      replicas?.booked(b.handle, at.workerId, at.dpRank, b.prefillTokens, at.trackActiveBlocks ? b.blocks : 0);
    }
  } catch (err) {
    for (const [k, b] of prompts.entries()) {
      if (k >= booked) core.discard(b.handle);
      else {
        core.free(b.handle);
        replicas?.freed(b.handle);
      }
    }
    throw err;
  }
}
