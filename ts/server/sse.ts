/**
 * Server-sent events as the proxy passes them through: the upstream body is cut into whole
 * events (a blank line ends one) and each is forwarded the moment it is complete, so nothing is
 * buffered beyond one event. Each event is also read for what the gateway measures: the first
 * token, the token chunks after it, and the usage chunk with `cached_tokens`. The Responses API
 * streams named events instead of chunks: its tokens come in `….delta` events and its usage in
 * `response.completed`; Anthropic's Messages API's in `content_block_delta` and `message_delta`;
 * SGLang's `/generate` puts both in every event's `meta_info` (generate-facts.ts).
 * @internal
 * @module
 */

import { generateAnswerCachedTokens, generateEventFacts, isGenerateChunk } from './generate-facts.js';

/** Splits a byte stream into SSE events (each returned with its terminating blank line). */
export class SseSplitter {
  private rest = '';
  private readonly decoder = new TextDecoder();

  push(chunk: Uint8Array): string[] {
    this.rest += this.decoder.decode(chunk, { stream: true });
    const events: string[] = [];
    for (;;) {
      const lf = this.rest.indexOf('\n\n');
      const crlf = this.rest.indexOf('\r\n\r\n');
      const end = lf < 0 ? crlf : crlf < 0 ? lf : Math.min(lf, crlf);
      if (end < 0) break;
      const len = end === crlf ? 4 : 2;
      events.push(this.rest.slice(0, end + len));
      this.rest = this.rest.slice(end + len);
    }
    return events;
  }

  /** What is left when the stream ends (an unterminated event, passed on as is). */
  flush(): string {
    const tail = this.rest + this.decoder.decode();
    this.rest = '';
    return tail;
  }
}

/** What one event carries, for the gateway's bookkeeping. */
export interface EventFacts {
  /** It carries generated tokens (a completion's `text`; a chat delta's content, reasoning, refusal or tool calls; an unfinished choice's held-back empty text). */
  token: boolean;
  /** A usage-only chunk (`choices: []` with `usage`). */
  usageOnly: boolean;
  /** `usage.prompt_tokens_details.cached_tokens` when present. */
  cachedTokens: number | undefined;
  /** `usage.prompt_tokens` when present. */
  promptTokens: number | undefined;
  /** `usage.completion_tokens` (`output_tokens`) when present: with `continuous_usage_stats`, the running total of the chunk's choice. */
  completionTokens: number | undefined;
  /** The index of the chunk's choice, when it has exactly one (engines stream each choice's tokens in chunks of their own). */
  choice: number | undefined;
  /** A usage object on a chunk with choices (`continuous_usage_stats`), not the usage-only chunk. */
  chunkUsage: boolean;
  /** The event's data, parsed, when it is a JSON object: for those that rewrite the event, so it is parsed once. */
  chunk: Record<string, unknown> | undefined;
  /** The `[DONE]` sentinel. */
  done: boolean;
  /** An error object sent in the stream. */
  error: boolean;
}

const NONE: EventFacts = {
  token: false,
  usageOnly: false,
  cachedTokens: undefined,
  promptTokens: undefined,
  completionTokens: undefined,
  choice: undefined,
  chunkUsage: false,
  chunk: undefined,
  done: false,
  error: false,
};

/** An event's `data:` lines, joined (without their field names). */
function eventData(event: string): string {
  let data = '';
  for (const line of event.split(/\r?\n/)) if (line.startsWith('data:')) data += line.slice(line[5] === ' ' ? 6 : 5);
  return data;
}

/** Reads an event's data as OpenAI's chunk JSON. */
export function inspectEvent(event: string): EventFacts {
  const data = eventData(event);
  if (data === '') return NONE;
  if (data === '[DONE]') return { ...NONE, done: true };
  let chunk: { choices?: Choice[]; usage?: Usage; error?: unknown; type?: unknown };
  try {
    chunk = JSON.parse(data);
  } catch {
    return NONE;
  }
  if (chunk === null || typeof chunk !== 'object') return NONE;
  if (isGenerateChunk(chunk)) return generateEventFacts(chunk);
  if (typeof chunk.type === 'string')
    return {
      ...(MESSAGES_EVENTS.has(chunk.type) ? messagesEventFacts(chunk as MessagesEvent) : responsesEventFacts(chunk as ResponsesEvent)),
      chunk,
    };
  const choices = Array.isArray(chunk.choices) ? chunk.choices : [];
  const token = choices.some(carriesToken);
  const index = choices.length === 1 ? choices[0]?.index : undefined;
  const usage = chunk.usage !== undefined && chunk.usage !== null && typeof chunk.usage === 'object';
  return {
    token,
    usageOnly: choices.length === 0 && chunk.usage !== undefined,
    ...usageFacts(chunk.usage),
    choice: Number.isSafeInteger(index) ? (index as number) : undefined,
    chunkUsage: usage && choices.length > 0,
    chunk,
    done: false,
    error: chunk.error !== undefined,
  };
}

/**
 * An event for a chunk without its `usage`: for usage the gateway asked for on a client's behalf
 * (see `streamOptions` in prompt.ts). The chunk (as {@link inspectEvent} parsed it) is written
 * again as one `data:` line.
 */
export function withoutUsage(chunk: Record<string, unknown>): string {
  const { usage: _gateways, ...rest } = chunk;
  return `data: ${JSON.stringify(rest)}\n\n`;
}

/** One choice of a streamed chunk, as far as the gateway reads it. */
interface Choice {
  index?: unknown;
  text?: unknown;
  delta?: Record<string, unknown>;
  finish_reason?: unknown;
}

/**
 * A choice carries generated tokens when it has text, and also when it is an unfinished choice
 * whose text is empty: the engines send such a chunk only for tokens they generated, whose text
 * the detokenizer holds back (vLLM keeps back a stop string's length less one character; an
 * incomplete UTF-8 character waits for its next token). Counting it keeps the first token's time
 * and the output count true under stop strings. A chat's first chunk, the bare role, carries none.
 */
function carriesToken(c: Choice | null | undefined): boolean {
  if (c === null || typeof c !== 'object') return false;
  if (typeof c.text === 'string') return c.text !== '' || c.finish_reason === null;
  const d = c.delta;
  if (generates(d)) return true;
  return d !== null && typeof d === 'object' && !('role' in d) && d.content === '' && c.finish_reason === null;
}

/** Delta fields that carry generated tokens: the answer, a reasoning model's thinking, a refusal. */
const GENERATED_TEXT = ['content', 'reasoning_content', 'reasoning', 'refusal'];

/**
 * A chat delta carries generated tokens: text in one of {@link GENERATED_TEXT}, or a tool call
 * (an agent's turn may have no content at all). The first delta's bare `role` does not.
 */
function generates(delta: Record<string, unknown> | undefined): boolean {
  if (delta === null || typeof delta !== 'object') return false;
  if (GENERATED_TEXT.some((k) => typeof delta[k] === 'string' && delta[k] !== '')) return true;
  return Array.isArray(delta.tool_calls) && delta.tool_calls.length > 0;
}

/** A Responses API stream event (its `type` names it). */
interface ResponsesEvent {
  type: string;
  delta?: unknown;
  response?: { usage?: Usage | null } | null;
}

/**
 * A Responses API event's facts: a `….delta` with text carries tokens (the answer, reasoning, a
 * refusal, a tool call's arguments), `response.completed` the usage, `error` and
 * `response.failed` an error. Nothing in it is the gateway's own, so nothing is usage-only.
 */
function responsesEventFacts(event: ResponsesEvent): EventFacts {
  return {
    ...NONE,
    token: event.type.endsWith('.delta') && typeof event.delta === 'string' && event.delta !== '',
    ...(event.type === 'response.completed' ? usageFacts(event.response?.usage) : {}),
    error: event.type === 'error' || event.type === 'response.failed',
  };
}

/** The Messages API's stream events (Anthropic's; their `type` names them, without the Responses API's dots). */
const MESSAGES_EVENTS = new Set([
  'message_start',
  'content_block_start',
  'content_block_delta',
  'content_block_stop',
  'message_delta',
  'message_stop',
  'ping',
]);

/** A Messages API stream event. */
interface MessagesEvent {
  type: string;
  delta?: { text?: unknown; thinking?: unknown; partial_json?: unknown } | null;
  usage?: Usage | null;
}

/**
 * A Messages API event's facts: a `content_block_delta` with text, thinking or a tool call's
 * JSON carries tokens; `message_delta` the final usage (`message_start`'s has no output yet, and
 * taking both would count the engine's cached tokens twice). An `error` event is read as the
 * Responses API's is.
 */
function messagesEventFacts(event: MessagesEvent): EventFacts {
  const d = event.delta;
  const text = (v: unknown) => typeof v === 'string' && v !== '';
  return {
    ...NONE,
    token:
      event.type === 'content_block_delta' &&
      d !== null &&
      typeof d === 'object' &&
      (text(d.text) || text(d.thinking) || text(d.partial_json)),
    ...(event.type === 'message_delta' ? usageFacts(event.usage) : {}),
  };
}

/** A usage object: chat and completions' fields, the Responses API's, or the Messages API's. */
interface Usage {
  prompt_tokens?: unknown;
  prompt_tokens_details?: { cached_tokens?: unknown } | null;
  completion_tokens?: unknown;
  input_tokens?: unknown;
  input_tokens_details?: { cached_tokens?: unknown } | null;
  output_tokens?: unknown;
  /** The Messages API's tokens read from the prompt cache. */
  cache_read_input_tokens?: unknown;
}

/** `cached_tokens` and the prompt's and output's tokens of a usage object (any of the three APIs'), when they are numbers. */
export function usageFacts(usage: Usage | undefined | null): Pick<EventFacts, 'cachedTokens' | 'promptTokens' | 'completionTokens'> {
  const cached =
    usage?.prompt_tokens_details?.cached_tokens ?? usage?.input_tokens_details?.cached_tokens ?? usage?.cache_read_input_tokens;
  const prompt = usage?.prompt_tokens ?? usage?.input_tokens;
  const completion = usage?.completion_tokens ?? usage?.output_tokens;
  return {
    cachedTokens: typeof cached === 'number' ? cached : undefined,
    promptTokens: typeof prompt === 'number' ? prompt : undefined,
    completionTokens: typeof completion === 'number' ? completion : undefined,
  };
}

/** The cached tokens a whole answer reports: in its `usage` (any of the three APIs'), or in SGLang `/generate`'s `meta_info`. */
export function answerCachedTokens(answer: unknown): number | undefined {
  if (answer === null || typeof answer !== 'object') return undefined;
  return usageFacts((answer as { usage?: Usage }).usage).cachedTokens ?? generateAnswerCachedTokens(answer);
}
