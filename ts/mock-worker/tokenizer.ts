/**
 * The mock worker's tokenizer: deterministic and documented so that a gateway can reproduce it.
 * A token is one byte of the text's UTF-8 encoding (ids 0-255); detokenizing decodes the bytes
 * back (ill-formed sequences become U+FFFD). Chat messages are rendered through a ChatML chat
 * template with `@huggingface/jinja`, the way vLLM applies a model's template
 * (`add_generation_prompt` true by default for chat completions), and the rendered text is then
 * tokenized. The template is exported so that a gateway can render it identically.
 * @module
 */

import { Template } from '@huggingface/jinja';
import { KvRouteError } from '../errors.js';
import { describe } from '../validate.js';

/**
 * The mock model's chat template (ChatML), as a model's `tokenizer_config.json` carries it.
 * @group Mock worker
 */
export const MOCK_CHAT_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
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
 * One chat message; `content` may be a string or OpenAI's list of parts.
 * @group Mock worker
 */
export interface ChatMessage {
  /** `system`, `user`, `assistant`, … */
  role: string;
  /** The text, or its parts. */
  content: string | ChatContentPart[];
}

const template = new Template(MOCK_CHAT_TEMPLATE);
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

function textOf(content: ChatMessage['content']): string {
  if (typeof content === 'string') return content;
  return content
    .map((part) => (part !== null && typeof part === 'object' && part.type === 'text' && typeof part.text === 'string' ? part.text : ''))
    .join('');
}

/**
 * Renders messages through {@link MOCK_CHAT_TEMPLATE}.
 * @group Mock worker
 * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument for malformed messages.
 */
export function renderChat(messages: readonly ChatMessage[], addGenerationPrompt = true): string {
  const ok =
    Array.isArray(messages) &&
    messages.every(
      (m) =>
        m !== null && typeof m === 'object' && typeof m.role === 'string' && (typeof m.content === 'string' || Array.isArray(m.content)),
    );
  if (!ok) throw new KvRouteError('ERR_INVALID_ARG', 'messages must be an array of { role: string, content: string | parts }');
  if (typeof addGenerationPrompt !== 'boolean')
    throw new KvRouteError('ERR_INVALID_ARG', `addGenerationPrompt must be a boolean, got ${describe(addGenerationPrompt)}`);
  return template.render({
    messages: messages.map((m) => ({ role: m.role, content: textOf(m.content) })),
    add_generation_prompt: addGenerationPrompt,
  });
}
