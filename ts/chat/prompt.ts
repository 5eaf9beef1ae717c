/**
 * A chat request's prompt as vLLM builds it: the request fields that decide the rendered text
 * (messages, tools, the template and its arguments), read and checked as vLLM reads them, and
 * rendered the way vLLM hands them to Hugging Face's `apply_chat_template`, in the content
 * format vLLM detects for the template (`content-format.ts`). The mock worker renders its
 * prompts with it, and `TextTokenizer.encodeChat` (the gateway's local tokenizer) uses it to get
 * the same tokens the engine will; the gateway's engine tokenizer reads the same fields and sends
 * them to `/tokenize`.
 * @internal
 * @module
 */

import { Template } from '@huggingface/jinja';
import { BadRequest } from '../mock-worker/bad-request.js';
import type { ChatRequest } from '../tokenizer/text-tokenizer.js';
import { type ContentFormat, type ContentFormatOption, detectContentFormat } from './content-format.js';
import { printLikePython, pythonPrinting } from './python-printing.js';

/** The fields of a chat request that decide its prompt, under vLLM's names (the public `ChatRequest`). */
export type ChatPrompt = ChatRequest;

/** One message as a chat template sees it (vLLM's conversation message). */
export interface TemplateMessage {
  role: string;
  /** A string in the "string" content format; OpenAI's list of parts in the "openai" one. */
  content: string | ContentPart[];
  [field: string]: unknown;
}

/** A content part in the "openai" format: a text, a media item's type, or a bare string part. */
export type ContentPart = { type: 'text'; text: string } | { type: 'image' | 'audio' | 'video' } | string;

/** Media part types and the modality vLLM shows a template for each. */
const MEDIA_PARTS: Record<string, 'image' | 'audio' | 'video'> = {
  image_url: 'image',
  input_image: 'image',
  image_embeds: 'image',
  image_pil: 'image',
  audio_url: 'audio',
  input_audio: 'audio',
  audio_embeds: 'audio',
  video_url: 'video',
};

/** Content parts whose text vLLM keeps, and the field each keeps it in. */
const TEXT_PARTS: Record<string, string> = {
  text: 'text',
  input_text: 'text',
  output_text: 'text',
  refusal: 'refusal',
  thinking: 'thinking',
};

/** A JSON object (not an array, not null). */
export function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function booleanField(b: Record<string, unknown>, key: keyof ChatPrompt): boolean | undefined {
  const v = b[key];
  if (v !== undefined && typeof v !== 'boolean') throw new BadRequest(`${key} must be a boolean`);
  return v;
}

/**
 * Reads the prompt fields of a chat request (or of vLLM's chat `/tokenize`). Only the fields
 * present are kept, so that forwarding them leaves the engine's defaults in place.
 */
export function readChatPrompt(b: Record<string, unknown>): ChatPrompt {
  const messages = b.messages;
  if (!Array.isArray(messages) || messages.length === 0) throw new BadRequest('messages must be a non-empty array');
  messages.forEach((m, i) => {
    if (!isRecord(m) || typeof m.role !== 'string') throw new BadRequest(`messages[${i}].role must be a string`);
    const c = m.content;
    if (
      !(
        c === undefined ||
        c === null ||
        typeof c === 'string' ||
        (Array.isArray(c) && c.every((p) => typeof p === 'string' || isRecord(p)))
      )
    )
      throw new BadRequest(`messages[${i}].content must be a string, a list of parts or null`);
  });
  const prompt: ChatPrompt = { messages: messages as Record<string, unknown>[] };
  if (b.tools !== undefined) {
    if (b.tools !== null && !Array.isArray(b.tools)) throw new BadRequest('tools must be a list');
    prompt.tools = b.tools;
  }
  for (const key of ['add_generation_prompt', 'continue_final_message', 'add_special_tokens'] as const) {
    const v = booleanField(b, key);
    if (v !== undefined) prompt[key] = v;
  }
  if (prompt.continue_final_message && prompt.add_generation_prompt !== false)
    throw new BadRequest('Cannot set both `continue_final_message` and `add_generation_prompt` to True.');
  if (b.chat_template !== undefined) {
    if (b.chat_template !== null && typeof b.chat_template !== 'string') throw new BadRequest('chat_template must be a string');
    prompt.chat_template = b.chat_template;
  }
  if (b.chat_template_kwargs !== undefined) {
    if (b.chat_template_kwargs !== null && !isRecord(b.chat_template_kwargs))
      throw new BadRequest('chat_template_kwargs must be an object');
    prompt.chat_template_kwargs = b.chat_template_kwargs;
  }
  return prompt;
}

/** The text of a message's content: text parts joined by newlines, other parts dropped. */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  const texts: string[] = [];
  for (const part of content) {
    if (typeof part === 'string') texts.push(part);
    else if (isRecord(part) && typeof part.type === 'string' && Object.hasOwn(TEXT_PARTS, part.type)) {
      const text = part[TEXT_PARTS[part.type]];
      if (typeof text === 'string') texts.push(text);
    }
  }
  return texts.join('\n');
}

/**
 * A message's content as OpenAI's list of parts, as vLLM gives a template in the "openai" format:
 * no content is an empty list, a string one text part; text-like parts become `{type: 'text'}`
 * (a text or refusal part without its text is skipped), media parts `{type: <modality>}`, bare
 * strings stay as they are, and anything else is dropped (as in the "string" format).
 */
function contentParts(content: unknown): ContentPart[] {
  if (content === undefined || content === null) return [];
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  if (!Array.isArray(content)) return [];
  const parts: ContentPart[] = [];
  for (const part of content) {
    if (typeof part === 'string') parts.push(part);
    else if (isRecord(part) && typeof part.type === 'string') {
      if (Object.hasOwn(TEXT_PARTS, part.type)) {
        const text = part[TEXT_PARTS[part.type]];
        if (typeof text === 'string') parts.push({ type: 'text', text });
      } else if (Object.hasOwn(MEDIA_PARTS, part.type)) parts.push({ type: MEDIA_PARTS[part.type] });
    }
  }
  return parts;
}

/** An assistant's tool calls as templates expect them: arguments parsed from their JSON text. */
function toolCalls(calls: unknown, i: number): unknown[] | undefined {
  if (calls === undefined || calls === null) return undefined;
  if (!Array.isArray(calls)) throw new BadRequest(`messages[${i}].tool_calls must be a list`);
  if (calls.length === 0) return undefined;
  return calls.map((call, j) => {
    if (!isRecord(call) || !isRecord(call.function)) throw new BadRequest(`messages[${i}].tool_calls[${j}].function must be an object`);
    const args = call.function.arguments;
    let parsed: unknown = {};
    if (typeof args === 'string' && args !== '') {
      try {
        parsed = JSON.parse(args);
      } catch {
        throw new BadRequest(`messages[${i}].tool_calls[${j}].function.arguments is not JSON`);
      }
    } else if (args !== null && typeof args === 'object') parsed = args;
    return { ...call, function: { ...call.function, arguments: parsed } };
  });
}

/** vLLM's conversation for a chat template, from checked messages (see {@link readChatPrompt}). */
export function conversation(messages: readonly Record<string, unknown>[], format: ContentFormat = 'string'): TemplateMessage[] {
  return messages.map((m, i) => {
    const role = m.role as string;
    const out: TemplateMessage = { role, content: format === 'openai' ? contentParts(m.content) : contentText(m.content) };
    if (role === 'assistant') {
      const calls = toolCalls(m.tool_calls, i);
      if (calls) out.tool_calls = calls;
      if (m.reasoning !== undefined && m.reasoning !== null) {
        out.reasoning = m.reasoning;
        out.reasoning_content = m.reasoning;
      }
    } else if (role === 'tool' && 'tool_call_id' in m) out.tool_call_id = m.tool_call_id;
    if (typeof m.name === 'string') out.name = m.name;
    if (role === 'developer') out.tools = m.tools ?? null;
    return out;
  });
}

const compiled = new Map<string, Template>();
const formats = new WeakMap<Template, ContentFormat>();

/** The content format vLLM detects for a compiled template (found when it was compiled). */
function detectedFormat(template: Template): ContentFormat {
  return formats.get(template) as ContentFormat;
}

/**
 * The text `continue_final_message` continues: the final message's content, or in the "openai"
 * format the text of its last part that has one, as transformers picks it.
 */
function finalText(message: TemplateMessage): string {
  if (typeof message.content === 'string') return message.content;
  for (let i = message.content.length - 1; i >= 0; i--) {
    const part = message.content[i];
    if (typeof part === 'object' && 'text' in part) return part.text;
  }
  throw new BadRequest('continue_final_message is set but we could not find any text to continue in the final message');
}

/**
 * A compiled template, rewritten to print values as Python's Jinja2 does (`python-printing.ts`);
 * the last few sources are kept, since requests may bring their own.
 */
export function chatTemplate(source: string): Template {
  let t = compiled.get(source);
  if (t) return t;
  try {
    t = new Template(source);
  } catch (err) {
    throw new BadRequest(`the chat template does not parse: ${(err as Error).message}`);
  }
  // Detected on the template as written: the rewrite wraps what loops go over.
  formats.set(t, detectContentFormat(t));
  printLikePython(t);
  if (compiled.size >= 8) compiled.delete(compiled.keys().next().value as string);
  compiled.set(source, t);
  return t;
}

/**
 * Renders a chat prompt as `apply_chat_template` does: the template's own variables (special
 * tokens), then `chat_template_kwargs`, then the conversation, tools and generation flags. With
 * `continue_final_message` the text ends right after the last message's content, so the model
 * continues it.
 * @param defaultTemplate the model's template, used unless the request brings `chat_template`
 * @param variables what the model's tokenizer config gives every template (`bos_token`, …)
 * @param trustRequestTemplate render a request's own `chat_template` (vLLM's `--trust-request-chat-template`)
 * @param contentFormat vLLM's `--chat-template-content-format`: `auto` detects it from the template
 */
export function renderChatPrompt(
  prompt: ChatPrompt,
  defaultTemplate: string,
  variables: Record<string, unknown> = {},
  trustRequestTemplate = false,
  contentFormat: ContentFormatOption = 'auto',
): string {
  // A template is a program: one sent by a client could loop for as long as it likes on our event
  // loop. vLLM refuses them unless started with --trust-request-chat-template; so do we.
  if (prompt.chat_template != null && !trustRequestTemplate)
    throw new BadRequest('chat_template in a request is refused: the server does not trust request chat templates');
  const template = chatTemplate(prompt.chat_template ?? defaultTemplate);
  const messages = conversation(prompt.messages, contentFormat === 'auto' ? detectedFormat(template) : contentFormat);
  const continueFinal = prompt.continue_final_message === true;
  let text: string;
  try {
    text = template.render({
      ...variables,
      ...(prompt.chat_template_kwargs ?? {}),
      messages,
      tools: prompt.tools ?? null,
      documents: null,
      add_generation_prompt: prompt.add_generation_prompt ?? true,
      continue_final_message: continueFinal,
      ...pythonPrinting,
    });
  } catch (err) {
    throw new BadRequest(`the chat template failed: ${(err as Error).message}`);
  }
  if (!continueFinal) return text;
  const last = finalText(messages[messages.length - 1]).trim();
  const at = text.lastIndexOf(last);
  if (at < 0) throw new BadRequest('continue_final_message is set but the final message does not appear in the rendered chat');
  return text.slice(0, at + last.length);
}
