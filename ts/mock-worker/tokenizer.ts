/**
 * The mock worker's tokenizer: deterministic and documented so that a gateway can reproduce it.
 * A token is one byte of the text's UTF-8 encoding (ids 0-255); detokenizing decodes the bytes
 * back (ill-formed sequences become U+FFFD). Chat messages are rendered through a ChatML chat
 * template (which also renders `tools` and an assistant's `tool_calls`) with `@huggingface/jinja`,
 * the way vLLM applies a model's template (see `chat/prompt.ts`: `add_generation_prompt` true by
 * default, `continue_final_message`, `chat_template_kwargs`, a request's own `chat_template`), and
 * the rendered text is then tokenized. The template is exported so that a gateway can render it identically.
 * @module
 */

import { readChatPrompt, renderChatPrompt } from '../chat/prompt.js';
import { KvRouteError } from '../errors.js';
import { describe } from '../validate.js';
import { BadRequest } from './bad-request.js';

/**
 * The mock model's chat template (ChatML), as a model's `tokenizer_config.json` carries it.
 * @group Mock worker
 */
export const MOCK_CHAT_TEMPLATE =
  "{% if tools %}{{ '<|im_start|>system\\n# Tools\\n' }}{% for tool in tools %}{{ tool | tojson + '\\n' }}{% endfor %}{{ '<|im_end|>\\n' }}{% endif %}" +
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] }}" +
  "{% if message.tool_calls %}{% for call in message.tool_calls %}{{ '\\n<tool_call>' + call.function.name + ' ' + (call.function.arguments | tojson) + '</tool_call>' }}{% endfor %}{% endif %}" +
  "{{ '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/**
 * One part of a message's content in OpenAI's list form; only `text` parts carry text.
 * @group Mock worker
 */
export interface ChatContentPart {
  /** `text`, `image_url`, … */
  type: string;
  /** The text of a `text` part. */
  text?: string;
}

/**
 * One tool call of an assistant message, in OpenAI's form.
 * @group Mock worker
 */
export interface ChatToolCall {
  /** The call's id, which the `tool` message answering it repeats. */
  id?: string;
  /** `function`. */
  type?: string;
  /** The function called. */
  function: {
    /** Its name. */
    name: string;
    /** Its arguments: JSON text, as OpenAI sends them (or an object). */
    arguments?: string | Record<string, unknown>;
  };
}

/**
 * One chat message in OpenAI's form; `content` may be a string, OpenAI's list of parts, or null
 * (an assistant message that only calls tools).
 * @group Mock worker
 */
export interface ChatMessage {
  /** `system`, `user`, `assistant`, `tool`, `developer`, … */
  role: string;
  /** The text, or its parts (text parts are joined by newlines, as vLLM joins them). */
  content?: string | ChatContentPart[] | null;
  /** An assistant's tool calls. */
  tool_calls?: ChatToolCall[] | null;
  /** The call a `tool` message answers. */
  tool_call_id?: string;
  /** The participant's name. */
  name?: string;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Text → token ids (UTF-8 bytes).
 * @group Mock worker
 * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument for a non-string.
 */
export function tokenize(text: string): number[] {
  if (typeof text !== 'string') throw new KvRouteError('ERR_INVALID_ARG', `text must be a string, got ${describe(text)}`);
  return Array.from(encoder.encode(text));
}

/**
 * Token ids → text. Ids above 255 are not produced by this tokenizer and render as U+FFFD.
 * @group Mock worker
 * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument for anything but non-negative integers.
 */
export function detokenize(tokens: readonly number[]): string {
  if (!Array.isArray(tokens) || !tokens.every((t) => Number.isInteger(t) && t >= 0))
    throw new KvRouteError('ERR_INVALID_ARG', `tokens must be an array of non-negative integers, got ${describe(tokens)}`);
  if (tokens.some((t) => t > 255)) return tokens.map((t) => (t > 255 ? '\uFFFD' : decoder.decode(Uint8Array.of(t)))).join('');
  return decoder.decode(Uint8Array.from(tokens));
}

/**
 * Renders messages through {@link MOCK_CHAT_TEMPLATE}, as the mock worker renders a chat request
 * with these messages (vLLM's reading: `content` may also be null, text parts are joined by
 * newlines, an assistant's `tool_calls` are rendered with their arguments parsed).
 * @group Mock worker
 * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument for malformed messages.
 */
export function renderChat(messages: readonly ChatMessage[], addGenerationPrompt = true): string {
  if (typeof addGenerationPrompt !== 'boolean')
    throw new KvRouteError('ERR_INVALID_ARG', `addGenerationPrompt must be a boolean, got ${describe(addGenerationPrompt)}`);
  try {
    return renderChatPrompt(readChatPrompt({ messages, add_generation_prompt: addGenerationPrompt }), MOCK_CHAT_TEMPLATE);
  } catch (err) {
    if (err instanceof BadRequest) throw new KvRouteError('ERR_INVALID_ARG', err.message);
    throw err;
  }
}
