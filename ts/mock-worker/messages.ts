/**
 * Anthropic's Messages API on the mock worker, as vLLM serves it: `POST /v1/messages` runs the
 * chat the request converts to (`chat/anthropic-messages.ts`), so its prompt, and the KV blocks
 * it caches and publishes, are that chat's; the answer is vLLM's conversion of the chat answer
 * (one text block, `stop_reason`, `usage` with `input_tokens` and `output_tokens`), streamed as
 * Anthropic's named events (`message_start`, `content_block_start`, `content_block_delta`,
 * `content_block_stop`, `message_delta` with the usage, `message_stop`).
 * `POST /v1/messages/count_tokens` counts the prompt's tokens. Errors are Anthropic's shape.
 * @internal
 * @module
 */

import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { anthropicToChat } from '../chat/anthropic-messages.js';
import { anthropicError } from '../server/api-errors.js';
import { BadRequest } from './bad-request.js';
import { engineRun, openEventStream, runStreamed, runWhole } from './engine-run.js';
import { chatTokens, checkFits, requestedLora } from './openai.js';
import { mockOutput } from './output.js';
import type { LoraRef } from './rank.js';
import type { ResponsesEngine } from './responses.js';
import { readTemperatureTopPTopK } from './sampling.js';
import { chunkDue } from './stream-interval.js';
import { detokenize } from './tokenizer.js';

interface ParsedMessages {
  prompt: number[];
  maxTokens: number;
  stream: boolean;
  model: string;
  lora: LoraRef | undefined;
  temperature: number;
  topP: number;
}

/** Anthropic's error body for what the worker refuses (vLLM answers the Messages API in Anthropic's shape). */
function errorHandler(err: FastifyError, _req: FastifyRequest, reply: FastifyReply): void {
  const status = err instanceof BadRequest ? 400 : (err.statusCode ?? 500);
  void reply.code(status).send(anthropicError(err.message, status));
}

function parse(body: unknown, engine: ResponsesEngine, needsMaxTokens: boolean): ParsedMessages {
  const o = engine.options;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new BadRequest('the body must be a JSON object');
  const b = body as Record<string, unknown>;
  // count_tokens takes no max_tokens; the conversion checks it, so a placeholder stands in.
  const chat = anthropicToChat(needsMaxTokens ? b : { ...b, max_tokens: 1 });
  const lora = requestedLora(b.model, engine.served);
  const prompt = chatTokens(chat, { trustRequestChatTemplate: false, chatTemplateContentFormat: o.chatTemplateContentFormat });
  if (b.stream !== undefined && b.stream !== null && typeof b.stream !== 'boolean') throw new BadRequest('stream must be a boolean');
  const maxTokens = b.max_tokens as number;
  if (needsMaxTokens)
    checkFits(
      prompt.length,
      maxTokens,
      o,
      `This model's maximum context length is ${o.maxModelLen} tokens; the request needs ${prompt.length + maxTokens}`,
    );
  const { temperature, topP } = readTemperatureTopPTopK(b);
  return { prompt, maxTokens, stream: b.stream === true, model: lora?.name ?? o.model, lora, temperature, topP };
}

export function registerMessages(app: FastifyInstance, engine: ResponsesEngine): void {
  let counter = 0;
  app.post('/v1/messages', { errorHandler }, async (req, reply) => {
    if (engine.hang(reply)) return reply;
    const parsed = parse(req.body, engine, true);
    // vLLM's message id is the chat completion's.
    const named = req.headers['x-request-id'];
    const id = `chatcmpl-${typeof named === 'string' && named !== '' ? named : `mock-msg-${counter++}`}`;
    return serve(engine, req, reply, parsed, id);
  });
  app.post('/v1/messages/count_tokens', { errorHandler }, async (req) => ({ input_tokens: parse(req.body, engine, false).prompt.length }));
}

/** vLLM's `stop_reason`: the mock model never ends a message itself, so its output always reaches `max_tokens`. */
const STOP_REASON = 'max_tokens';

function serve(engine: ResponsesEngine, req: FastifyRequest, reply: FastifyReply, p: ParsedMessages, id: string): Promise<unknown> {
  const output = mockOutput(p.prompt, p.maxTokens, engine.options.seed);
  const generated: number[] = [];
  const span = engine.requestSpan(req, { id, model: p.model, maxTokens: p.maxTokens, n: 1, temperature: p.temperature, topP: p.topP });
  const run = engineRun({ prompt: p.prompt, lora: p.lora, cacheSalt: undefined, output }, span, () => generated.length);
  const usage = () => ({ input_tokens: p.prompt.length, output_tokens: generated.length });
  const rank = engine.rankFor(req);
  if (!p.stream) {
    void reply.header('x-data-parallel-rank', String(rank.dpRank));
    return runWhole(
      rank,
      reply,
      run,
      (t) => generated.push(...t),
      () => ({
        id,
        type: 'message',
        role: 'assistant',
        content: [{ type: 'text', text: detokenize(generated) }],
        model: p.model,
        stop_reason: STOP_REASON,
        stop_sequence: null,
        usage: usage(),
      }),
    );
  }
  reply.hijack();
  const res = reply.raw;
  const send = (type: string, fields: Record<string, unknown>) =>
    res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...fields })}\n\n`);
  openEventStream(res, rank.dpRank);
  let sent = 0;
  runStreamed(
    rank,
    res,
    run,
    (tokens, first) => {
      if (first) {
        // vLLM opens with the chat stream's first chunk, which carries the prompt's usage.
        send('message_start', {
          message: {
            id,
            type: 'message',
            role: 'assistant',
            content: [],
            model: p.model,
            stop_reason: null,
            stop_sequence: null,
            usage: { input_tokens: p.prompt.length, output_tokens: 0 },
          },
        });
        send('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
      }
      generated.push(...tokens);
      if (chunkDue(generated.length, sent, output.length, engine.options.streamInterval)) {
        const delta = generated.slice(sent);
        sent = generated.length;
        send('content_block_delta', { index: 0, delta: { type: 'text_delta', text: detokenize(delta) } });
      }
    },
    () => {
      send('content_block_stop', { index: 0 });
      send('message_delta', { delta: { stop_reason: STOP_REASON }, usage: usage() });
      send('message_stop', {});
      res.end();
    },
    (reason) => {
      res.write(`event: error\ndata: ${JSON.stringify(anthropicError(`the engine stopped: ${reason}`, 500))}\n\n`);
      res.destroy();
    },
  );
  return Promise.resolve(reply);
}
