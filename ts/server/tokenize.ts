/**
 * Prompt → token ids at the gateway, in two ways:
 * - `engine`: the worker's own `/tokenize` (vLLM's endpoint; chat template included), exact by
 *   construction, at one extra local round trip; results are cached per identical prompt.
 * - local: the model's `tokenizer.json` through Hugging Face's tokenizers.js and its chat
 *   template through `@huggingface/jinja`, the way vLLM renders and encodes it (special tokens
 *   added for completion prompts, not for a rendered chat, whose template places them).
 * Token-id prompts skip both.
 * @internal
 * @module
 */

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import { KvRouteError } from '../errors.js';
import type { ChatMessage } from '../mock-worker/tokenizer.js';

/** What a request asks to tokenize. */
export type PromptInput = { kind: 'chat'; messages: ChatMessage[] } | { kind: 'text'; text: string } | { kind: 'ids'; ids: number[] };

/** Asks a worker's `/tokenize`; returns its token ids. */
export type EngineTokenize = (body: Record<string, unknown>) => Promise<number[]>;

/** A tokenizer of the gateway. */
export interface PromptTokenizer {
  /** `engine` or `local`. */
  readonly kind: 'engine' | 'local';
  /** The prompt's token ids. */
  tokenize(input: PromptInput): Promise<number[]>;
}

/** An LRU of token ids by prompt; Map keeps insertion order, so the first key is the oldest. */
class TokenCache {
  private readonly entries = new Map<string, number[]>();
  hits = 0;
  misses = 0;
  constructor(private readonly max: number) {}

  get(key: string): number[] | undefined {
    const v = this.entries.get(key);
    if (v === undefined) {
      this.misses++;
      return undefined;
    }
    this.hits++;
    this.entries.delete(key);
    this.entries.set(key, v);
    return v;
  }

  set(key: string, value: number[]): void {
    this.entries.set(key, value);
    if (this.entries.size > this.max) this.entries.delete(this.entries.keys().next().value as string);
  }
}

/** The worker's `/tokenize`, cached per identical prompt (4,096 prompts). */
export function engineTokenizer(ask: EngineTokenize, cacheSize = 4096): PromptTokenizer & { cache: TokenCache } {
  const cache = new TokenCache(cacheSize);
  return {
    kind: 'engine',
    cache,
    async tokenize(input) {
      if (input.kind === 'ids') return input.ids;
      const body = input.kind === 'chat' ? { messages: input.messages, add_generation_prompt: true } : { prompt: input.text };
      const key = JSON.stringify(body);
      const hit = cache.get(key);
      if (hit) return hit;
      const ids = await ask(body);
      cache.set(key, ids);
      return ids;
    },
  };
}

function tokenText(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (v !== null && typeof v === 'object' && typeof (v as { content?: unknown }).content === 'string')
    return (v as { content: string }).content;
  return undefined;
}

function contentText(content: ChatMessage['content']): string {
  if (typeof content === 'string') return content;
  return content.map((p) => (p.type === 'text' && typeof p.text === 'string' ? p.text : '')).join('');
}

/** A local `tokenizer.json` and chat template. */
export function localTokenizer(path: string, chatTemplate?: string): PromptTokenizer {
  const read = (file: string) => {
    try {
      return JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
    } catch (err) {
      throw new KvRouteError('ERR_INVALID_ARG', `cannot load the tokenizer ${file}: ${(err as Error).message}`, { cause: err });
    }
  };
  const json = read(path);
  const configPath = join(dirname(path), 'tokenizer_config.json');
  const config = existsSync(configPath) ? read(configPath) : {};
  let tokenizer: Tokenizer;
  try {
    tokenizer = new Tokenizer(json, config);
  } catch (err) {
    throw new KvRouteError('ERR_INVALID_ARG', `${path} is not a tokenizer this library reads: ${(err as Error).message}`, { cause: err });
  }
  const source = chatTemplate ?? (typeof config.chat_template === 'string' ? config.chat_template : undefined);
  const template = source === undefined ? undefined : new Template(source);
  const specials = { bos_token: tokenText(config.bos_token) ?? '', eos_token: tokenText(config.eos_token) ?? '' };
  return {
    kind: 'local',
    async tokenize(input) {
      if (input.kind === 'ids') return input.ids;
      if (input.kind === 'text') return tokenizer.encode(input.text).ids;
      if (!template) throw new KvRouteError('ERR_INVALID_ARG', `no chat template: ${configPath} has none and no chatTemplate was given`);
      const text = template.render({
        ...specials,
        messages: input.messages.map((m) => ({ role: m.role, content: contentText(m.content) })),
        add_generation_prompt: true,
      });
      return tokenizer.encode(text, { add_special_tokens: false }).ids;
    },
  };
}
