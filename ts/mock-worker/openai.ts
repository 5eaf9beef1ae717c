/**
 * OpenAI-compatible request parsing and response shapes of the mock worker, as vLLM serves them:
 * completions and chat completions, streamed as SSE chunks ending in `[DONE]` or whole, with
 * `usage.prompt_tokens_details.cached_tokens` (what the prefix cache served).
 * @module
 */

import { contentText, isRecord, readChatPrompt, renderChatPrompt } from '../chat/prompt.js';
import { isTokenId } from '../validate.js';
import { BadRequest, NotFound } from './bad-request.js';
import { type KvTransfer, readKvTransfer } from './kv-transfer.js';
import type { LoraAdapters } from './lora-adapters.js';
import type { ResolvedMockOptions } from './options.js';
import type { LoraRef } from './rank.js';
import { checkSamplingSchema, readSampling, type Sampling } from './sampling.js';
import type { ChoiceOut, StreamDelta } from './sequence.js';
import type { SequenceEnd } from './stop.js';
import { MOCK_CHAT_TEMPLATE, tokenize } from './tokenizer.js';

export { BadRequest } from './bad-request.js';

export interface ParsedRequest {
  chat: boolean;
  /** The prompts' tokens: one, or a completion's batch of several. */
  prompts: number[][];
  maxTokens: number;
  stream: boolean;
  includeUsage: boolean;
  /** vLLM's `continuous_usage_stats` (with `include_usage`): every chunk carries its sequence's usage so far. */
  continuousUsage: boolean;
  /** The model answered for: the served model, or the LoRA adapter the request named. */
  model: string;
  /** The LoRA adapter the request runs under. */
  lora: LoraRef | undefined;
  /** vLLM's `cache_salt`. */
  cacheSalt: string | undefined;
  /** Sequences sampled from each prompt (`n`): one choice each. */
  n: number;
  /** Stops, logprobs, echo and seed. */
  sampling: Sampling;
  /** A completion's echo of its prompt alone (`echo` with `max_tokens` 0): one token generated, none shown. */
  echoOnly: boolean;
  /** What a chat's `echo` puts before the answer: the last message's content when it is the assistant's (else empty). */
  chatEcho: string;
  /** A leg of a disaggregated request (`kv_transfer_params`, `disaggregated_params`): a prefill's KV offered, or a decode's pulled. */
  kvTransfer: KvTransfer | undefined;
}

/** The most sequences (`n`) one request may sample from a prompt. */
export const MAX_SAMPLES = 64;
/** The most sequences (prompts × `n`) one request may run. */
export const MAX_SEQUENCES = 1024;

/** What a worker serves: its model and its LoRA adapters (each with vLLM's `lora_int_id`). */
export interface Served {
  model: string;
  adapters: LoraAdapters;
}

/**
 * The adapter a request's `model` names, if any. A name the worker does not serve is refused as
 * vLLM refuses it: 404 `NotFoundError`, in vLLM's words (an OpenAI client raises `NotFoundError`).
 */
export function requestedLora(model: unknown, served: Served): LoraRef | undefined {
  // No model (absent, null or empty) is the served one, as vLLM reads it; a non-string fails its request schema.
  if (model === undefined || model === null || model === '' || model === served.model) return undefined;
  if (typeof model !== 'string') throw new BadRequest(`model must be a string, got ${JSON.stringify(model)}`);
  const id = served.adapters.id(model);
  if (id === undefined) throw new NotFound(`The model \`${model}\` does not exist.`);
  return { name: model, id };
}

/** The most prompts one completion request may batch (the gateway routes each on its own). */
export const MAX_BATCH_PROMPTS = 256;

/**
 * A completion's `prompt` as a batch of several prompts (strings or token-id lists, each read by
 * {@link readPrompt}), or undefined for one prompt.
 * @throws {BadRequest} for more than {@link MAX_BATCH_PROMPTS}.
 */
export function promptBatch(prompt: unknown): unknown[] | undefined {
  if (!Array.isArray(prompt) || prompt.length < 2) return undefined;
  if (!prompt.every((p) => typeof p === 'string' || Array.isArray(p))) return undefined;
  if (prompt.length > MAX_BATCH_PROMPTS)
    throw new BadRequest(`a request may batch at most ${MAX_BATCH_PROMPTS} prompts, got ${prompt.length}`);
  return prompt;
}

/**
 * One prompt of a completion request: text, token ids, or a list holding one of those (an
 * OpenAI batch of one, which vLLM takes too). A batch of several is for {@link promptBatch}:
 * where one prompt is expected (`/tokenize`), it is refused.
 */
export function readPrompt(prompt: unknown, inBatch = false): string | number[] {
  if (typeof prompt === 'string' && prompt.length > 0) return prompt;
  if (Array.isArray(prompt) && prompt.length > 0) {
    if (prompt.every((t) => typeof t === 'number')) {
      const bad = prompt.findIndex((t) => !isTokenId(t));
      if (bad < 0) return prompt;
      throw new BadRequest(`prompt[${bad}] must be a token id (an integer in [0, 2^32)), got ${prompt[bad]}`);
    }
    if (!inBatch && prompt.every((p) => typeof p === 'string' || Array.isArray(p))) {
      if (prompt.length > 1) throw new BadRequest('one prompt is expected here, not a batch of several');
      return readPrompt(prompt[0], true);
    }
  }
  throw new BadRequest('prompt must be a non-empty string or a non-empty list of token ids');
}

/**
 * The mock model's tokens for a chat request's prompt fields (or a chat `/tokenize` body), read
 * and rendered as vLLM does (see `chat/prompt.ts`). The mock tokenizer has no special tokens, so
 * `add_special_tokens` is checked and changes nothing.
 */
export function chatTokens(
  b: Record<string, unknown>,
  served: Pick<ResolvedMockOptions, 'trustRequestChatTemplate' | 'chatTemplateContentFormat'>,
): number[] {
  return tokenize(
    renderChatPrompt(readChatPrompt(b), MOCK_CHAT_TEMPLATE, {}, served.trustRequestChatTemplate, served.chatTemplateContentFormat),
  );
}

/** A completion's `add_special_tokens` (vLLM's default, true, when absent: undefined). */
export function readAddSpecialTokens(b: Record<string, unknown>): boolean | undefined {
  if (b.add_special_tokens !== undefined && typeof b.add_special_tokens !== 'boolean')
    throw new BadRequest('add_special_tokens must be a boolean');
  return b.add_special_tokens;
}

/** The tokens of a completion request's prompt (or a completion `/tokenize` body); the mock tokenizer has no special tokens. */
export function completionTokens(b: Record<string, unknown>): number[] {
  readAddSpecialTokens(b);
  const given = readPrompt(b.prompt);
  return typeof given === 'string' ? tokenize(given) : given;
}

/** vLLM's prompt truncation: keep `keep` tokens, the last ones (its default side) or the first. */
export interface Truncation {
  keep: number;
  side: 'left' | 'right';
}

/**
 * A request's `truncate_prompt_tokens` (and `truncation_side`): k ≥ 1 keeps k tokens; -1 keeps
 * `maxModelLen`, when the reader knows it (undefined: it does not, nothing is cut).
 */
export function readTruncation(b: Record<string, unknown>, maxModelLen?: number): Truncation | undefined {
  const k = b.truncate_prompt_tokens;
  if (k === undefined || k === null) return undefined;
  if (typeof k !== 'number' || !Number.isSafeInteger(k) || k < -1) throw new BadRequest('truncate_prompt_tokens must be an integer ≥ -1');
  const side = b.truncation_side ?? 'left';
  if (side !== 'left' && side !== 'right') throw new BadRequest('truncation_side must be "left" or "right"');
  const keep = k === -1 ? maxModelLen : k;
  return keep === undefined || keep < 1 ? undefined : { keep, side };
}

/** The prompt the engine runs: `tokens` cut as `t` says. */
export function truncated(tokens: number[], t: Truncation | undefined): number[] {
  if (!t || tokens.length <= t.keep) return tokens;
  return t.side === 'left' ? tokens.slice(tokens.length - t.keep) : tokens.slice(0, t.keep);
}

/**
 * vLLM's `cache_salt`, when given.
 * @throws {BadRequest} for anything but a non-empty string, in vLLM's words.
 */
export function readCacheSalt(b: Record<string, unknown>): string | undefined {
  if (b.cache_salt !== undefined && (typeof b.cache_salt !== 'string' || b.cache_salt === ''))
    throw new BadRequest("Parameter 'cache_salt' must be a non-empty string if provided.");
  return b.cache_salt as string | undefined;
}

/**
 * Checks that a prompt and its output fit the model's context and one rank's KV blocks.
 * @param tooLong the refusal's text when the context is exceeded (vLLM words it per endpoint)
 */
export function checkFits(
  promptTokens: number,
  maxTokens: number,
  o: { maxModelLen: number; blockSize: number; numGpuBlocks: number },
  tooLong: string,
): void {
  if (promptTokens + maxTokens > o.maxModelLen) throw new BadRequest(tooLong);
  if (Math.ceil((promptTokens + maxTokens) / o.blockSize) > o.numGpuBlocks)
    throw new BadRequest(`the request needs more KV blocks than one rank has (${o.numGpuBlocks})`);
}

export function parseRequest(
  body: unknown,
  chat: boolean,
  served: Served & Pick<ResolvedMockOptions, 'trustRequestChatTemplate' | 'chatTemplateContentFormat' | 'maxModelLen'>,
): ParsedRequest {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new BadRequest('the body must be a JSON object');
  const b = body as Record<string, unknown>;
  // vLLM's request schema comes first, then the model, then the prompt, then the sampling ranges.
  checkSamplingSchema(b, chat);
  if (chat) checkToolChoice(b);
  if (b.stream !== undefined && b.stream !== null && typeof b.stream !== 'boolean')
    throw new BadRequest('stream must be a boolean', 'stream');
  const lora = requestedLora(b.model, served);
  // vLLM declares a completion's `suffix` (fill-in-the-middle) and refuses it once the model is known.
  if (!chat && b.suffix !== undefined && b.suffix !== null) throw new BadRequest('suffix is not currently supported');
  const truncation = readTruncation(b, served.maxModelLen);
  const batch = chat ? undefined : promptBatch(b.prompt);
  const prompts = (batch ?? [b.prompt]).map((prompt, i) => {
    const where = batch ? `prompt[${i}]: ` : '';
    let tokens: number[];
    try {
      tokens = truncated(chat ? chatTokens(b, served) : completionTokens({ ...b, prompt }), truncation);
    } catch (err) {
      throw err instanceof BadRequest ? new BadRequest(`${where}${err.message}`, err.param) : err;
    }
    if (tokens.length === 0) throw new BadRequest(`${where}the prompt is empty`);
    return tokens;
  });
  // A chat's `max_completion_tokens` wins over its deprecated `max_tokens`; a completion has only the latter.
  const asked = ((chat ? (b.max_completion_tokens ?? b.max_tokens) : b.max_tokens) ?? 16) as number;
  const echoOnly = !chat && b.echo === true && asked === 0;
  const n = (b.n ?? 1) as number;
  const sampling = readSampling(b, chat, echoOnly ? 1 : asked, n, MAX_SAMPLES);
  // vLLM's engine (V1) samples `n` sequences but no longer keeps `best_of` candidates to pick from.
  if (b.best_of !== undefined && b.best_of !== null && b.best_of !== n) throw new BadRequest('best_of is not supported: use n');
  if (prompts.length * n > MAX_SEQUENCES)
    throw new BadRequest(`a request may run at most ${MAX_SEQUENCES} sequences (prompts × n), got ${prompts.length * n}`);
  const cacheSalt = readCacheSalt(b);
  const options = b.stream_options as { include_usage?: unknown; continuous_usage_stats?: unknown } | undefined;
  const kvTransfer = readKvTransfer(b);
  // TensorRT-LLM's context-only request generates its first token alone.
  const contextOnly = kvTransfer?.kind === 'offer' && kvTransfer.via === 'disaggregated_params';
  return {
    chat,
    prompts,
    maxTokens: echoOnly || contextOnly ? 1 : asked,
    stream: b.stream === true,
    includeUsage: options?.include_usage === true,
    continuousUsage: options?.include_usage === true && options.continuous_usage_stats === true,
    model: lora?.name ?? served.model,
    lora,
    cacheSalt,
    n,
    sampling,
    echoOnly,
    chatEcho: chat && sampling.echo ? assistantContent(b.messages) : '',
    kvTransfer,
  };
}

/** The content of the last message when it is the assistant's (its text, as the template gets it), else empty: what a chat's echo repeats. */
function assistantContent(messages: unknown): string {
  const last = Array.isArray(messages) ? (messages.at(-1) as { role?: unknown; content?: unknown } | undefined) : undefined;
  return last?.role === 'assistant' ? contentText(last.content) : '';
}

/** How vLLM's chat schema tells a correct named `tool_choice`. */
const NAMED_TOOL_CHOICE = 'Correct usage: `{"type": "function", "function": {"name": "my_function"}}`';

/**
 * A chat's `tool_choice` against its `tools`, as vLLM's request schema checks it (given tools
 * and no choice mean "auto"; "none" needs nothing): a choice needs tools, is "auto", "required"
 * or a named function, and a named function must be one of the tools.
 * @throws {BadRequest} in vLLM's words.
 */
function checkToolChoice(b: Record<string, unknown>): void {
  const choice = b.tool_choice;
  if (choice === undefined || choice === null || choice === 'none') return;
  if (b.tools === undefined || b.tools === null) throw new BadRequest('When using `tool_choice`, `tools` must be set.');
  if (choice === 'auto' || choice === 'required') return;
  if (!isRecord(choice))
    throw new BadRequest(
      `Invalid value for \`tool_choice\`: ${String(choice)}! Only named tools, "none", "auto" or "required" are supported.`,
    );
  const fn = choice.function;
  if (!isRecord(fn))
    throw new BadRequest(`Invalid value for \`function\`: \`${JSON.stringify(fn ?? null)}\` in \`tool_choice\`! ${NAMED_TOOL_CHOICE}`);
  if (!('name' in fn)) throw new BadRequest(`Expected field \`name\` in \`function\` in \`tool_choice\`! ${NAMED_TOOL_CHOICE}`);
  const name = fn.name;
  if (typeof name !== 'string' || name === '')
    throw new BadRequest(`Invalid \`name\` in \`function\`: \`${String(name)}\` in \`tool_choice\`! ${NAMED_TOOL_CHOICE}`);
  const tools = Array.isArray(b.tools) ? (b.tools as { function?: { name?: unknown } }[]) : [];
  if (!tools.some((t) => t?.function?.name === name))
    throw new BadRequest('The tool specified in `tool_choice` does not match any of the specified `tools`');
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

export function usage(prompt: number, completion: number, cached: number): Usage {
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: cached },
  };
}

/** With continuous usage stats, a sequence's own counts so far (vLLM's per-choice numbers). */
function runningUsage(req: ParsedRequest, soFar: { prompt: number; completion: number }): { usage?: unknown } {
  if (!req.continuousUsage) return {};
  return { usage: { prompt_tokens: soFar.prompt, total_tokens: soFar.prompt + soFar.completion, completion_tokens: soFar.completion } };
}

/**
 * What vLLM streams for each chat choice before its tokens, when the first output arrives: the
 * role (with the prompt's ids, when asked for), then the assistant message an `echo` continues.
 * Completions have none: their first chunk carries the first tokens.
 */
export function chatOpening(req: ParsedRequest, id: string, created: number, index: number, prompt: readonly number[]): unknown[] {
  const head = { id, object: 'chat.completion.chunk', created, model: req.model };
  const usage = runningUsage(req, { prompt: prompt.length, completion: 0 });
  const promptIds = req.sampling.returnTokenIds ? { prompt_token_ids: prompt } : {};
  const role = { index, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null };
  const out: unknown[] = [{ ...head, choices: [role], ...usage, ...promptIds }];
  if (req.chatEcho !== '')
    out.push({ ...head, choices: [{ index, delta: { content: req.chatEcho }, logprobs: null, finish_reason: null }], ...usage });
  return out;
}

/**
 * A streamed chunk of sequence `index`: its tokens' text and logprobs (`delta`), and on its last
 * token how the sequence ended (`end`: `finish_reason` and vLLM's `stop_reason`). `soFar` counts
 * the sequence's prompt and output up to this chunk.
 */
export function chunk(
  req: ParsedRequest,
  id: string,
  created: number,
  index: number,
  delta: StreamDelta,
  end: SequenceEnd | undefined,
  soFar: { prompt: number; completion: number },
): unknown {
  // vLLM's field order: the text (a chat's delta), logprobs, then how the sequence ended.
  const rest = { logprobs: delta.logprobs, finish_reason: end?.finishReason ?? null, stop_reason: end?.stopReason ?? null };
  const usage = runningUsage(req, soFar);
  // With return_token_ids: the chunk's token ids, and a completion's prompt ids on its first chunk.
  const ids = delta.tokenIds;
  const tokenIds = ids ? { token_ids: ids.output } : {};
  if (req.chat) {
    const choice = { index, delta: { content: delta.text }, ...rest, ...tokenIds };
    return { id, object: 'chat.completion.chunk', created, model: req.model, choices: [choice], ...usage };
  }
  const promptIds = ids?.prompt ? { prompt_token_ids: ids.prompt } : {};
  const choice = { index, text: delta.text, ...rest, ...promptIds, ...tokenIds };
  return { id, object: 'text_completion', created, model: req.model, choices: [choice], ...usage };
}

export function usageChunk(req: ParsedRequest, id: string, created: number, u: Usage): unknown {
  return { id, object: req.chat ? 'chat.completion.chunk' : 'text_completion', created, model: req.model, choices: [], usage: u };
}

/** The whole (non-streamed) response: one choice per sampled sequence. */
export function fullResponse(req: ParsedRequest, id: string, created: number, choices: readonly ChoiceOut[], u: Usage): unknown {
  // With return_token_ids, vLLM adds each choice's output ids, and its prompt's: a completion's in
  // the choice, a chat's (one prompt) in the response.
  const finish = (c: ChoiceOut) => ({
    finish_reason: c.end.finishReason,
    stop_reason: c.end.stopReason,
    ...(c.tokenIds ? { token_ids: c.tokenIds.output } : {}),
  });
  if (req.chat) {
    const promptIds = choices[0]?.tokenIds ? { prompt_token_ids: choices[0].tokenIds.prompt } : {};
    return {
      id,
      object: 'chat.completion',
      created,
      model: req.model,
      choices: choices.map((c, index) => ({ index, message: { role: 'assistant', content: c.text }, logprobs: c.logprobs, ...finish(c) })),
      usage: u,
      ...promptIds,
    };
  }
  return {
    id,
    object: 'text_completion',
    created,
    model: req.model,
    choices: choices.map((c, index) => ({
      index,
      text: c.text,
      logprobs: c.logprobs,
      ...finish(c),
      ...(c.tokenIds ? { prompt_token_ids: c.tokenIds.prompt } : {}),
    })),
    usage: u,
  };
}

/** vLLM's error body (nested under `error` since vLLM 0.10; flat before), naming the field at fault when known. */
export function errorBody(message: string, code: number, param: string | null = null): unknown {
  const type = code === 400 ? 'BadRequestError' : code === 404 ? 'NotFoundError' : 'ServiceUnavailableError';
  return { error: { message, type, param, code } };
}
