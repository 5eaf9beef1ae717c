/**
 * vLLM's Responses API on the mock worker: `POST /v1/responses` (whole or streamed as named SSE
 * events), `GET /v1/responses/{id}` and `POST /v1/responses/{id}/cancel`. As in vLLM, responses
 * are kept only when the worker was started with the store on (`responsesStore`, vLLM's
 * `VLLM_ENABLE_RESPONSES_API_STORE`): then a request may continue one by `previous_response_id`,
 * and the conversation lives in this worker's memory alone, which is why a gateway must send the
 * follow-up to the worker that answered. Without the store, `store: true` is ignored (vLLM's
 * default), and `background` is refused. A response's id is the request's `request_id`, a
 * random `resp_…` when absent.
 * @internal
 * @module
 */

import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { BadRequest, invalidField, NotFound } from './bad-request.js';
import { engineRun, openEventStream, runStreamed, runWhole } from './engine-run.js';
import { chatLogprobs, positionLogprobs } from './logprobs.js';
import { chatTokens, checkFits, readCacheSalt, requestedLora, type Served } from './openai.js';
import type { ResolvedMockOptions } from './options.js';
import { mockOutput } from './output.js';
import type { LiveRequest, LoraRef } from './rank.js';
import { newResponseId, type ResponsesHistory, readResponsesPrompt, responsesMessages } from './responses-input.js';
import { MAX_LOGPROBS, readTemperatureTopPTopK, VOCAB_SIZE } from './sampling.js';
import { chunkDue } from './stream-interval.js';
import { detokenize } from './tokenizer.js';
import type { EngineRequestFacts, EngineRequestSpan } from './tracing.js';

/** Responses kept when the store is on; the oldest goes first (vLLM keeps every one, and warns it leaks). */
export const MAX_STORED_RESPONSES = 10_000;

/** What the worker lends the Responses API: its options, its hang fault, and a rank to run a prompt on. */
export interface ResponsesEngine {
  options: ResolvedMockOptions;
  /** The model and the adapters served now. */
  served: Served;
  /** Takes the reply when the worker cannot serve now: 503 while asleep, held while hung (true: taken). */
  hang(reply: FastifyReply): boolean;
  /** The rank a request runs on (its `X-data-parallel-rank`, or the least loaded): its number, and a way to run a prompt there (returning its cancel). */
  rankFor(req: FastifyRequest): { dpRank: number; run(job: LiveRequest): () => void };
  /** The request's `llm_request` span (one that records nothing without `otlpTracesEndpoint`). */
  requestSpan(req: FastifyRequest, facts: EngineRequestFacts): EngineRequestSpan;
}

interface Stored {
  response: ResponseObject;
  /** The prompt's messages (the previous conversation included), for a request that continues it. */
  messages: Record<string, unknown>[];
}

interface ResponseObject {
  id: string;
  object: 'response';
  created_at: number;
  status: 'in_progress' | 'completed' | 'incomplete';
  model: string;
  instructions: string | null;
  previous_response_id: string | null;
  max_output_tokens: number;
  background: boolean;
  output: unknown[];
  usage: unknown;
  [field: string]: unknown;
}

interface ParsedResponses {
  id: string;
  prompt: number[];
  messages: Record<string, unknown>[];
  maxTokens: number;
  stream: boolean;
  store: boolean;
  model: string;
  lora: LoraRef | undefined;
  cacheSalt: string | undefined;
  instructions: string | null;
  previous: string | null;
  /** Log probabilities asked for (`include` names `message.output_text.logprobs`): `top_logprobs` alternatives, else undefined. */
  logprobs: number | undefined;
  /** What the response object repeats of the request, as vLLM's does (the sampling values resolved). */
  echoed: Record<string, unknown>;
}

/** The `include` entry that asks for the output text's log probabilities. */
const OUTPUT_LOGPROBS = 'message.output_text.logprobs';

function notFound(id: string): NotFound {
  return new NotFound(`Response with id '${id}' not found.`);
}

export function registerResponses(app: FastifyInstance, engine: ResponsesEngine): void {
  const store = new Map<string, Stored>();
  const keep = (s: Stored) => {
    store.delete(s.response.id);
    store.set(s.response.id, s);
    if (store.size > MAX_STORED_RESPONSES) store.delete(store.keys().next().value as string);
  };
  app.post('/v1/responses', async (req, reply) => {
    if (engine.hang(reply)) return reply;
    const parsed = parse(req.body, engine, store);
    return serve(engine, req, reply, parsed, parsed.store ? keep : undefined);
  });
  app.get('/v1/responses/:id', async (req) => {
    const { id } = req.params as { id: string };
    const stored = store.get(id);
    if (!stored) throw notFound(id);
    return stored.response;
  });
  app.post('/v1/responses/:id/cancel', async (req) => {
    const { id } = req.params as { id: string };
    const stored = store.get(id);
    if (!stored) throw notFound(id);
    // Only background responses can be cancelled in vLLM, and the mock runs none.
    throw new BadRequest('Cannot cancel a synchronous response.');
  });
}

function parse(body: unknown, engine: ResponsesEngine, store: Map<string, Stored>): ParsedResponses {
  const o = engine.options;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new BadRequest('the body must be a JSON object');
  const b = body as Record<string, unknown>;
  // vLLM's request schema refuses a stored prompt template, before the model is looked at.
  if (b.prompt !== undefined && b.prompt !== null) throw invalidField('prompt template is not supported', 'prompt');
  if (b.include !== undefined && b.include !== null && !(Array.isArray(b.include) && b.include.every((x) => typeof x === 'string')))
    throw new BadRequest('include must be a list of strings');
  if (b.top_logprobs !== undefined && b.top_logprobs !== null && !Number.isSafeInteger(b.top_logprobs))
    throw new BadRequest(`top_logprobs must be an integer, got ${JSON.stringify(b.top_logprobs)}`);
  const lora = requestedLora(b.model, engine.served);
  const prompt = readResponsesPrompt(b);
  for (const key of ['stream', 'store', 'background'] as const)
    if (b[key] !== undefined && b[key] !== null && typeof b[key] !== 'boolean') throw new BadRequest(`${key} must be a boolean`);
  if (Array.isArray(b.tools) && b.tools.length > 0) throw new BadRequest('Tool use is not supported in Responses API without Harmony');
  let keep = b.store !== false;
  if (b.background === true) {
    if (!o.responsesStore)
      throw new BadRequest('This vLLM engine does not support `store=True` and therefore does not support the background mode.');
    throw new BadRequest('background responses are not supported by the mock worker');
  }
  if (!o.responsesStore) keep = false;
  const previous = b.previous_response_id ?? null;
  if (previous !== null && typeof previous !== 'string') throw new BadRequest('previous_response_id must be a string');
  let history: ResponsesHistory | undefined;
  if (previous !== null) {
    const stored = store.get(previous);
    if (!stored) throw notFound(previous);
    history = { messages: stored.messages, answers: answers(stored.response) };
  }
  const id = b.request_id ?? newResponseId();
  if (typeof id !== 'string' || id === '') throw new BadRequest('request_id must be a non-empty string');
  const messages = responsesMessages(prompt, history);
  const tokens = chatTokens({ messages }, { trustRequestChatTemplate: false, chatTemplateContentFormat: o.chatTemplateContentFormat });
  const maxTokens = b.max_output_tokens ?? 16;
  if (!Number.isSafeInteger(maxTokens)) throw new BadRequest(`max_output_tokens must be an integer, got ${JSON.stringify(maxTokens)}`);
  // vLLM's SamplingParams checks these once the prompt is rendered (max_output_tokens is its max_tokens).
  const { temperature, topP } = readTemperatureTopPTopK(b);
  if ((maxTokens as number) < 1) throw invalidField(`max_tokens must be at least 1, got ${maxTokens}.`, 'max_tokens', String(maxTokens));
  let logprobs = (b.include as string[] | undefined)?.includes(OUTPUT_LOGPROBS) ? ((b.top_logprobs as number | undefined) ?? 0) : undefined;
  // -1 asks for the whole vocabulary.
  if (logprobs === -1) logprobs = VOCAB_SIZE;
  if (logprobs !== undefined && (logprobs < 0 || logprobs > MAX_LOGPROBS))
    throw invalidField(
      logprobs < 0
        ? `logprobs must be non-negative or -1, got ${logprobs}.`
        : `Requested sample logprobs of ${logprobs}, which is greater than max allowed: ${MAX_LOGPROBS}`,
      'logprobs',
      String(logprobs),
    );
  const tooLong = `The engine prompt length ${tokens.length} exceeds the max_model_len ${o.maxModelLen}. Please reduce prompt.`;
  checkFits(tokens.length, maxTokens as number, o, tooLong);
  const cacheSalt = readCacheSalt(b);
  return {
    id,
    prompt: tokens,
    // The next turn's prompt repeats them all, these instructions too (vLLM keeps them in its store).
    messages,
    maxTokens: maxTokens as number,
    stream: b.stream === true,
    store: keep,
    model: lora?.name ?? o.model,
    lora,
    cacheSalt,
    instructions: prompt.instructions ?? null,
    previous,
    logprobs,
    echoed: {
      temperature,
      top_p: topP,
      top_logprobs: logprobs ?? null,
      service_tier: b.service_tier ?? 'auto',
      truncation: b.truncation ?? 'disabled',
      text: b.text ?? null,
      user: b.user ?? null,
      reasoning: b.reasoning ?? null,
      metadata: b.metadata ?? null,
      parallel_tool_calls: b.parallel_tool_calls ?? true,
      tool_choice: b.tool_choice ?? 'auto',
      max_tool_calls: b.max_tool_calls ?? null,
      prompt: null,
    },
  };
}

/** The texts of a response's output messages (the next turn's assistant messages). */
function answers(r: ResponseObject): string[] {
  const texts: string[] = [];
  for (const item of r.output as { type?: string; content?: { text?: unknown }[] }[])
    if (item.type === 'message') for (const part of item.content ?? []) if (typeof part.text === 'string') texts.push(part.text);
  return texts;
}

function responseObject(
  p: ParsedResponses,
  created: number,
  status: ResponseObject['status'],
  output: unknown[],
  usage: unknown,
): ResponseObject {
  return {
    id: p.id,
    object: 'response',
    created_at: created,
    status,
    // vLLM's only reason: the output reached max_output_tokens.
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    error: null,
    model: p.model,
    instructions: p.instructions,
    previous_response_id: p.previous,
    max_output_tokens: p.maxTokens,
    background: false,
    tools: [],
    ...p.echoed,
    output,
    usage,
  };
}

/** The output message; a finished one carries its text, and its logprobs when they were asked for (else null). */
function messageItem(id: string, text: string, status: 'in_progress' | 'completed', logprobs: unknown = null): unknown {
  const content = status === 'completed' ? [{ type: 'output_text', text, annotations: [], logprobs }] : [];
  return { id, type: 'message', role: 'assistant', status, content };
}

function responseUsage(input: number, output: number, cached: number): unknown {
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: cached },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: input + output,
  };
}

function serve(
  engine: ResponsesEngine,
  req: FastifyRequest,
  reply: FastifyReply,
  p: ParsedResponses,
  keep: ((s: Stored) => void) | undefined,
): Promise<unknown> {
  const created = Math.floor(Date.now() / 1000);
  const itemId = `msg_${randomUUID().replaceAll('-', '')}`;
  const output = mockOutput(p.prompt, p.maxTokens, engine.options.seed);
  const generated: number[] = [];
  // Log probabilities of output token `i`, for the whole message (with bytes) or a streamed delta (without).
  const positions = (tokens: readonly number[], from: number) =>
    tokens.map((t, i) => positionLogprobs(p.prompt.length + from + i, t, p.logprobs ?? 0));
  const wholeLogprobs = () =>
    p.logprobs === undefined ? null : (chatLogprobs(positions(generated, 0), p.logprobs) as { content: unknown }).content;
  const finished = (cached: number, logprobs = wholeLogprobs()): ResponseObject => {
    const text = detokenize(generated);
    // The mock model never ends a message itself: its output always reaches max_output_tokens.
    const status = generated.length >= p.maxTokens ? 'incomplete' : 'completed';
    const r = responseObject(
      p,
      created,
      status,
      [messageItem(itemId, text, 'completed', logprobs)],
      responseUsage(p.prompt.length, generated.length, cached),
    );
    keep?.({ response: r, messages: p.messages });
    return r;
  };
  const span = engine.requestSpan(req, {
    id: p.id,
    model: p.model,
    maxTokens: p.maxTokens,
    n: 1,
    temperature: p.echoed.temperature as number,
    topP: p.echoed.top_p as number,
  });
  const run = engineRun({ prompt: p.prompt, lora: p.lora, cacheSalt: p.cacheSalt, output }, span, () => generated.length);
  const rank = engine.rankFor(req);
  if (!p.stream) {
    void reply.header('x-data-parallel-rank', String(rank.dpRank));
    return runWhole(
      rank,
      reply,
      run,
      (t) => generated.push(...t),
      (cached) => finished(cached),
    );
  }
  reply.hijack();
  const res = reply.raw;
  let sequence = 0;
  let sent = 0;
  // vLLM's stream: named events, each numbered, and no `[DONE]`.
  const send = (type: string, fields: Record<string, unknown>) =>
    res.write(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...fields })}\n\n`);
  openEventStream(res, rank.dpRank);
  const initial = responseObject(p, created, 'in_progress', [], null);
  send('response.created', { response: initial });
  send('response.in_progress', { response: initial });
  runStreamed(
    rank,
    res,
    run,
    (tokens, first) => {
      if (first) {
        send('response.output_item.added', { output_index: 0, item: messageItem(itemId, '', 'in_progress') });
        send('response.content_part.added', {
          output_index: 0,
          item_id: itemId,
          content_index: 0,
          part: { type: 'output_text', text: '', annotations: [], logprobs: [] },
        });
      }
      // A delta for the first engine step's tokens, then one each time `streamInterval` more
      // are out (every step by default), and the rest last.
      generated.push(...tokens);
      const made = generated.length;
      if (chunkDue(made, sent, output.length, engine.options.streamInterval)) {
        const delta = generated.slice(sent);
        const logprobs =
          p.logprobs === undefined
            ? []
            : positions(delta, sent).map((e) => ({
                token: detokenize([e.token]),
                logprob: e.logprob,
                top_logprobs: e.top.slice(0, p.logprobs).map((x) => ({ token: detokenize([x.token]), logprob: x.logprob })),
              }));
        sent = made;
        send('response.output_text.delta', { output_index: 0, item_id: itemId, content_index: 0, delta: detokenize(delta), logprobs });
      }
    },
    (cached) => {
      const text = detokenize(generated);
      const part = { type: 'output_text', text, annotations: [] };
      send('response.output_text.done', { output_index: 0, item_id: itemId, content_index: 0, text, logprobs: [] });
      send('response.content_part.done', { output_index: 0, item_id: itemId, content_index: 0, part });
      const logprobs = wholeLogprobs();
      send('response.output_item.done', { output_index: 0, item: messageItem(itemId, text, 'completed', logprobs) });
      send('response.completed', { response: finished(cached, logprobs) });
      res.end();
    },
    (reason) => {
      send('error', { code: 'engine_stopped', message: `the engine stopped: ${reason}`, param: null });
      res.destroy();
    },
  );
  return Promise.resolve(reply);
}
