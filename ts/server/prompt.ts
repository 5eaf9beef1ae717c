/**
 * The part of an OpenAI request the gateway reads: the prompt (to tokenize and route), `stream`
 * and `stream_options`. Everything else goes to the worker untouched; the worker validates it.
 * @internal
 * @module
 */

import type { ChatMessage } from '../mock-worker/tokenizer.js';
import type { PromptInput } from './tokenize.js';

/** A request the gateway cannot read: answered 400 in OpenAI's error shape. */
export class BadRequest extends Error {}

export interface ReadRequest {
  input: PromptInput;
  stream: boolean;
  /** The client asked for the usage chunk of a stream. */
  clientWantsUsage: boolean;
  /** The body to forward (with `stream_options.include_usage` set on streams, to read `cached_tokens`). */
  forward: string;
}

function messages(v: unknown): ChatMessage[] {
  if (!Array.isArray(v) || v.length === 0) throw new BadRequest('messages must be a non-empty array');
  for (const [i, m] of v.entries()) {
    if (m === null || typeof m !== 'object' || typeof m.role !== 'string') throw new BadRequest(`messages[${i}].role must be a string`);
    const ok =
      typeof m.content === 'string' || (Array.isArray(m.content) && m.content.every((p: unknown) => p !== null && typeof p === 'object'));
    if (!ok) throw new BadRequest(`messages[${i}].content must be a string or a list of parts`);
  }
  return v as ChatMessage[];
}

function tokenIds(v: unknown): v is number[] {
  return Array.isArray(v) && v.length > 0 && v.every((t) => Number.isInteger(t) && t >= 0 && t < 2 ** 32);
}

export function readRequest(body: unknown, chat: boolean): ReadRequest {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new BadRequest('the body must be a JSON object');
  const b = body as Record<string, unknown>;
  let input: PromptInput;
  if (chat) input = { kind: 'chat', messages: messages(b.messages) };
  else if (typeof b.prompt === 'string' && b.prompt.length > 0) input = { kind: 'text', text: b.prompt };
  else if (tokenIds(b.prompt)) input = { kind: 'ids', ids: b.prompt };
  else if (Array.isArray(b.prompt) && b.prompt.length > 1)
    throw new BadRequest('send one prompt per request (batched prompts are not routed)');
  else throw new BadRequest('prompt must be a non-empty string or a non-empty list of token ids');
  if (b.stream !== undefined && typeof b.stream !== 'boolean') throw new BadRequest('stream must be a boolean');
  const stream = b.stream === true;
  const options = b.stream_options;
  if (options !== undefined && options !== null && (typeof options !== 'object' || Array.isArray(options))) {
    throw new BadRequest('stream_options must be an object');
  }
  const clientWantsUsage = (options as { include_usage?: unknown } | null | undefined)?.include_usage === true;
  const forward = stream && !clientWantsUsage ? { ...b, stream_options: { ...(options as object | null), include_usage: true } } : b;
  return { input, stream, clientWantsUsage, forward: JSON.stringify(forward) };
}
