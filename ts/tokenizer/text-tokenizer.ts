/**
 * `TextTokenizer`: a model's `tokenizer.json`, text to token ids, so a service that embeds the
 * router can route on the tokens an engine will see without asking the engine. The native
 * backend runs Hugging Face's Rust `tokenizers` (the library behind vLLM's and SGLang's fast
 * tokenizers), long texts on libuv's thread pool; the pure-JS backend runs tokenizers.js on the
 * calling thread. `kvroute serve`'s local tokenizer is one of these.
 * @module
 */

import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { resolveBackend } from '../backend.js';
import type { BackendName, TextTokenizerBackend } from '../backend-types.js';
import { readChatPrompt, renderChatPrompt } from '../chat/prompt.js';
import { KvRouteError } from '../errors.js';
import { BadRequest } from '../mock-worker/bad-request.js';
import { checkOptions, describe, nonNegativeInteger } from '../validate.js';
import {
  type ChatTemplates,
  chooseChatTemplate,
  compileTemplates,
  configTemplates,
  loadChatTemplates,
  templateVariables,
} from './chat-templates.js';
import { type ConfigSpecials, configSpecials, withSpecials } from './config-specials.js';
import type { TokenizerPrefixCacheStats } from './prefix-cache.js';
import { PrefixEncoder } from './prefix-encoder.js';

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
  /**
   * A chat template (Jinja) for {@link TextTokenizer.encodeChat} instead of the model's (vLLM's
   * `--chat-template`). Default: the model's, from the config (and, with `fromFile`, from
   * `chat_template.jinja` and `additional_chat_templates/` beside the file, as transformers reads them).
   */
  chatTemplate?: string;
  /**
   * vLLM's `--chat-template-content-format`: templates get OpenAI's list of content parts
   * (`openai`) or the parts' text joined (`string`). Default `auto`, detected from the template
   * as vLLM does (a template that loops over a message's content gets the list).
   */
  chatTemplateContentFormat?: 'auto' | 'string' | 'openai';
  /**
   * vLLM's `--trust-request-chat-template`: render a request's own `chat_template` (a template
   * is a program, run on the calling thread). Default false: such requests are refused.
   */
  trustRequestChatTemplate?: boolean;
  /**
   * Keep the token ids of text prefixes that end at a special token (`<|im_end|>`, say), so that
   * encoding a conversation's next turn encodes only what it adds (see {@link TextTokenizer}).
   * Default `{ maxBytes: 0 }`: off.
   */
  prefixCache?: TokenizerPrefixCacheOptions;
}

/**
 * Options of {@link TextTokenizerOptions.prefixCache}.
 * @group Tokenizer
 */
export interface TokenizerPrefixCacheOptions {
  /** Bytes the cache may hold, least recently used out first (counted as V8 holds them: about 500 for a piece of 15 characters); 0: off. */
  maxBytes: number;
}

/**
 * A chat request's fields that decide its prompt, under vLLM's (OpenAI's) names; other fields
 * of a chat completion request are ignored.
 * @group Tokenizer
 */
export interface ChatRequest {
  /** The conversation: `role`, `content` (a string, a list of parts or null), and `tool_calls`, `tool_call_id`, `name`, `reasoning`. */
  messages: Record<string, unknown>[];
  /** Tools offered, as the request's `tools`; they choose a model's `tool_use` template. */
  tools?: unknown[] | null;
  /** Default true. */
  add_generation_prompt?: boolean;
  /** End the text right after the last message's content, so the model continues it. Default false. */
  continue_final_message?: boolean;
  /** Run the tokenizer's post-processor on the rendered text. Default false (the template places them). */
  add_special_tokens?: boolean;
  /** The request's own template (only with `trustRequestChatTemplate`). */
  chat_template?: string | null;
  /** Variables for the template (`enable_thinking`, say). */
  chat_template_kwargs?: Record<string, unknown> | null;
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

/** `path` itself, or the `tokenizer.json` of the model directory it names. */
function tokenizerFile(path: string): string {
  if (!existsSync(path) || !statSync(path).isDirectory()) return path;
  const file = join(path, 'tokenizer.json');
  if (!existsSync(file))
    throw new KvRouteError(
      'ERR_INVALID_ARG',
      `${path} holds no tokenizer.json (a model with only tokenizer.model or tiktoken files needs one: transformers' save_pretrained writes it)`,
    );
  return file;
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

/** The prefix cache's byte bound from the options, checked (0: off). */
function prefixCacheBytes(option: unknown): number {
  if (option === undefined) return 0;
  const { maxBytes } = checkOptions(option, 'options.prefixCache', ['maxBytes']);
  // Required: an empty object turning the cache on at some size would be a guess.
  if (maxBytes === undefined)
    throw new KvRouteError('ERR_INVALID_ARG', 'options.prefixCache.maxBytes must be a non-negative integer, got undefined');
  return nonNegativeInteger(maxBytes, 'options.prefixCache.maxBytes', 0);
}

/** The chat options of {@link TextTokenizerOptions}, checked. */
function chatOptions(o: TextTokenizerOptions) {
  const override = o.chatTemplate;
  if (override !== undefined && typeof override !== 'string')
    throw new KvRouteError('ERR_INVALID_ARG', `options.chatTemplate must be a string, got ${describe(override)}`);
  const format = o.chatTemplateContentFormat ?? 'auto';
  if (format !== 'auto' && format !== 'string' && format !== 'openai')
    throw new KvRouteError(
      'ERR_INVALID_ARG',
      `options.chatTemplateContentFormat must be 'auto', 'string' or 'openai', got ${describe(format)}`,
    );
  const trust = o.trustRequestChatTemplate ?? false;
  if (typeof trust !== 'boolean')
    throw new KvRouteError('ERR_INVALID_ARG', `options.trustRequestChatTemplate must be a boolean, got ${describe(trust)}`);
  return { override, format, trust };
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
 *
 * With `prefixCache`, the ids of text prefixes that end at a special token are kept, and a text
 * that starts with a kept prefix encodes only the rest: a chat template puts special tokens
 * around every message, so a conversation's next turn encodes the messages it adds. The ids are
 * the same as without the cache. A special token qualifies when the tokenizer splits texts at
 * it before anything else reads them: an added token matched on the raw text (`normalized`
 * false), with no `lstrip`, `rstrip` or `single_word`, whose text no other added token
 * contains, and not the model's unknown token; a text's pieces are cached only when its ids hold those tokens where its text does.
 * @group Tokenizer
 */
export class TextTokenizer {
  /** The backend that encodes. */
  readonly backend: BackendName;
  /** The `tokenizer_config.json` it was given (`{}` when none; from `fromFile`, with the special tokens of `special_tokens_map.json` it lacks). */
  readonly config: Readonly<Record<string, unknown>>;
  readonly #inner: TextTokenizerBackend;
  /** The prefix cache, when on. */
  readonly #prefix: PrefixEncoder | undefined;
  /** The special tokens the config adds in place of the file's post-processor, if it does. */
  readonly #specials: ConfigSpecials | undefined;
  /** The model's chat templates; `fromFile` adds those of the files beside it. */
  #templates: ChatTemplates;
  readonly #chat: {
    override: string | undefined;
    format: 'auto' | 'string' | 'openai';
    trust: boolean;
    variables: Record<string, unknown>;
  };
  #where = 'the tokenizer';

  /**
   * Reads the `tokenizer.json` at `file` (or in the model directory `file` names) and the
   * `tokenizer_config.json` beside it, if any, with the
   * special tokens of a `special_tokens_map.json` beside it filled in where the config names none
   * (absent or null: older models keep their BOS and EOS tokens only there; transformers reads both).
   * @throws {KvRouteError} `ERR_INVALID_ARG` when a file cannot be read or parsed, or is not a
   *   tokenizer the backend reads; `ERR_NATIVE_UNAVAILABLE` for `backend: 'native'` without it.
   */
  static fromFile(file: string, options: Omit<TextTokenizerOptions, 'config'> = {}): TextTokenizer {
    if (typeof file !== 'string' || file.length === 0)
      throw new KvRouteError('ERR_INVALID_ARG', `path must be a non-empty string, got ${describe(file)}`);
    checkOptions(options, 'options', ['backend', 'chatTemplate', 'chatTemplateContentFormat', 'trustRequestChatTemplate', 'prefixCache']);
    const path = tokenizerFile(file);
    const config = readJsonBeside(path, 'tokenizer_config.json') ?? {};
    for (const [key, value] of Object.entries(readJsonBeside(path, 'special_tokens_map.json') ?? {}))
      if (config[key] === undefined || config[key] === null) config[key] = value;
    const json = readText(path);
    try {
      const tokenizer = new TextTokenizer(json, { ...options, config });
      tokenizer.#where = path;
      // The gateway's own template wins over the model's (vLLM's --chat-template): those are then not read.
      if (options.chatTemplate === undefined) tokenizer.#templates = loadChatTemplates(path, config);
      return tokenizer;
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
    const o = checkOptions(options, 'options', [
      'backend',
      'config',
      'chatTemplate',
      'chatTemplateContentFormat',
      'trustRequestChatTemplate',
      'prefixCache',
    ]);
    if (typeof json !== 'string')
      throw new KvRouteError('ERR_INVALID_ARG', `json must be the text of a tokenizer.json, got ${describe(json)}`);
    const config = o.config ?? {};
    if (config === null || typeof config !== 'object' || Array.isArray(config))
      throw new KvRouteError('ERR_INVALID_ARG', `options.config must be an object, got ${describe(config)}`);
    const backend = resolveBackend(o.backend, 'options.backend');
    this.backend = backend.name;
    this.config = config as Record<string, unknown>;
    this.#inner = backend.createTextTokenizer(json, this.config);
    const cacheBytes = prefixCacheBytes(o.prefixCache);
    // Only the cache reads the file itself (its added tokens): parsing megabytes is skipped without it.
    if (cacheBytes > 0) this.#prefix = new PrefixEncoder(this.#inner, JSON.parse(json), cacheBytes);
    this.#specials = configSpecials(this.config, (token) => this.#inner.tokenToId(token));
    this.#chat = { ...chatOptions(o), variables: templateVariables(this.config) };
    if (this.#chat.override !== undefined) compileTemplates(this.#chat.override, 'options.chatTemplate');
    this.#templates = this.#chat.override === undefined ? configTemplates(this.config.chat_template) : undefined;
    compileTemplates(this.#templates, 'the config');
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
    return this.#encode(text, add);
  }

  async #encode(text: string, add: boolean): Promise<number[]> {
    const prefix = this.#prefix;
    if (this.#specials === undefined) {
      if (prefix === undefined) return this.#inner.encode(text, add);
      return add ? prefix.encodeWithSpecials(text) : prefix.encode(text);
    }
    const ids = await (prefix === undefined ? this.#inner.encode(text, false) : prefix.encode(text));
    return add ? withSpecials(ids, this.#specials) : ids;
  }

  /** What the prefix cache did and holds (the `prefixCache` option); `undefined` when it is off. */
  prefixCacheStats(): TokenizerPrefixCacheStats | undefined {
    return this.#prefix?.stats();
  }

  /**
   * The prompt text vLLM renders for a chat request: the model's template (or the one chosen
   * for it: `tool_use` for a request with `tools` where the model has one), the config's special
   * tokens as variables, the content format vLLM detects, tool-call arguments parsed from JSON.
   * @throws {KvRouteError} `ERR_INVALID_ARG` when the request's fields are malformed, the model
   *   has no template for it, a request's own template is not trusted, or the template fails.
   */
  applyChatTemplate(request: ChatRequest): string {
    try {
      const chat = readChatPrompt(request as unknown as Record<string, unknown>);
      const template = chooseChatTemplate(chat, this.#templates, this.#chat.override, this.#where);
      return renderChatPrompt(chat, template, this.#chat.variables, this.#chat.trust, this.#chat.format);
    } catch (err) {
      if (err instanceof BadRequest) throw new KvRouteError('ERR_INVALID_ARG', err.message);
      throw err;
    }
  }

  /**
   * The token ids vLLM's engine sees for a chat request: {@link applyChatTemplate}, then
   * `encode` with the request's `add_special_tokens` (default false: the template places them).
   * @throws {KvRouteError} `ERR_INVALID_ARG` as {@link applyChatTemplate}, or when the model
   *   cannot encode the text.
   */
  async encodeChat(request: ChatRequest): Promise<number[]> {
    if (request === null || typeof request !== 'object' || Array.isArray(request))
      throw new KvRouteError('ERR_INVALID_ARG', `request must be an object, got ${describe(request)}`);
    const text = this.applyChatTemplate(request);
    return this.#encode(text, request.add_special_tokens ?? false);
  }
}
