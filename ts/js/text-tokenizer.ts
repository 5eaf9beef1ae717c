/**
 * The pure-JS backend's tokenizer: Hugging Face's tokenizers.js, which reads the same
 * `tokenizer.json` as the native backend's Rust `tokenizers` (a differential test compares
 * their ids). It encodes on the calling thread.
 * @internal
 * @module
 */

import { Tokenizer } from '@huggingface/tokenizers';
import type { TextTokenizerBackend } from '../backend-types.js';
import { KvRouteError } from '../errors.js';
import { checkTokenizerFile } from './tokenizer-file-checks.js';

/** ES2024's string methods, which Node 20 has and the ES2023 library types lack. */
interface WellFormedString {
  isWellFormed(): boolean;
  toWellFormed(): string;
}

/**
 * `text` with each lone surrogate as U+FFFD, as the native backend receives it (Node-API passes
 * strings as UTF-8): tokenizers.js would give a byte-fallback model the bytes of U+FFFD instead
 * of its own `�` token.
 */
function wellFormed(text: string): string {
  const t = text as unknown as WellFormedString;
  return t.isWellFormed() ? text : t.toWellFormed();
}

/**
 * Config keys of transformers' slow (Python) tokenizers that tokenizers.js applies to the text
 * before the file's normalizer: vLLM's fast tokenizer, like the native backend, reads the file
 * alone and ignores them, so the JS backend must not see them either.
 */
const SLOW_TOKENIZER_KEYS = ['remove_space', 'do_lowercase_and_remove_accent'];

export function jsTextTokenizer(json: string, config: Record<string, unknown>): TextTokenizerBackend {
  let tokenizer: Tokenizer;
  try {
    const file = JSON.parse(json);
    checkTokenizerFile(file);
    const fastConfig = Object.fromEntries(Object.entries(config).filter(([key]) => !SLOW_TOKENIZER_KEYS.includes(key)));
    tokenizer = new Tokenizer(file, fastConfig);
  } catch (err) {
    throw new KvRouteError('ERR_INVALID_ARG', `not a tokenizer this library reads: ${(err as Error).message}`, { cause: err });
  }
  return {
    async encode(text, addSpecialTokens) {
      let ids: number[];
      try {
        ids = tokenizer.encode(wellFormed(text), { add_special_tokens: addSpecialTokens }).ids;
      } catch (err) {
        throw new KvRouteError('ERR_INVALID_ARG', `the tokenizer cannot encode this text: ${(err as Error).message}`, { cause: err });
      }
      // tokenizers.js gives `undefined` for a word a model without an unknown token lacks, where Rust's `tokenizers` fails.
      for (const id of ids)
        if (id === undefined)
          throw new KvRouteError(
            'ERR_INVALID_ARG',
            'the tokenizer cannot encode this text: a word outside the vocabulary, and the model has no unknown token',
          );
      return ids;
    },
    tokenToId: (token) => tokenizer.token_to_id(token),
  };
}
