/**
 * Prompt → token ids at the gateway, in two ways:
 * - `engine`: the worker's own `/tokenize` (vLLM's endpoint; chat template included), exact by
 *   construction, at one extra local round trip.
 * - local: the model's `tokenizer.json` through the backend's tokenizer (native: Hugging Face's
 *   Rust `tokenizers`, off the JavaScript thread for long prompts; JS: tokenizers.js) and its
 *   chat template through `@huggingface/jinja`, the way vLLM renders and encodes it (`chat/prompt.ts`: tools,
 *   tool calls, `chat_template_kwargs`, `continue_final_message`, a request's own template, the
 *   content format vLLM detects for the template or the one `chatTemplateContentFormat` sets;
 *   special tokens added for completion prompts, not for a rendered chat, whose template places
 *   them, unless the request's `add_special_tokens` says otherwise).
 * Both see the same prompt fields the engine will (see {@link tokenizeBody}), and both keep their
 * results per identical prompt fields within `tokenizeCache`. Token-id prompts skip both. The
 * local one also keeps the ids of prompt beginnings that end at a special token (`TextTokenizer`'s
 * prefix cache, `tokenizeCache.prefixMaxBytes`), so a conversation's next turn, a prompt the
 * first cache misses, encodes only what it adds.
 * @internal
 * @module
 */

import type { BackendName } from '../backend-types.js';
import type { ContentFormatOption } from '../chat/content-format.js';
import type { ChatPrompt } from '../chat/prompt.js';
import type { TokenizerPrefixCacheStats } from '../tokenizer/prefix-cache.js';
import { TextTokenizer } from '../tokenizer/text-tokenizer.js';
import { TokenCache, type TokenCacheLimits } from './token-cache.js';

/**
 * What a request asks to tokenize: a chat's prompt fields, or a completion's text (with its
 * `add_special_tokens`), under the model the request names; or token ids, which need nothing.
 */
export type PromptInput =
  | { kind: 'chat'; chat: ChatPrompt; model?: string }
  | { kind: 'text'; text: string; addSpecialTokens?: boolean; model?: string }
  | { kind: 'ids'; ids: number[] };

/**
 * Asks a worker's `/tokenize`; returns its token ids. `trace` is the request's trace context
 * for the worker (`traceparent`, `tracestate`), so an engine's spans of it join the request's trace.
 */
export type EngineTokenize = (body: Record<string, unknown>, trace?: Record<string, string>) => Promise<number[]>;

/** A tokenizer of the gateway. */
export interface PromptTokenizer {
  /** `engine` or `local`. */
  readonly kind: 'engine' | 'local';
  /** The prompt's token ids; `trace`: the trace-context headers of the request's `tokenize` step, for an engine asked. */
  tokenize(input: PromptInput, trace?: Record<string, string>): Promise<number[]>;
  /** The cache of prompts already tokenized. */
  readonly cache: TokenCache;
  /** The local tokenizer's prefix cache, when it has one. */
  prefixCacheStats?(): TokenizerPrefixCacheStats | undefined;
}

/**
 * vLLM's `/tokenize` body for a prompt: the request's own prompt fields, only those it gave, so
 * the engine applies the same defaults as to the request itself.
 */
export function tokenizeBody(input: Exclude<PromptInput, { kind: 'ids' }>): Record<string, unknown> {
  const model = input.model === undefined ? {} : { model: input.model };
  if (input.kind === 'chat') return { ...model, ...input.chat };
  return { ...model, prompt: input.text, ...(input.addSpecialTokens === undefined ? {} : { add_special_tokens: input.addSpecialTokens }) };
}

/**
 * `tokenize` behind a cache of token ids per identical prompt fields (see {@link TokenCache}):
 * clients resend the same prompts (retries, the samples of one prompt an RL rollout asks for
 * one request at a time), and each costs a `/tokenize` round trip or a local encode of the
 * whole text.
 */
function cachedTokenizer(
  kind: PromptTokenizer['kind'],
  limits: TokenCacheLimits,
  tokenize: (
    input: Exclude<PromptInput, { kind: 'ids' }>,
    body: Record<string, unknown>,
    trace: Record<string, string> | undefined,
  ) => Promise<number[]>,
): PromptTokenizer {
  const cache = new TokenCache(limits);
  return {
    kind,
    cache,
    async tokenize(input, trace) {
      if (input.kind === 'ids') return input.ids;
      const body = tokenizeBody(input);
      const key = TokenCache.key(JSON.stringify(body));
      const hit = cache.get(key);
      if (hit) return hit;
      const ids = await tokenize(input, body, trace);
      cache.set(key, ids);
      return ids;
    },
  };
}

/** The worker's `/tokenize`, cached per identical prompt fields. */
export function engineTokenizer(ask: EngineTokenize, limits: TokenCacheLimits): PromptTokenizer {
  return cachedTokenizer('engine', limits, (_input, body, trace) => ask(body, trace));
}

/** Where a local tokenizer's files are and how it renders chats (the gateway's `tokenizer` option). */
export interface LocalTokenizerOptions {
  path: string;
  chatTemplate?: string;
  trustRequestChatTemplate?: boolean;
  chatTemplateContentFormat?: ContentFormatOption;
}

/**
 * A local `tokenizer.json` and chat template, encoded by the backend's {@link TextTokenizer},
 * cached per identical prompt fields.
 */
export function localTokenizer(
  backend: BackendName | undefined,
  options: LocalTokenizerOptions,
  limits: TokenCacheLimits & { prefixMaxBytes: number },
): PromptTokenizer {
  const { path, ...chat } = options;
  const prefixCache = { maxBytes: limits.prefixMaxBytes };
  const tokenizer = TextTokenizer.fromFile(path, backend === undefined ? { ...chat, prefixCache } : { ...chat, prefixCache, backend });
  const cached = cachedTokenizer('local', limits, async (input) => {
    if (input.kind === 'text') return tokenizer.encode(input.text, { addSpecialTokens: input.addSpecialTokens ?? true });
    return tokenizer.encodeChat(input.chat);
  });
  return { ...cached, prefixCacheStats: () => tokenizer.prefixCacheStats() };
}
