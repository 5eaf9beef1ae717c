/**
 * How the replay engine times a pass: Dynamo's mocker polynomials and the two ways kvroute feeds
 * them (the twin of `kvroute_core::replay::timing`).
 * @internal
 * @module
 */

/**
 * How an engine pass is timed. Both use Dynamo's mocker polynomials, `prefillMs(t)` and
 * `decodeMs(p)`; they differ in what is fed to them:
 * - `'dynamo'` (Dynamo 1.6's mocker): the prefill polynomial once, on the pass's total new
 *   tokens; a decode step only when some sequence on the rank is decoding (has produced a token
 *   before this pass), with `p` = the decoding sequences' lengths in blocks, summed (a shared
 *   prefix counts once per sequence, as attention cost does), over the rank's GPU blocks (with
 *   speculative decoding, a sequence's first step after its prefill is a decode step too). The
 *   simulation also releases all arrivals of one timestamp before the next pass starts.
 * - `'classic'` (kvroute before 0.2): one prefill polynomial per request chunk, summed; a decode
 *   step in every pass with sequences in decode, `p` = unique blocks in use over GPU blocks;
 *   a pass may start at the first of several same-timestamp arrivals.
 * @group Replay
 */
export type TimingModel = 'dynamo' | 'classic';

/** Prefill time of one chunk of `t` new tokens (ms), Dynamo's polynomial. */
export function prefillMs(t: number): number {
  return t > 0 ? 4.209989e-7 * t * t + 0.01518344 * t + 16.50142 : 0;
}

/** One decode step (ms) with fraction `p` of the KV blocks in use, Dynamo's polynomial. */
export function decodeMs(p: number): number {
  const x = Math.min(1, p);
  return Math.max(1, -25.74 * x * x + 54.01 * x + 5.74);
}
