/**
 * Where a sampled sequence ends and which of its text a client sees, as vLLM decides it: its
 * engine ends a sequence on a stop token (`stop_token_ids`) once `min_tokens` are out, and its
 * detokenizer on a stop string completed by the newest token (checked from the same point), then
 * cuts the text before the string (after it with `include_stop_str_in_output`) and leaves a stop
 * token's text out (in with that flag). Without a stop the sequence runs to `max_tokens`.
 *
 * The mock model's output is ASCII words (`output.ts`), one character per token, so positions in
 * the text are positions in the output.
 * @module
 */

import type { Sampling } from './sampling.js';

/** How one sequence ends. */
export interface SequenceEnd {
  /** Output tokens the engine generates: through the one that stopped it, or all of them. */
  generated: number;
  /** Characters of the generated text the client sees. */
  shown: number;
  /** OpenAI's `finish_reason`. */
  finishReason: 'stop' | 'length';
  /** vLLM's `stop_reason`: the stop string or stop token that ended the sequence, else null. */
  stopReason: string | number | null;
}

/**
 * How a sequence whose whole output (`max_tokens` long) would be `output` ends under `s`.
 * @param chars the output's text (one character per token)
 */
export function sequenceEnd(output: readonly number[], chars: string, s: Sampling): SequenceEnd {
  if (s.stop.length === 0 && s.stopTokenIds.length === 0)
    return { generated: output.length, shown: output.length, finishReason: 'length', stopReason: null };
  for (let i = s.minTokens; i < output.length; i++) {
    const stopToken = s.stopTokenIds.includes(output[i]);
    if (stopToken && !s.includeStopStr) return { generated: i + 1, shown: i, finishReason: 'stop', stopReason: output[i] };
    // The first stop string (in the request's order) that the newest token completes.
    const end = i + 1;
    const hit = s.stop.find((str) => end >= str.length && chars.startsWith(str, end - str.length));
    if (hit !== undefined)
      return { generated: end, shown: s.includeStopStr ? end : end - hit.length, finishReason: 'stop', stopReason: hit };
    if (stopToken) return { generated: end, shown: end, finishReason: 'stop', stopReason: output[i] };
  }
  return { generated: output.length, shown: output.length, finishReason: 'length', stopReason: null };
}

/**
 * The text streamed with each generated token, as vLLM's detokenizer releases it: while stop
 * strings may still match, it holds back the longest one's length less one character, and
 * releases the rest (the cut text) with the last token.
 */
export class StreamedText {
  private released = 0;
  private readonly holdBack: number;

  constructor(
    private readonly text: string,
    private readonly end: SequenceEnd,
    s: Sampling,
  ) {
    this.holdBack = s.stop.length > 0 && !s.includeStopStr ? Math.max(...s.stop.map((str) => str.length)) - 1 : 0;
  }

  /** The text released with generated token `i` (0-based, in order). */
  next(i: number): string {
    const last = i === this.end.generated - 1;
    const upTo = last ? this.end.shown : Math.min(i + 1 - this.holdBack, this.end.shown);
    if (upTo <= this.released) return '';
    const delta = this.text.slice(this.released, upTo);
    this.released = upTo;
    return delta;
  }
}
