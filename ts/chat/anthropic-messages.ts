/**
 * Anthropic's Messages API request (`POST /v1/messages`, which vLLM serves beside its OpenAI
 * API) turned into the chat request vLLM renders for it: vLLM converts the request to a chat
 * completion and runs that, so a request's tokens, and the KV blocks the engine caches for it,
 * are those of the converted chat. The gateway tokenizes and routes by it; the mock worker
 * serves by it. The rules are vLLM's (`vllm/entrypoints/anthropic/serving.py`):
 * - the `system` field and any `system` messages become one system message, their text blocks
 *   joined, leaving out Claude Code's `x-anthropic-billing-header` block (a per-request hash
 *   that would defeat prefix caching);
 * - text blocks become text parts (one text part alone: the content string), images
 *   `image_url` parts, `thinking` blocks the message's `reasoning`, `tool_use` blocks its
 *   `tool_calls` (arguments as Python's `json.dumps` writes them);
 * - a user's `tool_result` becomes a `tool` message before the user's own (its images a user
 *   message after it); an assistant's a text part `Tool result: …`;
 * - tools become functions (`input_schema` as the parameters, `type: object` when it has none),
 *   and `tool_choice` `any` becomes `required`.
 * Claude Code's `ctx` and `msg` roles are read as `user`, as vLLM does.
 * @internal
 * @module
 */

import { BadRequest } from '../mock-worker/bad-request.js';
import { isRecord } from './prompt.js';
import { pythonJsonDumps, pythonStrOfJson } from './python-json.js';

/** Claude Code's attribution block, which vLLM drops from the system prompt. */
const BILLING_HEADER = 'x-anthropic-billing-header';
const ROLES = new Set(['user', 'assistant', 'system']);
const ROLE_ALIASES: Record<string, string> = { ctx: 'user', msg: 'user' };
const BLOCK_TYPES = new Set(['text', 'image', 'tool_use', 'tool_result', 'tool_reference', 'thinking', 'redacted_thinking']);

type Block = Record<string, unknown>;
type Message = { role: string; content: string | Block[] };

/** An image block's source as the URL vLLM's media loader takes: the URL, or a `data:` URI of the base64 data. */
function imageUrl(source: Record<string, unknown>): string {
  if (source.type === 'url') return typeof source.url === 'string' ? source.url : '';
  const mediaType = typeof source.media_type === 'string' ? source.media_type : 'image/jpeg';
  return `data:${mediaType};base64,${typeof source.data === 'string' ? source.data : ''}`;
}

function readMessages(value: unknown): Message[] {
  if (!Array.isArray(value)) throw new BadRequest('messages must be a list');
  return value.map((m, i) => {
    if (!isRecord(m)) throw new BadRequest(`messages[${i}] must be an object`);
    const role = typeof m.role === 'string' ? (ROLE_ALIASES[m.role] ?? m.role) : m.role;
    if (typeof role !== 'string' || !ROLES.has(role))
      throw new BadRequest(`messages[${i}].role must be one of user, assistant, system, got ${JSON.stringify(m.role)}`);
    return { role, content: readContent(m.content, `messages[${i}].content`) };
  });
}

function readContent(value: unknown, at: string): string | Block[] {
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) throw new BadRequest(`${at} must be a string or a list of content blocks`);
  value.forEach((b, j) => {
    if (!isRecord(b) || typeof b.type !== 'string' || !BLOCK_TYPES.has(b.type))
      throw new BadRequest(`${at}[${j}].type must be one of ${[...BLOCK_TYPES].join(', ')}`);
    for (const key of ['text', 'thinking', 'id', 'name', 'tool_use_id'])
      if (b[key] !== undefined && b[key] !== null && typeof b[key] !== 'string')
        throw new BadRequest(`${at}[${j}].${key} must be a string`);
    if (b.input !== undefined && b.input !== null && !isRecord(b.input)) throw new BadRequest(`${at}[${j}].input must be an object`);
    if (b.source !== undefined && b.source !== null && !isRecord(b.source)) throw new BadRequest(`${at}[${j}].source must be an object`);
  });
  return value as Block[];
}

/** The text of system blocks, as vLLM keeps it (non-empty text blocks, Claude Code's billing header left out). */
function systemTexts(content: string | Block[]): string[] {
  if (typeof content === 'string') return [content];
  return content
    .filter((b) => b.type === 'text' && typeof b.text === 'string' && b.text !== '' && !b.text.startsWith(BILLING_HEADER))
    .map((b) => b.text as string);
}

/** A user's `tool_result`: a `tool` message (and the images it returned, in a user message after it). */
function userToolResult(block: Block, out: Record<string, unknown>[]): void {
  let text = '';
  const images: string[] = [];
  const references: Record<string, unknown>[] = [];
  if (typeof block.content === 'string') text = block.content;
  else if (Array.isArray(block.content)) {
    const texts: string[] = [];
    for (const item of block.content) {
      if (!isRecord(item)) continue;
      if (item.type === 'text') texts.push(typeof item.text === 'string' ? item.text : '');
      else if (item.type === 'image') {
        const url = imageUrl(isRecord(item.source) ? item.source : {});
        if (url) images.push(url);
      } else if (item.type === 'tool_reference') {
        const name = item.tool_name || item.name;
        if (typeof name === 'string' && name) references.push({ type: 'tool_reference', name });
      }
    }
    text = texts.join('\n');
  }
  const toolCallId = typeof block.tool_use_id === 'string' ? block.tool_use_id : '';
  out.push({ role: 'tool', tool_call_id: toolCallId, content: text });
  if (images.length > 0) out.push({ role: 'user', content: images.map((url) => ({ type: 'image_url', image_url: { url } })) });
  if (references.length > 0) out.push({ role: 'tool', tool_call_id: toolCallId, content: references });
}

/** One message's blocks: content parts, tool calls and reasoning on `message`; tool results before it in `out`. */
function convertBlocks(role: string, blocks: Block[], message: Record<string, unknown>, out: Record<string, unknown>[]): void {
  const parts: Record<string, unknown>[] = [];
  const toolCalls: Record<string, unknown>[] = [];
  const reasoning: string[] = [];
  for (const b of blocks) {
    if (b.type === 'text' && b.text) parts.push({ type: 'text', text: b.text });
    else if (b.type === 'image' && isRecord(b.source)) parts.push({ type: 'image_url', image_url: { url: imageUrl(b.source) } });
    else if (b.type === 'thinking' && typeof b.thinking === 'string') reasoning.push(b.thinking);
    else if (b.type === 'tool_use')
      toolCalls.push({
        // vLLM names an id-less call after the clock; the gateway cannot know that second, so any fixed name does.
        id: b.id || 'call_0',
        type: 'function',
        function: { name: b.name || '', arguments: pythonJsonDumps(isRecord(b.input) ? b.input : {}) },
      });
    else if (b.type === 'tool_result') {
      if (role === 'user') userToolResult(b, out);
      else parts.push({ type: 'text', text: `Tool result: ${b.content ? pythonStrOfJson(b.content) : ''}` });
    }
  }
  if (reasoning.length > 0) message.reasoning = reasoning.join('');
  if (toolCalls.length > 0) message.tool_calls = toolCalls;
  if (parts.length > 0) message.content = parts.length === 1 && parts[0].type === 'text' ? parts[0].text : parts;
}

function convertTools(tools: unknown): Record<string, unknown>[] | undefined {
  if (tools === undefined || tools === null) return undefined;
  if (!Array.isArray(tools)) throw new BadRequest('tools must be a list');
  return tools.map((t, i) => {
    if (!isRecord(t) || typeof t.name !== 'string') throw new BadRequest(`tools[${i}].name must be a string`);
    if (!isRecord(t.input_schema)) throw new BadRequest(`tools[${i}].input_schema must be an object`);
    const parameters = 'type' in t.input_schema ? t.input_schema : { ...t.input_schema, type: 'object' };
    const fn: Record<string, unknown> = { name: t.name, description: t.description ?? null, parameters };
    if (t.defer_loading !== undefined && t.defer_loading !== null) fn.defer_loading = t.defer_loading;
    return { type: 'function', function: fn };
  });
}

function convertToolChoice(choice: unknown, hasTools: boolean): unknown {
  if (choice === undefined || choice === null) return hasTools ? 'auto' : undefined;
  if (!isRecord(choice)) throw new BadRequest('tool_choice must be an object');
  if (choice.type === 'auto') return 'auto';
  if (choice.type === 'any') return 'required';
  if (choice.type === 'none') return 'none';
  if (choice.type === 'tool') {
    if (typeof choice.name !== 'string' || choice.name === '') throw new BadRequest("tool_choice.name is required when type is 'tool'");
    return { type: 'function', function: { name: choice.name } };
  }
  throw new BadRequest(`tool_choice.type must be one of auto, any, tool, none, got ${JSON.stringify(choice.type)}`);
}

/**
 * The chat request vLLM runs for a Messages API request: `messages`, `tools`, `tool_choice` and
 * `chat_template_kwargs`, under OpenAI's names. Throws `BadRequest` for a request vLLM refuses
 * (no model, no `messages` list, a block of an unknown type, `max_tokens` not positive).
 */
export function anthropicToChat(b: Record<string, unknown>): Record<string, unknown> {
  if (typeof b.model !== 'string' || b.model === '') throw new BadRequest('model is required');
  if (!Number.isSafeInteger(b.max_tokens) || (b.max_tokens as number) <= 0) throw new BadRequest('max_tokens must be a positive integer');
  const messages = readMessages(b.messages);
  const out: Record<string, unknown>[] = [];
  const system: string[] = [];
  if (b.system !== undefined && b.system !== null && b.system !== '') system.push(...systemTexts(readContent(b.system, 'system')));
  for (const m of messages) if (m.role === 'system') system.push(...systemTexts(m.content));
  if (system.length > 0) out.push({ role: 'system', content: system.join('') });
  for (const m of messages) {
    if (m.role === 'system') continue;
    const message: Record<string, unknown> = { role: m.role };
    if (typeof m.content === 'string') message.content = m.content;
    else convertBlocks(m.role, m.content, message, out);
    // A user message of tool results alone is only its tool messages.
    if (!(m.role === 'user' && !('content' in message))) out.push(message);
  }
  const tools = convertTools(b.tools);
  const toolChoice = convertToolChoice(b.tool_choice, tools !== undefined);
  if (b.chat_template_kwargs !== undefined && b.chat_template_kwargs !== null && !isRecord(b.chat_template_kwargs))
    throw new BadRequest('chat_template_kwargs must be an object');
  return {
    messages: out,
    ...(tools === undefined ? {} : { tools }),
    ...(toolChoice === undefined ? {} : { tool_choice: toolChoice }),
    ...(isRecord(b.chat_template_kwargs) ? { chat_template_kwargs: b.chat_template_kwargs } : {}),
  };
}
