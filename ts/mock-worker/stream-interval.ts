/**
 * When a streamed sequence sends a chunk, as vLLM and SGLang decide it with `--stream-interval`:
 * the first token at once, then each time `interval` more are generated, and the last with what
 * is left. Interval 1 is a chunk per token.
 * @module
 */

/**
 * Whether the sequence sends a chunk now, having generated `made` tokens of `total`, `sent` of
 * them already streamed.
 */
export function chunkDue(made: number, sent: number, total: number, interval: number): boolean {
  return sent === 0 || made - sent >= interval || made === total;
}
