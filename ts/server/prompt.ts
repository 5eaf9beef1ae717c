/**
 * The part of an OpenAI request the gateway reads: the prompt and the fields that decide its
 * tokens (to tokenize and route: a chat's messages, tools and template arguments, a completion's
 * `add_special_tokens`, the model, `truncate_prompt_tokens`), what scopes its KV blocks (the
 * model, which may name a LoRA adapter, and `cache_salt`: see `scope.ts`), its `priority` in the
 * queue, `stream` and `stream_options`; for the Responses API, its instructions and input, the
 * response it continues and its id. Everything else goes to the worker untouched; the worker
 * validates it.
 * @internal
 * @module
 */

import { anthropicToChat } from '../chat/anthropic-messages.js';
import { readChatPrompt } from '../chat/prompt.js';
import {
  BadRequest,
  promptBatch,
  readAddSpecialTokens,
  readCacheSalt,
  readPrompt,
  readTruncation,
  type Truncation,
  truncated,
} from '../mock-worker/openai.js';
import { newResponseId, readResponsesPrompt, responsesMessages } from '../mock-worker/responses-input.js';
import { readGenerateRequest } from './generate-request.js';
import { positiveInteger } from './request-fields.js';
import type { PromptInput, PromptTokenizer } from './tokenize.js';

// The mock worker's reading of `prompt` and `messages` is OpenAI's; its BadRequest is answered 400 here too.
export { BadRequest } from '../mock-worker/openai.js';

export interface ReadRequest {
  /** The client's session, from its request headers (see `clientSessionId`). */
  sessionId?: string;
  input: PromptInput;
  stream: boolean;
  /** The client asked for the usage chunk of a stream. */
  clientWantsUsage: boolean;
  /**
   * The gateway changed the stream's `stream_options`: usage an engine puts in the chunks with
   * choices is then the gateway's, not the client's, and is taken out of them.
   */
  ownChunkUsage?: boolean;
  /** The body to forward (with `stream_options.include_usage` set on streams, to read `cached_tokens`; see {@link streamOptions}). */
  forward: string;
  /** The model named (a LoRA adapter's name selects the adapter). */
  model: string | undefined;
  /** vLLM's `cache_salt`. */
  cacheSalt: string | undefined;
  /** vLLM's `priority` (lower is served earlier), when an integer; the worker checks it otherwise. */
  priority: number | undefined;
  /**
   * The output length asked for (`max_tokens`; a chat's `max_completion_tokens` first; the
   * Responses API's `max_output_tokens`), when a positive integer: the router's expected output.
   */
  maxOutputTokens: number | undefined;
  /** vLLM's `truncate_prompt_tokens`: the engine caches the cut prompt, so routing must use it too. */
  truncation: Truncation | undefined;
  /**
   * A completion's batch of prompts (`prompt` a list of several): one request per prompt, each
   * routed by its own prefix (see batch.ts); the fields above are the first prompt's.
   */
  batch?: ReadRequest[];
  /**
   * An SGLang `/generate` batch, sent whole to one worker (the fields above are its first
   * prompt's): its prompt count. Never split into legs (one bootstrap room meets one prompt).
   */
  wholeBatch?: number;
  /**
   * That batch's other prompts (after the first), which the router weighs and books with it
   * (`RouteRequest.batchPrompts`) once tokenized into `batchTokens`.
   */
  batchInputs?: PromptInput[];
  /** `batchInputs` tokenized, as the router is given them. */
  batchTokens?: number[][];
  /**
   * Each of `batchInputs`' adapter, when the batch names one per prompt (SGLang's `lora_path`
   * list; undefined: none): the worker must serve them all, and each prompt's blocks are its
   * adapter's. Absent: every prompt is under `model`.
   */
  batchModels?: (string | undefined)[];
  /** Choices per prompt (`n`, 1 when absent or not a positive integer: the worker checks it). */
  choicesPerPrompt: number;
  /**
   * A Responses API response the worker may keep (`store` not false), by its id: the client's
   * `request_id`, else the one the gateway gives it (forwarded as `request_id`).
   */
  responseId?: string;
  /** The response a Responses API request continues (`previous_response_id`): it must go to that response's worker. */
  previousResponseId?: string;
  /** The API whose error shape the client reads: Anthropic's for the Messages API; OpenAI's otherwise. */
  api?: 'anthropic';
}

/**
 * The longest response id the gateway takes (`request_id`, `previous_response_id`): it remembers
 * ids, and puts them in the URLs it asks workers with, so a client must not make them huge.
 */
export const MAX_RESPONSE_ID = 512;

/** A response id field of a Responses API request, when present. */
function responseIdField(b: Record<string, unknown>, key: 'request_id' | 'previous_response_id'): string | undefined {
  const v = b[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string' || v === '') throw new BadRequest(`${key} must be a non-empty string`);
  if (v.length > MAX_RESPONSE_ID) throw new BadRequest(`${key} must be at most ${MAX_RESPONSE_ID} characters, got ${v.length}`);
  return v;
}

/** The endpoints the gateway routes: completions, chat completions, the Responses API, Anthropic's Messages API and SGLang's `/generate`. */
export type RequestKind = 'completion' | 'chat' | 'responses' | 'messages' | 'generate';

/**
 * An Anthropic Messages API request: routed by the chat vLLM converts it to (see
 * `chat/anthropic-messages.ts`), forwarded as it came. vLLM reads no `cache_salt` or `priority`
 * from it, so neither scopes or orders it here; its streams always end with their usage.
 */
function readMessagesRequest(b: Record<string, unknown>): ReadRequest {
  const chat = readChatPrompt(anthropicToChat(b));
  if (b.stream !== undefined && b.stream !== null && typeof b.stream !== 'boolean') throw new BadRequest('stream must be a boolean');
  return {
    input: { kind: 'chat', chat, model: b.model as string },
    stream: b.stream === true,
    clientWantsUsage: true,
    forward: JSON.stringify(b),
    model: b.model as string,
    cacheSalt: undefined,
    priority: undefined,
    maxOutputTokens: positiveInteger(b.max_tokens),
    truncation: undefined,
    choicesPerPrompt: 1,
    api: 'anthropic',
  };
}

/**
 * A Responses API request: its prompt, the conversation it continues, its id. The prompt the
 * gateway tokenizes is the request's own (instructions and input, as chat messages): when it
 * continues a stored response, the earlier turns live on that response's worker, where it goes
 * anyway, and the engine finds them cached there.
 */
function readResponsesRequest(b: Record<string, unknown>): ReadRequest {
  const model = typeof b.model === 'string' ? { model: b.model } : {};
  const chat = readChatPrompt({ messages: responsesMessages(readResponsesPrompt(b)) });
  if (b.stream !== undefined && b.stream !== null && typeof b.stream !== 'boolean') throw new BadRequest('stream must be a boolean');
  const previous = responseIdField(b, 'previous_response_id');
  const given = responseIdField(b, 'request_id');
  const responseId = given ?? newResponseId();
  const cacheSalt = readCacheSalt(b);
  return {
    input: { kind: 'chat', chat, ...model },
    stream: b.stream === true,
    // The stream's usage (in `response.completed`) is always the client's.
    clientWantsUsage: true,
    forward: JSON.stringify(given === undefined ? { ...b, request_id: responseId } : b),
    model: typeof b.model === 'string' ? b.model : undefined,
    cacheSalt,
    priority: Number.isSafeInteger(b.priority) ? (b.priority as number) : undefined,
    maxOutputTokens: positiveInteger(b.max_output_tokens),
    truncation: undefined,
    choicesPerPrompt: 1,
    // A response the worker will not keep has no worker to remember.
    ...(b.store === false ? {} : { responseId }),
    ...(previous === undefined ? {} : { previousResponseId: previous }),
  };
}

/**
 * The `stream_options` a stream is forwarded with, and whether the gateway changed them. The
 * gateway needs the last chunk's usage for `cached_tokens`, so it asks for `include_usage`; a
 * client's `continuous_usage_stats` without it (which vLLM ignores) is left out, since it would
 * then put usage in every chunk. When the gateway counts the output (`countOutput`: the router
 * tracks output blocks) it also asks for `continuous_usage_stats`: each chunk's running count of
 * its choice's tokens, exact where an engine sends several tokens in one chunk (speculative
 * decoding, `--stream-interval`). vLLM, SGLang and TensorRT-LLM all read both fields.
 */
export function streamOptions(
  options: Record<string, unknown>,
  countOutput: boolean,
): { forward: Record<string, unknown> | undefined; clientWantsUsage: boolean; changed: boolean } {
  const clientWantsUsage = options.include_usage === true;
  const clientWantsRunning = clientWantsUsage && options.continuous_usage_stats === true;
  if (clientWantsUsage && (clientWantsRunning || !countOutput)) return { forward: undefined, clientWantsUsage, changed: false };
  const { continuous_usage_stats: _unasked, ...kept } = options;
  const running = countOutput ? { continuous_usage_stats: true } : {};
  return { forward: { ...kept, include_usage: true, ...running }, clientWantsUsage, changed: true };
}

/**
 * Reads a completion, chat or Responses API request. `countOutput`: the gateway counts a
 * stream's output tokens (see {@link streamOptions}).
 */
export function readRequest(body: unknown, kind: RequestKind, countOutput = false): ReadRequest {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new BadRequest('the body must be a JSON object');
  const b = body as Record<string, unknown>;
  if (kind === 'responses') return readResponsesRequest(b);
  if (kind === 'messages') return readMessagesRequest(b);
  if (kind === 'generate') return readGenerateRequest(b);
  const chat = kind === 'chat';
  const batch = chat ? undefined : promptBatch(b.prompt);
  if (batch) {
    const each = batch.map((prompt, i) => {
      try {
        return readRequest({ ...b, prompt }, 'completion', countOutput);
      } catch (err) {
        if (err instanceof BadRequest) throw new BadRequest(`prompt[${i}]: ${err.message}`);
        throw err;
      }
    });
    return { ...each[0], batch: each };
  }
  // The model named goes to `/tokenize` too: vLLM tokenizes for a LoRA adapter with its tokenizer.
  const model = typeof b.model === 'string' ? { model: b.model } : {};
  let input: PromptInput;
  if (chat) input = { kind: 'chat', chat: readChatPrompt(b), ...model };
  else {
    const prompt = readPrompt(b.prompt);
    const add = readAddSpecialTokens(b);
    const addSpecialTokens = add === undefined ? {} : { addSpecialTokens: add };
    input = typeof prompt === 'string' ? { kind: 'text', text: prompt, ...addSpecialTokens, ...model } : { kind: 'ids', ids: prompt };
  }
  if (b.stream !== undefined && typeof b.stream !== 'boolean') throw new BadRequest('stream must be a boolean');
  const stream = b.stream === true;
  const options = b.stream_options;
  if (options !== undefined && options !== null && (typeof options !== 'object' || Array.isArray(options))) {
    throw new BadRequest('stream_options must be an object');
  }
  const usage = streamOptions((options ?? {}) as Record<string, unknown>, countOutput);
  const changed = stream && usage.changed;
  const forward = changed ? { ...b, stream_options: usage.forward } : b;
  const cacheSalt = readCacheSalt(b);
  return {
    input,
    stream,
    clientWantsUsage: usage.clientWantsUsage,
    ...(changed ? { ownChunkUsage: true } : {}),
    forward: JSON.stringify(forward),
    model: typeof b.model === 'string' ? b.model : undefined,
    cacheSalt,
    priority: Number.isSafeInteger(b.priority) ? (b.priority as number) : undefined,
    maxOutputTokens: positiveInteger(chat ? (b.max_completion_tokens ?? b.max_tokens) : b.max_tokens),
    truncation: readTruncation(b),
    choicesPerPrompt: positiveInteger(b.n) ?? 1,
  };
}

/**
 * The tokens the engine will run for a request read here: its prompt tokenized, then cut by
 * `truncate_prompt_tokens` as vLLM cuts it. Routing, the prediction and `/admin/explain` all use it.
 * `trace`: the trace-context headers an engine asked to tokenize receives.
 */
export async function engineTokens(tokenizer: PromptTokenizer, read: ReadRequest, trace?: Record<string, string>): Promise<number[]> {
  return truncated(await tokenizer.tokenize(read.input, trace), read.truncation);
}
