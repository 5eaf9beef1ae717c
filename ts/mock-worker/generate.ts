/**
 * SGLang's native `POST /generate` on the mock worker, as an SGLang server answers it: a prompt
 * as `text` or `input_ids`, or a batch of them (a list of texts, a list of token-id lists),
 * `sampling_params` (`max_new_tokens`, 128 by default, `temperature`, `top_p`; for a batch one
 * object for all or a list, one per prompt), `rid` (a list for a batch), `return_logprob` (the
 * prompt's and output's log probabilities in `meta_info`, a decode leg's prompt left to its
 * prefill worker), `lora_path` and `stream`. The answer is `{text, output_ids, meta_info}` (a list of them, in the batch's order),
 * the `meta_info` holding the request's id, its `finish_reason` (`{type: "length", length}` once
 * done, `null` before), `prompt_tokens`, `completion_tokens` and `cached_tokens`; streamed, each
 * event carries the text and output ids so far (SGLang's default, not increments), a batch's
 * events their prompt's `index`, and the stream ends with `data: [DONE]` once every prompt is
 * done. With `disaggregationMode` the request is one leg of an SGLang-disaggregated request, met
 * in its bootstrap room as a completion's is (bootstrap.ts). SGLang's `POST /abort_request`
 * (`rid`, or `abort_all`) ends the requests named at once, answered with what they generated and
 * the finish reason `abort`. The mock runs one sequence per prompt: `n` above 1 and
 * `input_embeds` get 400.
 * @internal
 * @module
 */

import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { BadRequest } from './bad-request.js';
import { type AdmittedLeg, legFailure } from './bootstrap.js';
import { type EngineRun, engineRun, openEventStream, runStreamed, runWhole } from './engine-run.js';
import { positionLogprobs } from './logprobs.js';
import { checkFits, completionTokens, requestedLora } from './openai.js';
import { mockOutput } from './output.js';
import type { LiveRequest, LoraRef } from './rank.js';
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

/** One prompt of a request, with its own sampling. */
interface GenerateItem {
  prompt: number[];
  maxTokens: number;
  id: string;
  temperature: number;
  topP: number;
  /** `return_logprob`: the prompt's and the output's log probabilities in `meta_info`. */
  logprobs: boolean;
  /** Its adapter (`lora_path`, entry i of a batch's list, as SGLang takes it), and the model it names. */
  lora: LoraRef | undefined;
  model: string;
}

interface ParsedGenerate {
  items: GenerateItem[];
  /** A batch: the answer is a list, and streamed events name their prompt's `index`. */
  batch: boolean;
  stream: boolean;
}

/** The prompts of `text` or `input_ids` (exactly one), and whether they came as a batch. */
function readPrompts(b: Record<string, unknown>): { prompts: number[][]; batch: boolean } {
  if (b.input_embeds !== undefined && b.input_embeds !== null)
    throw new BadRequest('the mock worker takes text or input_ids, not input_embeds');
  const given = [b.text, b.input_ids].filter((v) => v !== undefined && v !== null);
  if (given.length !== 1) throw new BadRequest('give exactly one of text and input_ids');
  const input = given[0];
  const batch = Array.isArray(input) && (typeof input[0] === 'string' || Array.isArray(input[0]));
  const prompts = (batch ? (input as unknown[]) : [input]).map((p, i) => {
    const tokens = completionTokens({ prompt: p });
    if (tokens.length === 0) throw new BadRequest(batch ? `prompt ${i} is empty` : 'the prompt is empty');
    return tokens;
  });
  if (prompts.length === 0) throw new BadRequest('the batch is empty');
  return { prompts, batch };
}

/** Item `i`'s entry of a field that a batch may give per prompt (`what`) or once for all. */
function perPrompt(value: unknown, i: number, count: number, batch: boolean, what: string): unknown {
  if (!batch || !Array.isArray(value)) return value;
  if (value.length !== count) throw new BadRequest(`${what} has ${value.length} entries for ${count} prompts`);
  return value[i];
}

function parseItem(
  b: Record<string, unknown>,
  prompt: number[],
  i: number,
  count: number,
  batch: boolean,
  engine: ResponsesEngine,
): GenerateItem {
  const sampling = perPrompt(b.sampling_params ?? {}, i, count, batch, 'sampling_params') ?? {};
  if (sampling === null || typeof sampling !== 'object' || Array.isArray(sampling))
    throw new BadRequest('sampling_params must be an object');
  const s = sampling as Record<string, unknown>;
  const maxTokens = s.max_new_tokens ?? DEFAULT_MAX_NEW_TOKENS;
  if (!Number.isSafeInteger(maxTokens) || (maxTokens as number) < 1)
    throw new BadRequest('sampling_params.max_new_tokens must be a positive integer');
  if (s.n !== undefined && s.n !== 1) throw new BadRequest('the mock worker runs one sequence per prompt (n 1)');
  const rid = perPrompt(b.rid, i, count, batch, 'rid');
  const logprobs = perPrompt(b.return_logprob, i, count, batch, 'return_logprob') ?? false;
  if (typeof logprobs !== 'boolean') throw new BadRequest('return_logprob must be a boolean (a list of them for a batch)');
  if (rid !== undefined && typeof rid !== 'string') throw new BadRequest('rid must be a string (a list of them for a batch)');
  const o = engine.options;
  checkFits(
    prompt.length,
    maxTokens as number,
    o,
    `the request needs ${prompt.length + (maxTokens as number)} tokens, more than ${o.maxModelLen}`,
  );
  const { temperature, topP } = readTemperatureTopPTopK(s);
  const lora = requestedLora(perPrompt(b.lora_path, i, count, batch, 'lora_path'), engine.served);
  return {
    prompt,
    maxTokens: maxTokens as number,
    id: (rid as string | undefined) ?? randomUUID().replaceAll('-', ''),
    temperature,
    topP,
    logprobs,
    lora,
    model: lora?.name ?? engine.options.model,
  };
}

function parse(body: unknown, engine: ResponsesEngine): ParsedGenerate {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new BadRequest('the body must be a JSON object');
  const b = body as Record<string, unknown>;
  const { prompts, batch } = readPrompts(b);
  if (b.stream !== undefined && b.stream !== null && typeof b.stream !== 'boolean') throw new BadRequest('stream must be a boolean');
  const items = prompts.map((prompt, i) => parseItem(b, prompt, i, prompts.length, batch, engine));
  return { items, batch, stream: b.stream === true };
}

export function registerGenerate(app: FastifyInstance, engine: GenerateEngine): void {
  const running: Running = new Map();
  // SGLang's: the request named by `rid` (or every one, with `abort_all`) ends now; 200 either way.
  app.post('/abort_request', async (req, reply) => {
    const b = (req.body ?? {}) as { rid?: unknown; abort_all?: unknown };
    if (b === null || typeof b !== 'object' || Array.isArray(b)) throw new BadRequest('the body must be a JSON object');
    const ids = b.abort_all === true ? [...running.keys()] : typeof b.rid === 'string' ? [b.rid] : [];
    for (const id of ids) for (const abort of [...(running.get(id) ?? [])]) abort();
    return reply.code(200).send();
  });
  app.post('/generate', async (req, reply) => {
    if (engine.hang(reply)) return reply;
    const parsed = parse(req.body, engine);
    const leg = await engine.admitLeg(req.body as Record<string, unknown>, reply);
    if (leg && parsed.batch) throw new BadRequest('the mock worker meets one prompt per bootstrap room, not a batch');
    // A prefill leg generates the first token alone, and hands its KV over then.
    if (leg && !leg.pull) parsed.items[0].maxTokens = 1;
    return serve(engine, req, reply, parsed, leg, running);
  });
}

/** One prompt's run: its engine request, and its answer (or event) so far. */
interface ItemRun {
  id: string;
  run: EngineRun;
  generated: number[];
  output: number[];
  /** Ended by `/abort_request`: its finish reason is `abort`. */
  aborted: boolean;
  /** A prefill leg whose KV reached no decode worker (it left the room): unstreamed, it fails with 500. */
  transferFailed: boolean;
  answer(cached: number, done: boolean): Record<string, unknown>;
}

/** The generations running, by request id: how to abort each (`/abort_request`). */
type Running = Map<string, Set<() => void>>;

/** What SGLang says of a request `/abort_request` ended. */
const ABORTED = { type: 'abort', message: 'Abort in waiting queue or running batch by /abort_request.' };

function itemRun(engine: GenerateEngine, req: FastifyRequest, item: GenerateItem, leg: AdmittedLeg | undefined): ItemRun {
  const started = performance.now();
  const output = mockOutput(item.prompt, item.maxTokens, engine.options.seed);
  const generated: number[] = [];
  const span = engine.requestSpan(req, {
    id: item.id,
    model: item.model,
    maxTokens: item.maxTokens,
    n: 1,
    temperature: item.temperature,
    topP: item.topP,
  });
  const run = engineRun({ prompt: item.prompt, lora: item.lora, cacheSalt: undefined, output }, span, () => generated.length);
  const r: ItemRun = {
    id: item.id,
    generated,
    output,
    aborted: false,
    transferFailed: false,
    // A decode leg's prompt comes from its prefill worker; a prefill leg's KV goes once its token is out.
    run: {
      ended: run.ended,
      job: (onTokens, onDone, onAbort) => ({
        ...run.job(
          (tokens, first) => {
            if (first && leg?.handOver?.(item.prompt.length) === false) r.transferFailed = true;
            onTokens(tokens, first);
          },
          onDone,
          onAbort,
        ),
        remoteTokens: leg?.pull ? item.prompt.length : 0,
      }),
    },
    answer: (cached, done) => ({
      text: detokenize(generated),
      output_ids: [...generated],
      meta_info: {
        id: item.id,
        finish_reason: done ? (r.aborted ? ABORTED : { type: 'length', length: generated.length }) : null,
        prompt_tokens: item.prompt.length,
        completion_tokens: generated.length,
        cached_tokens: cached,
        // A decode leg computed no prompt: its prefill worker holds those (the gateway merges them).
        ...(item.logprobs ? tokenLogprobs(leg?.pull ? [] : item.prompt, item.prompt, generated) : {}),
        ...(done ? { e2e_latency: (performance.now() - started) / 1000 } : {}),
      },
    }),
  };
  return r;
}

/**
 * A rank that runs `r` so that `/abort_request` can end it: the engine drops it, and it ends as
 * done, its finish reason `abort` (SGLang answers an aborted request so, with what it generated).
 */
function abortable(rank: { run(job: LiveRequest): () => void }, r: ItemRun, running: Running): { run(job: LiveRequest): () => void } {
  return {
    run: (job) => {
      const aborts = running.get(r.id) ?? new Set<() => void>();
      running.set(r.id, aborts);
      const forget = () => {
        aborts.delete(abort);
        if (aborts.size === 0 && running.get(r.id) === aborts) running.delete(r.id);
      };
      const cancel = rank.run({
        ...job,
        onDone: (cached) => {
          forget();
          job.onDone(cached);
        },
        onAbort: (reason) => {
          forget();
          job.onAbort(reason);
        },
      });
      function abort(): void {
        forget();
        cancel();
        r.aborted = true;
        job.onDone(0);
      }
      aborts.add(abort);
      return () => {
        forget();
        cancel();
      };
    },
  };
}

/**
 * SGLang's `input_token_logprobs` and `output_token_logprobs`: `[logprob, token id, text]` per
 * position (the text `null`, as without `return_text_in_logprobs`), the prompt's first `null`
 * (nothing precedes it). `computed` is the part of the prompt this worker ran.
 */
function tokenLogprobs(computed: readonly number[], prompt: readonly number[], output: readonly number[]): Record<string, unknown> {
  return {
    input_token_logprobs: computed.map((token, i) => [i === 0 ? null : positionLogprobs(i, token, 0).logprob, token, null]),
    output_token_logprobs: output.map((token, i) => [positionLogprobs(prompt.length + i, token, 0).logprob, token, null]),
  };
}

function serve(
  engine: GenerateEngine,
  req: FastifyRequest,
  reply: FastifyReply,
  p: ParsedGenerate,
  leg: AdmittedLeg | undefined,
  running: Running,
): Promise<unknown> {
  const runs = p.items.map((item) => itemRun(engine, req, item, leg));
  const rankFor = engine.rankFor(req);
  const rank = (r: ItemRun) => abortable(rankFor, r, running);
  if (!p.stream) {
    void reply.header('x-data-parallel-rank', String(rankFor.dpRank));
    const answers = runs.map((r) =>
      runWhole(
        rank(r),
        reply,
        r.run,
        (t) => r.generated.push(...t),
        (cached) => r.answer(cached, true),
      ).then((answer) => {
        if (r.transferFailed) throw legFailure('the KV transfer failed: the decode worker left the bootstrap room');
        return answer;
      }),
    );
    return p.batch ? Promise.all(answers) : answers[0];
  }
  reply.hijack();
  const res = reply.raw;
  const send = (data: unknown) => res.write(`data: ${JSON.stringify(data)}\n\n`);
  openEventStream(res, rankFor.dpRank);
  let left = runs.length;
  let stopped = false;
  // The mock's engine tells the prompt's cached tokens at the request's end, so the events before
  // the last carry 0 (SGLang's carry the count from the first); the gateway reads the last one's.
  runs.forEach((r, index) => {
    const event = (cached: number, done: boolean) => (p.batch ? { ...r.answer(cached, done), index } : r.answer(cached, done));
    let sent = 0;
    runStreamed(
      rank(r),
      res,
      r.run,
      (tokens) => {
        r.generated.push(...tokens);
        if (r.generated.length < r.output.length && chunkDue(r.generated.length, sent, r.output.length, engine.options.streamInterval)) {
          sent = r.generated.length;
          send(event(0, false));
        }
      },
      (cached) => {
        if (stopped) return;
        send(event(cached, true));
        if (--left === 0) res.end('data: [DONE]\n\n');
      },
      (reason) => {
        if (stopped) return;
        stopped = true;
        send({ error: { message: `the engine stopped: ${reason}` } });
        res.destroy();
      },
    );
  });
  return Promise.resolve(reply);
}
