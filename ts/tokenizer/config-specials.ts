/**
 * The special tokens a `tokenizer_config.json` makes `encode` add, where transformers does not
 * take them from the `tokenizer.json`.
 *
 * transformers rebuilds a tokenizer's post-processor from its config in two cases, replacing
 * whatever template the file holds with `[BOS] text [EOS]`, each part present as the config's
 * `add_bos_token` / `add_eos_token` say:
 * - the Llama family's classes (`LlamaTokenizer`, `CodeLlamaTokenizer`, `GemmaTokenizer`, and
 *   their `Fast` names) always, with `add_bos_token` true and `add_eos_token` false by default;
 * - any other class when the config sets either key (transformers 5's `TokenizersBackend`), both
 *   false by default.
 * A flag asking for a token the config does not name is dropped, as transformers 5 drops it.
 * vLLM encodes a completion's prompt through that tokenizer, so a config whose flags disagree
 * with its file (a fine-tune that switched `add_bos_token` off, say) gives the engine other
 * tokens than the file alone: routing on the file's would shift every block and match nothing.
 * @internal
 * @module
 */

import { KvRouteError } from '../errors.js';
import { describe } from '../validate.js';

/** The ids `encode` adds around a text when asked for special tokens. */
export interface ConfigSpecials {
  bos?: number;
  eos?: number;
}

/** Classes whose post-processor transformers always rebuilds from the config. */
const LLAMA_FAMILY = new Set([
  'LlamaTokenizer',
  'LlamaTokenizerFast',
  'CodeLlamaTokenizer',
  'CodeLlamaTokenizerFast',
  'GemmaTokenizer',
  'GemmaTokenizerFast',
]);

function flag(config: Readonly<Record<string, unknown>>, key: string, fallback: boolean): boolean {
  if (!(key in config)) return fallback;
  const value = config[key];
  if (value === null) return false;
  if (typeof value !== 'boolean')
    throw new KvRouteError('ERR_INVALID_ARG', `tokenizer_config.json's ${key} must be a boolean or null, got ${describe(value)}`);
  return value;
}

/** A special token's text: a string, or an `AddedToken` object's `content`. */
function tokenText(config: Readonly<Record<string, unknown>>, key: string): string | undefined {
  const value = config[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value;
  if (typeof value === 'object' && typeof (value as { content?: unknown }).content === 'string')
    return (value as { content: string }).content;
  throw new KvRouteError('ERR_INVALID_ARG', `tokenizer_config.json's ${key} must be a string or {content}, got ${describe(value)}`);
}

function tokenId(config: Readonly<Record<string, unknown>>, key: string, tokenToId: (token: string) => number | undefined) {
  const text = tokenText(config, key);
  if (text === undefined) return undefined;
  const id = tokenToId(text);
  if (id === undefined)
    throw new KvRouteError(
      'ERR_INVALID_ARG',
      `tokenizer_config.json's ${key} ${JSON.stringify(text)} is not in the tokenizer's vocabulary`,
    );
  return id;
}

/**
 * The special tokens `config` makes `encode` add, or `undefined` when the file's own
 * post-processor stands.
 * @throws {KvRouteError} `ERR_INVALID_ARG` when a flag is not a boolean (or null), or a token it
 *   asks for is not a string (or `{content}`) the vocabulary holds.
 */
export function configSpecials(
  config: Readonly<Record<string, unknown>>,
  tokenToId: (token: string) => number | undefined,
): ConfigSpecials | undefined {
  const llama = LLAMA_FAMILY.has(String(config.tokenizer_class));
  if (!llama && !('add_bos_token' in config) && !('add_eos_token' in config)) return undefined;
  const specials: ConfigSpecials = {};
  if (flag(config, 'add_bos_token', llama)) {
    const bos = tokenId(config, 'bos_token', tokenToId);
    if (bos !== undefined) specials.bos = bos;
  }
  if (flag(config, 'add_eos_token', false)) {
    const eos = tokenId(config, 'eos_token', tokenToId);
    if (eos !== undefined) specials.eos = eos;
  }
  return specials;
}

/** `ids` with the special tokens around them. */
export function withSpecials(ids: number[], specials: ConfigSpecials): number[] {
  if (specials.bos !== undefined) ids.unshift(specials.bos);
  if (specials.eos !== undefined) ids.push(specials.eos);
  return ids;
}
