/**
 * The native backend's tokenizer: Hugging Face's Rust `tokenizers` behind the binding. A long
 * text is encoded on libuv's thread pool, so the JavaScript thread serves other requests
 * meanwhile; a short one on the calling thread, where it costs less than the hop.
 * @internal
 * @module
 */

import type { TextTokenizerBackend } from '../backend-types.js';
import { callNative, fromCodedText } from '../errors.js';
import type { NativeBinding } from './binding.js';

/** Texts up to this many UTF-16 units are encoded on the calling thread (tens of µs). */
const SYNC_ENCODE_MAX_CHARS = 1024;

export function nativeTextTokenizer(binding: NativeBinding, json: string): TextTokenizerBackend {
  const inner = callNative(() => new binding.NativeTokenizer(json));
  return {
    async encode(text, addSpecialTokens) {
      if (text.length <= SYNC_ENCODE_MAX_CHARS) return Array.from(callNative(() => inner.encode(text, addSpecialTokens)));
      const outcome = (await inner.encodeAsync(text, addSpecialTokens)) as Uint32Array | string;
      if (typeof outcome === 'string') throw fromCodedText(outcome);
      return Array.from(outcome);
    },
    tokenToId: (token) => callNative(() => inner.tokenToId(token)) ?? undefined,
  };
}
