/**
 * `TextTokenizer`: a model's `tokenizer.json`, text to token ids, so a service that embeds the
 * router can route on the tokens an engine will see without asking the engine. The native
 * backend runs Hugging Face's Rust `tokenizers` (the library behind vLLM's and SGLang's fast
 * tokenizers), long texts on libuv's thread pool; the pure-JS backend runs tokenizers.js on the
 * calling thread. `kvroute serve`'s local tokenizer is one of these.
 * @module
 */

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { resolveBackend } from '../backend.js';
import type { BackendName, TextTokenizerBackend } from '../backend-types.js';
import { KvRouteError } from '../errors.js';
import { checkOptions, describe } from '../validate.js';
import { type ConfigSpecials, configSpecials, withSpecials } from './config-specials.js';

/**
 * Options of {@link TextTokenizer}.
 * @group Tokenizer
 */
export interface TextTokenizerOptions {
  /** The backend that encodes (default: the process default, see `backend`). */
  backend?: BackendName;
  /**
   * The model's `tokenizer_config.json`, parsed; `fromFile` reads it from beside the
   * `tokenizer.json`. Default `{}`. Its `add_bos_token` and `add_eos_token` decide the special
   * tokens `encode` adds where transformers lets them (see {@link TextTokenizer}); tokenizers.js
   * (the JS backend) also reads a few of its keys.
   */
  config?: Record<string, unknown>;
}

/**
 * Options of {@link TextTokenizer.encode}.
 * @group Tokenizer
 */
export interface EncodeOptions {
  /**
   * Run the tokenizer's post-processor, which adds a model's special tokens (a BOS token, say),
   * as transformers' `encode` does by default. Default `true`; a chat prompt rendered by its
   * template already holds them, so encode it with `false`, as vLLM does.
   */
  addSpecialTokens?: boolean;
}

function readText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new KvRouteError('ERR_INVALID_ARG', `cannot load the tokenizer ${file}: ${(err as Error).message}`, { cause: err });
  }
}

/** The JSON object in the file `name` beside `path`; `undefined` when there is none. */
function readJsonBeside(path: string, name: string): Record<string, unknown> | undefined {
  const file = join(dirname(path), name);
  if (!existsSync(file)) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(readText(file));
  } catch (err) {
    if (err instanceof KvRouteError) throw err;
    throw new KvRouteError('ERR_INVALID_ARG', `cannot load the tokenizer ${file}: ${(err as Error).message}`, { cause: err });
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new KvRouteError('ERR_INVALID_ARG', `cannot load the tokenizer ${file}: not a JSON object`);
  return value as Record<string, unknown>;
}

/**
 * A model's tokenizer. Truncation and padding settings in the file are ignored: the engine sees
 * the whole prompt, so routing must too.
 *
 * The special tokens `encode` adds are the ones vLLM's tokenizer adds, which transformers does not
 * always take from the file: for the Llama family's classes (`tokenizer_class` `LlamaTokenizer`,
 * `CodeLlamaTokenizer`, `GemmaTokenizer`, with or without `Fast`), and for any class whose config
 * sets `add_bos_token` or `add_eos_token`, the file's post-processor gives way to the config's
 * BOS token (if `add_bos_token`, which defaults to true for that family and false otherwise) and
 * EOS token (if `add_eos_token`, default false).
 * @group Tokenizer
 */
export class TextTokenizer {
  /** The backend that encodes. */
  readonly backend: BackendName;
  /** The `tokenizer_config.json` it was given (`{}` when none; from `fromFile`, with the special tokens of `special_tokens_map.json` it lacks). */
  readonly config: Readonly<Record<string, unknown>>;
  readonly #inner: TextTokenizerBackend;
  /** The special tokens the config adds in place of the file's post-processor, if it does. */
  readonly #specials: ConfigSpecials | undefined;

  /**
   * Reads `tokenizer.json` at `path` and the `tokenizer_config.json` beside it, if any, with the
   * special tokens of a `special_tokens_map.json` beside it filled in where the config names none
   * (absent or null: older models keep their BOS and EOS tokens only there; transformers reads both).
   * @throws {KvRouteError} `ERR_INVALID_ARG` when a file cannot be read or parsed, or is not a
   *   tokenizer the backend reads; `ERR_NATIVE_UNAVAILABLE` for `backend: 'native'` without it.
   */
  static fromFile(path: string, options: Omit<TextTokenizerOptions, 'config'> = {}): TextTokenizer {
    if (typeof path !== 'string' || path.length === 0)
      throw new KvRouteError('ERR_INVALID_ARG', `path must be a non-empty string, got ${describe(path)}`);
    checkOptions(options, 'options', ['backend']);
    const config = readJsonBeside(path, 'tokenizer_config.json') ?? {};
    for (const [key, value] of Object.entries(readJsonBeside(path, 'special_tokens_map.json') ?? {}))
      if (config[key] === undefined || config[key] === null) config[key] = value;
    const json = readText(path);
    try {
      return new TextTokenizer(json, { ...options, config });
    } catch (err) {
      if (err instanceof KvRouteError && err.code === 'ERR_INVALID_ARG')
        throw new KvRouteError(err.code, `${path}: ${err.message}`, { cause: err });
      throw err;
    }
  }

  /**
   * A tokenizer from the text of a `tokenizer.json`.
   * @throws {KvRouteError} `ERR_INVALID_ARG` when `json` is not a tokenizer the backend reads or
   *   an option is invalid; `ERR_NATIVE_UNAVAILABLE` for `backend: 'native'` without it.
   */
  constructor(json: string, options: TextTokenizerOptions = {}) {
    const o = checkOptions(options, 'options', ['backend', 'config']);
    if (typeof json !== 'string')
      throw new KvRouteError('ERR_INVALID_ARG', `json must be the text of a tokenizer.json, got ${describe(json)}`);
    const config = o.config ?? {};
    if (config === null || typeof config !== 'object' || Array.isArray(config))
      throw new KvRouteError('ERR_INVALID_ARG', `options.config must be an object, got ${describe(config)}`);
    const backend = resolveBackend(o.backend, 'options.backend');
    this.backend = backend.name;
    this.config = config as Record<string, unknown>;
    this.#inner = backend.createTextTokenizer(json, this.config);
    this.#specials = configSpecials(this.config, (token) => this.#inner.tokenToId(token));
  }

  /**
   * The token ids of `text`.
   * @throws {KvRouteError} `ERR_INVALID_ARG` when `text` is not a string, an option is invalid,
   *   or the model cannot encode the text (a model without an unknown token meeting a character
   *   outside its vocabulary).
   */
  async encode(text: string, options: EncodeOptions = {}): Promise<number[]> {
    const o = checkOptions(options, 'options', ['addSpecialTokens']);
    if (typeof text !== 'string') throw new KvRouteError('ERR_INVALID_ARG', `text must be a string, got ${describe(text)}`);
    const add = o.addSpecialTokens ?? true;
    if (typeof add !== 'boolean')
      throw new KvRouteError('ERR_INVALID_ARG', `options.addSpecialTokens must be a boolean, got ${describe(add)}`);
    if (this.#specials === undefined) return this.#inner.encode(text, add);
    const ids = await this.#inner.encode(text, false);
    return add ? withSpecials(ids, this.#specials) : ids;
  }
}
