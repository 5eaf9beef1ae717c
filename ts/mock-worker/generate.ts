/**
 * SGLang's native `POST /generate` on the mock worker, as an SGLang server answers it: one prompt
 * as `text` or `input_ids`, `sampling_params` (`max_new_tokens`, 128 by default, `temperature`,
 * `top_p`), `rid`, `lora_path` and `stream`. The answer is `{text, output_ids, meta_info}`, the
 * `meta_info` holding the request's id, its `finish_reason` (`{type: "length", length}` once
 * done, `null` before), `prompt_tokens`, `completion_tokens` and `cached_tokens`; streamed, each
 * event carries the text and output ids so far (SGLang's default, not increments) and the
 * stream ends with `data: [DONE]`. With `disaggregationMode` the request is one leg of an
 * SGLang-disaggregated request, met in its bootstrap room as a completion's is (bootstrap.ts).
 * The mock runs one sequence per request: a batch of prompts, `n` above 1 and `input_embeds` get
 * 400.
 * @internal
 * @module
 */

import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { BadRequest } from './bad-request.js';
import type { AdmittedLeg } from './bootstrap.js';
import { type EngineRun, engineRun, openEventStream, runStreamed, runWhole } from './engine-run.js';
import { checkFits, completionTokens, requestedLora } from './openai.js';
import { mockOutput } from './output.js';
import type { LoraRef } from './rank.js';
import type { ResponsesEngine } from './responses.js';
import { readTemperatureTopPTopK } from './sampling.js';
import { chunkDue } from './stream-interval.js';
import { detokenize } from './tokenizer.js';

/** SGLang's `SamplingParams` default output length. */
const DEFAULT_MAX_NEW_TOKENS = 128;

/** What the route needs of the worker besides its engine: the request's leg, when it serves one leg of disaggregated requests. */
export interface GenerateEngine extends ResponsesEngine {
  /** Meets the request's peer in its bootstrap room (undefined without `disaggregationMode`). */
  admitLeg(body: Record<string, unknown>, reply: FastifyReply): Promise<AdmittedLeg | undefined>;
}

interface ParsedGenerate {
  prompt: number[];
  maxTokens: number;
  stream: boolean;
  id: string;
  model: string;
  lora: LoraRef | undefined;
  temperature: number;
  topP: number;
}

function parse(body: unknown, engine: ResponsesEngine): ParsedGenerate {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new BadRequest('the body must be a JSON object');
  const b = body as Record<string, unknown>;
  if (b.input_embeds !== undefined && b.input_embeds !== null)
    throw new BadRequest('the mock worker takes text or input_ids, not input_embeds');
  const given = [b.text, b.input_ids].filter((v) => v !== undefined && v !== null).length;
  if (given !== 1) throw new BadRequest('give exactly one of text and input_ids');
  const input = b.text ?? b.input_ids;
  if (Array.isArray(input) && (input.length === 0 || typeof input[0] !== 'number'))
    throw new BadRequest('the mock worker runs one prompt per /generate request, not a batch');
  const prompt = completionTokens({ prompt: input });
  if (prompt.length === 0) throw new BadRequest('the prompt is empty');
  const sampling = b.sampling_params ?? {};
  if (sampling === null || typeof sampling !== 'object' || Array.isArray(sampling))
    throw new BadRequest('sampling_params must be an object');
  const s = sampling as Record<string, unknown>;
  const maxTokens = s.max_new_tokens ?? DEFAULT_MAX_NEW_TOKENS;
  if (!Number.isSafeInteger(maxTokens) || (maxTokens as number) < 1)
    throw new BadRequest('sampling_params.max_new_tokens must be a positive integer');
  if (s.n !== undefined && s.n !== 1) throw new BadRequest('the mock worker runs one sequence per /generate request (n 1)');
  if (b.stream !== undefined && b.stream !== null && typeof b.stream !== 'boolean') throw new BadRequest('stream must be a boolean');
  if (b.rid !== undefined && typeof b.rid !== 'string') throw new BadRequest('rid must be a string');
  const o = engine.options;
  checkFits(
    prompt.length,
    maxTokens as number,
    o,
    `the request needs ${prompt.length + (maxTokens as number)} tokens, more than ${o.maxModelLen}`,
  );
  const lora = requestedLora(b.lora_path, engine.served);
  const { temperature, topP } = readTemperatureTopPTopK(s);
  return {
    prompt,
    maxTokens: maxTokens as number,
    stream: b.stream === true,
    id: (b.rid as string | undefined) ?? randomUUID().replaceAll('-', ''),
    model: lora?.name ?? o.model,
    lora,
    temperature,
    topP,
  };
}

export function registerGenerate(app: FastifyInstance, engine: GenerateEngine): void {
  app.post('/generate', async (req, reply) => {
    if (engine.hang(reply)) return reply;
    const parsed = parse(req.body, engine);
    const leg = await engine.admitLeg(req.body as Record<string, unknown>, reply);
    // A prefill leg generates the first token alone, and hands its KV over then.
    if (leg && !leg.pull) parsed.maxTokens = 1;
    return serve(engine, req, reply, parsed, leg);
  });
}

function serve(
  engine: GenerateEngine,
  req: FastifyRequest,
  reply: FastifyReply,
  p: ParsedGenerate,
  leg: AdmittedLeg | undefined,
): Promise<unknown> {
  const started = performance.now();
  const output = mockOutput(p.prompt, p.maxTokens, engine.options.seed);
  const generated: number[] = [];
  const span = engine.requestSpan(req, {
    id: p.id,
    model: p.model,
    maxTokens: p.maxTokens,
    n: 1,
    temperature: p.temperature,
    topP: p.topP,
  });
  const run = engineRun({ prompt: p.prompt, lora: p.lora, cacheSalt: undefined, output }, span, () => generated.length);
  // A decode leg's prompt comes from its prefill worker; a prefill leg's KV goes once its token is out.
  const legRun: EngineRun = {
    ended: run.ended,
    job: (onTokens, onDone, onAbort) => ({
      ...run.job(
        (tokens, first) => {
          if (first) leg?.handOver?.(p.prompt.length);
          onTokens(tokens, first);
        },
        onDone,
        onAbort,
      ),
      remoteTokens: leg?.pull ? p.prompt.length : 0,
    }),
  };
  const metaInfo = (cached: number, done: boolean) => ({
    id: p.id,
    finish_reason: done ? { type: 'length', length: generated.length } : null,
    prompt_tokens: p.prompt.length,
    completion_tokens: generated.length,
    cached_tokens: cached,
    ...(done ? { e2e_latency: (performance.now() - started) / 1000 } : {}),
  });
  const answer = (cached: number, done: boolean) => ({
    text: detokenize(generated),
    output_ids: [...generated],
    meta_info: metaInfo(cached, done),
  });
  const rank = engine.rankFor(req);
  if (!p.stream) {
    void reply.header('x-data-parallel-rank', String(rank.dpRank));
    return runWhole(
      rank,
      reply,
      legRun,
      (t) => generated.push(...t),
      (cached) => answer(cached, true),
    );
  }
  reply.hijack();
  const res = reply.raw;
  const send = (data: unknown) => res.write(`data: ${JSON.stringify(data)}\n\n`);
  openEventStream(res, rank.dpRank);
  let sent = 0;
  // The mock's engine tells the prompt's cached tokens at the request's end, so the events before
  // the last carry 0 (SGLang's carry the count from the first); the gateway reads the last one's.
  runStreamed(
    rank,
    res,
    legRun,
    (tokens) => {
      generated.push(...tokens);
      if (generated.length < output.length && chunkDue(generated.length, sent, output.length, engine.options.streamInterval)) {
        sent = generated.length;
        send(answer(0, false));
      }
    },
    (cached) => {
      send(answer(cached, true));
      res.end('data: [DONE]\n\n');
    },
    (reason) => {
      send({ error: { message: `the engine stopped: ${reason}` } });
      res.destroy();
    },
  );
  return Promise.resolve(reply);
}
