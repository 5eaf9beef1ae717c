/**
 * OpenAI-compatible request parsing and response shapes of the mock worker, as vLLM serves them:
 * completions and chat completions, streamed as SSE chunks ending in `[DONE]` or whole, with
 * `usage.prompt_tokens_details.cached_tokens` (what the prefix cache served).
 * @module
 */

import { isTokenId } from '../validate.js';
import { type ChatMessage, renderChat, tokenize } from './tokenizer.js';

/** A request error answered with status 400 and vLLM's error body. */
export class BadRequest extends Error {}

export interface ParsedRequest {
  chat: boolean;
  prompt: number[];
  maxTokens: number;
  stream: boolean;
  includeUsage: boolean;
  model: string;
}

/**
 * The one prompt of a completion request: text, token ids, or a list holding one of those (an
 * OpenAI batch of one, which vLLM takes too). A batch of several is refused: the gateway would
 * need a route per prompt, and the mock worker answers one choice per request.
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
      if (prompt.length > 1) throw new BadRequest('send one prompt per request (batched prompts are not supported)');
      return readPrompt(prompt[0], true);
    }
  }
  throw new BadRequest('prompt must be a non-empty string or a non-empty list of token ids');
}

export function checkMessages(v: unknown): ChatMessage[] {
  if (!Array.isArray(v) || v.length === 0) throw new BadRequest('messages must be a non-empty array');
  return v.map((m, i) => {
    if (m === null || typeof m !== 'object' || typeof m.role !== 'string') throw new BadRequest(`messages[${i}].role must be a string`);
    const ok =
      typeof m.content === 'string' || (Array.isArray(m.content) && m.content.every((p: unknown) => p !== null && typeof p === 'object'));
    if (!ok) throw new BadRequest(`messages[${i}].content must be a string or a list of parts`);
    return { role: m.role, content: m.content };
  });
}

export function parseRequest(body: unknown, chat: boolean, servedModel: string): ParsedRequest {
  if (body === null || typeof body !== 'object') throw new BadRequest('the body must be a JSON object');
  const b = body as Record<string, unknown>;
  let prompt: number[];
  if (chat) prompt = tokenize(renderChat(checkMessages(b.messages), true));
  else {
    const given = readPrompt(b.prompt);
    prompt = typeof given === 'string' ? tokenize(given) : given;
  }
  if (prompt.length === 0) throw new BadRequest('the prompt is empty');
  const maxTokens = b.max_tokens ?? b.max_completion_tokens ?? 16;
  if (!Number.isInteger(maxTokens) || (maxTokens as number) < 1) throw new BadRequest('max_tokens must be a positive integer');
  if (b.stream !== undefined && typeof b.stream !== 'boolean') throw new BadRequest('stream must be a boolean');
  if (b.model !== undefined && b.model !== servedModel)
    throw new BadRequest(`the model \`${String(b.model)}\` does not exist (this worker serves ${servedModel})`);
  const options = b.stream_options as { include_usage?: unknown } | undefined;
  return {
    chat,
    prompt,
    maxTokens: maxTokens as number,
    stream: b.stream === true,
    includeUsage: options?.include_usage === true,
    model: servedModel,
  };
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

/** One streamed chunk's JSON. */
export function chunk(
  req: ParsedRequest,
  id: string,
  created: number,
  text: string | undefined,
  finish: string | null,
  first: boolean,
): unknown {
  if (req.chat) {
    const delta = text === undefined ? {} : first ? { role: 'assistant', content: text } : { content: text };
    return {
      id,
      object: 'chat.completion.chunk',
      created,
      model: req.model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    };
  }
  return {
    id,
    object: 'text_completion',
    created,
    model: req.model,
    choices: [{ index: 0, text: text ?? '', logprobs: null, finish_reason: finish, stop_reason: null }],
  };
}

export function usageChunk(req: ParsedRequest, id: string, created: number, u: Usage): unknown {
  return { id, object: req.chat ? 'chat.completion.chunk' : 'text_completion', created, model: req.model, choices: [], usage: u };
}

/** The whole (non-streamed) response. */
export function fullResponse(req: ParsedRequest, id: string, created: number, text: string, u: Usage): unknown {
  if (req.chat) {
    return {
      id,
      object: 'chat.completion',
      created,
      model: req.model,
      choices: [{ index: 0, message: { role: 'assistant', content: text }, logprobs: null, finish_reason: 'length' }],
      usage: u,
    };
  }
  return {
    id,
    object: 'text_completion',
    created,
    model: req.model,
    choices: [{ index: 0, text, logprobs: null, finish_reason: 'length', stop_reason: null }],
    usage: u,
  };
}

/** vLLM's error body. */
export function errorBody(message: string, code: number): unknown {
  return { object: 'error', message, type: code === 400 ? 'BadRequestError' : 'ServiceUnavailableError', param: null, code };
}
