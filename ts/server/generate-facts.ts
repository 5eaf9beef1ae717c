/**
 * What the gateway measures in SGLang's `/generate` answers, which carry no OpenAI `usage`: every
 * answer and every streamed event holds the request's `meta_info` (`prompt_tokens`,
 * `completion_tokens` so far, `cached_tokens`, and `finish_reason`, `null` until the last event).
 * With `n` above 1 an answer is a list, one per sequence, and each event names its sequence by
 * `index`; the cached tokens are read from the first sequence's, as a completion's usage counts
 * the prompt once. With SGLang's protocol a decode worker's answer lacks the prompt's log
 * probabilities, which its prefill worker computed: they are put back in front of its own, as
 * SGLang's load balancer does ({@link withPrefillInputLogprobs}).
 * @internal
 * @module
 */

import type { EventFacts } from './sse.js';

interface MetaInfo {
  input_token_logprobs?: unknown;
  prompt_tokens?: unknown;
  completion_tokens?: unknown;
  cached_tokens?: unknown;
  finish_reason?: unknown;
}

/** A `/generate` answer or event: `meta_info` beside the text. */
export interface GenerateChunk {
  meta_info?: MetaInfo | null;
  index?: unknown;
  error?: unknown;
}

const count = (v: unknown) => (typeof v === 'number' ? v : undefined);

/** Whether a parsed event or answer is `/generate`'s (it has `meta_info`, and no OpenAI `choices`). */
export function isGenerateChunk(chunk: Record<string, unknown>): boolean {
  return chunk.meta_info !== null && typeof chunk.meta_info === 'object' && chunk.choices === undefined;
}

/**
 * A streamed `/generate` event's facts: tokens when its sequence has generated some; the cached
 * tokens from its last event (the request's end), of the first sequence only.
 */
export function generateEventFacts(chunk: GenerateChunk & Record<string, unknown>): EventFacts {
  const meta = chunk.meta_info ?? {};
  const completion = count(meta.completion_tokens);
  const index = chunk.index;
  const first = index === undefined || index === 0;
  const last = meta.finish_reason !== null && meta.finish_reason !== undefined;
  return {
    token: completion !== undefined && completion > 0,
    usageOnly: false,
    cachedTokens: last && first ? count(meta.cached_tokens) : undefined,
    promptTokens: count(meta.prompt_tokens),
    completionTokens: completion,
    choice: Number.isSafeInteger(index) ? (index as number) : undefined,
    chunkUsage: false,
    chunk,
    done: false,
    error: chunk.error !== undefined,
  };
}

/** The cached tokens a whole `/generate` answer reports (a list's first sequence's), when it holds a number. */
export function generateAnswerCachedTokens(answer: unknown): number | undefined {
  const one = (Array.isArray(answer) ? answer[0] : answer) as GenerateChunk | null | undefined;
  return one !== null && typeof one === 'object' ? count(one.meta_info?.cached_tokens) : undefined;
}

/** A prefill worker's `meta_info.input_token_logprobs`, when its answer holds that list. */
export function inputLogprobsOf(answer: unknown): unknown[] | undefined {
  if (answer === null || typeof answer !== 'object' || Array.isArray(answer)) return undefined;
  const logprobs = (answer as GenerateChunk).meta_info?.input_token_logprobs;
  return Array.isArray(logprobs) ? logprobs : undefined;
}

/**
 * A decode worker's `/generate` answer or event with the prefill worker's prompt log probabilities
 * in front of its own; `undefined` when it holds no `input_token_logprobs` list to extend.
 */
export function withPrefillInputLogprobs(chunk: unknown, prefill: readonly unknown[]): Record<string, unknown> | undefined {
  const own = inputLogprobsOf(chunk);
  if (own === undefined) return undefined;
  const c = chunk as Record<string, unknown> & { meta_info: Record<string, unknown> };
  return { ...c, meta_info: { ...c.meta_info, input_token_logprobs: [...prefill, ...own] } };
}
