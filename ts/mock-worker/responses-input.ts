/**
 * The Responses API's prompt as vLLM builds it for a chat template: `instructions` as a system
 * message, then (when the request continues a stored response) that response's conversation and
 * its answer, then `input`: a string is one user message, a list is the conversation's items. The
 * mock worker renders the result as a chat, and the gateway tokenizes it to route a request by
 * the KV blocks its prompt will reuse (a stateless agent resends its whole history each turn).
 *
 * Items become chat messages: a message item (`role` and `content`, its parts `input_text` /
 * `output_text` read as text) as it is, a `function_call` as an assistant message with that tool
 * call, a `function_call_output` as a tool message; `reasoning` items are left out, as vLLM leaves
 * a previous answer's reasoning out of the next prompt. Any other item is refused, as vLLM
 * refuses it.
 * @internal
 * @module
 */

import { randomUUID } from 'node:crypto';
import { isRecord } from '../chat/prompt.js';
import { BadRequest } from './bad-request.js';

/** A new response id as vLLM makes them: `resp_` and 32 hex digits. */
export function newResponseId(): string {
  return `resp_${randomUUID().replaceAll('-', '')}`;
}

/** The prompt fields of a Responses request. */
export interface ResponsesPrompt {
  /** `instructions`: the system message, when given. */
  instructions: string | undefined;
  /** `input`: one user message, or the conversation's items. */
  input: string | readonly Record<string, unknown>[];
}

/** A stored response a request continues (`previous_response_id`): its prompt's messages and its answer's texts. */
export interface ResponsesHistory {
  messages: readonly Record<string, unknown>[];
  answers: readonly string[];
}

/**
 * Reads and checks the prompt fields of a Responses request.
 * @throws {BadRequest} for a missing or empty `input`, an item that is not an object, or
 * `instructions` that is not a string.
 */
export function readResponsesPrompt(b: Record<string, unknown>): ResponsesPrompt {
  const { input, instructions } = b;
  if (instructions !== undefined && instructions !== null && typeof instructions !== 'string')
    throw new BadRequest('instructions must be a string');
  if (typeof input === 'string') {
    if (input === '') throw new BadRequest('input must be a non-empty string or a non-empty list of items');
  } else if (!Array.isArray(input) || input.length === 0) {
    throw new BadRequest('input must be a non-empty string or a non-empty list of items');
  } else {
    const bad = input.findIndex((item) => !isRecord(item));
    if (bad >= 0) throw new BadRequest(`input[${bad}] must be an object`);
  }
  return { instructions: typeof instructions === 'string' && instructions !== '' ? instructions : undefined, input };
}

/** One input item as a chat message, or undefined for an item the prompt leaves out. */
function itemMessage(item: Record<string, unknown>, i: number): Record<string, unknown> | undefined {
  const type = item.type;
  if (type === undefined || type === 'message') {
    if (typeof item.role !== 'string') throw new BadRequest(`input[${i}].role must be a string`);
    return { role: item.role, content: item.content ?? null };
  }
  if (type === 'function_call') {
    if (typeof item.name !== 'string' || typeof item.arguments !== 'string')
      throw new BadRequest(`input[${i}]: a function_call needs a name and arguments (strings)`);
    const call = { id: item.call_id, type: 'function', function: { name: item.name, arguments: item.arguments } };
    return { role: 'assistant', content: null, tool_calls: [call] };
  }
  if (type === 'function_call_output') {
    if (typeof item.output !== 'string') throw new BadRequest(`input[${i}]: a function_call_output needs its output (a string)`);
    return { role: 'tool', tool_call_id: item.call_id, content: item.output };
  }
  if (type === 'reasoning') return undefined;
  throw new BadRequest(`input[${i}]: items of type ${JSON.stringify(type)} are not supported`);
}

/** The chat messages of a Responses request's prompt, after the conversation it continues, if any. */
export function responsesMessages(prompt: ResponsesPrompt, history?: ResponsesHistory): Record<string, unknown>[] {
  const messages: Record<string, unknown>[] = [];
  if (prompt.instructions !== undefined) messages.push({ role: 'system', content: prompt.instructions });
  if (history) {
    messages.push(...history.messages);
    for (const text of history.answers) messages.push({ role: 'assistant', content: text });
  }
  if (typeof prompt.input === 'string') messages.push({ role: 'user', content: prompt.input });
  else
    prompt.input.forEach((item, i) => {
      const m = itemMessage(item, i);
      if (m) messages.push(m);
    });
  if (messages.length === 0) throw new BadRequest('the input has no message to answer');
  return messages;
}
