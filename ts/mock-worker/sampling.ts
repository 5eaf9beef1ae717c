/**
 * A completion's or chat completion's sampling fields, read and refused as vLLM reads and refuses
 * them, so that a client (or a gateway) tried against the mock worker meets vLLM's answers: the
 * request schema's checks first (types, the logprob fields, `stream_options` without a stream),
 * before the model and the prompt are looked at; then, once the prompt is read, the range checks
 * of vLLM's `SamplingParams`, in its order and words, with the field named in the error body.
 *
 * The mock model samples nothing: temperature, top-p and the penalties are checked and change no
 * text. What shapes the answer is kept: stop strings and stop tokens (see `stop.ts`), log
 * probabilities (`logprobs.ts`), `echo`, `seed`, which picks the text as the worker's seed does, and
`return_token_ids`.
 * @module
 */

import { floatRepr } from '../chat/python-str.js';
import { BadRequest, invalidField } from './bad-request.js';

/** What a request asks of its output, beyond its length. */
export interface Sampling {
  /** Stop strings: the text ends before the first one generated (with it, with `includeStopStr`). */
  stop: string[];
  /** Stop tokens: the sequence ends on one (its text left out unless `includeStopStr`). */
  stopTokenIds: number[];
  /** vLLM's `include_stop_str_in_output`. */
  includeStopStr: boolean;
  /** Output tokens before a stop token or string may end the sequence. */
  minTokens: number;
  /** Alternatives reported per output token (0: the sampled token's alone), or undefined for no log probabilities. */
  logprobs: number | undefined;
  /** Completions: the prompt's text comes first. Chat: the last message's content comes first when it is the assistant's. */
  echo: boolean;
  /** The request's `seed` (undefined: the worker's), which picks the generated text. */
  seed: number | undefined;
  /** vLLM's `return_token_ids`: the prompt's and the output's token ids beside the text. */
  returnTokenIds: boolean;
}

/** vLLM's default `--max-logprobs`: the most alternatives a request may ask for per token. */
export const MAX_LOGPROBS = 20;
/** The mock tokenizer's vocabulary (one token per byte): what a request for all logprobs (-1) asks for. */
export const VOCAB_SIZE = 256;
/** Below this temperature vLLM samples greedily, and then only one sequence a prompt. */
const GREEDY_TEMPERATURE = 1e-5;

type Kind = 'number' | 'integer' | 'boolean';

/** A field of the request schema: absent or null reads as undefined; anything but `kind` is refused. */
function field(b: Record<string, unknown>, name: string, kind: Kind): number | boolean | undefined {
  const v = b[name];
  if (v === undefined || v === null) return undefined;
  const ok = kind === 'boolean' ? typeof v === 'boolean' : typeof v === 'number' && (kind === 'number' || Number.isSafeInteger(v));
  if (!ok) throw new BadRequest(`${name} must be ${kind === 'integer' ? 'an integer' : `a ${kind}`}, got ${JSON.stringify(v)}`);
  return v as number | boolean;
}

const num = (b: Record<string, unknown>, name: string) => field(b, name, 'number') as number | undefined;
const int = (b: Record<string, unknown>, name: string) => field(b, name, 'integer') as number | undefined;
const bool = (b: Record<string, unknown>, name: string) => field(b, name, 'boolean') as boolean | undefined;

/** `stop`: a string or a list of strings. */
function readStop(v: unknown): string[] {
  if (v === undefined || v === null) return [];
  if (typeof v === 'string') return [v];
  if (Array.isArray(v) && v.every((s) => typeof s === 'string')) return v;
  throw new BadRequest(`stop must be a string or a list of strings, got ${JSON.stringify(v)}`);
}

/** `stop_token_ids`: a list of token ids, duplicates dropped as vLLM drops them. */
function readStopTokenIds(v: unknown): number[] {
  if (v === undefined || v === null) return [];
  if (Array.isArray(v) && v.every((t) => Number.isSafeInteger(t))) return [...new Set(v as number[])];
  throw new BadRequest(`stop_token_ids must contain only integers, got ${JSON.stringify(v)}.`);
}

/**
 * The request schema's checks, which vLLM makes before it looks at the model or the prompt: every
 * sampling field's type, the logprob fields, and `stream_options` only with `stream`.
 * @throws {BadRequest} in vLLM's words where vLLM has them.
 */
export function checkSamplingSchema(b: Record<string, unknown>, chat: boolean): void {
  for (const name of ['temperature', 'top_p', 'min_p', 'presence_penalty', 'frequency_penalty', 'repetition_penalty']) num(b, name);
  for (const name of ['n', 'top_k', 'min_tokens', 'seed', 'max_tokens', 'max_completion_tokens', 'prompt_logprobs']) int(b, name);
  for (const name of ['echo', 'include_stop_str_in_output', 'ignore_eos', 'return_token_ids']) bool(b, name);
  readStop(b.stop);
  readStopTokenIds(b.stop_token_ids);
  // Python's truthiness: an empty object is no options.
  const options = b.stream_options;
  const given =
    options !== undefined && options !== null && options !== false && !(typeof options === 'object' && Object.keys(options).length === 0);
  if (given && b.stream !== true) throw invalidField('Stream options can only be defined when `stream=True`.', 'stream_options');
  if (b.prompt_logprobs !== undefined && b.prompt_logprobs !== null)
    throw new BadRequest('prompt_logprobs are not modelled by the mock worker');
  if (chat) {
    bool(b, 'logprobs');
    const top = int(b, 'top_logprobs');
    if (top !== undefined) {
      if (top < 0 && top !== -1) throw invalidField('`top_logprobs` must be a positive value or -1.', 'top_logprobs', String(top));
      if (top !== 0 && !b.logprobs) throw invalidField('when using `top_logprobs`, `logprobs` must be set to true.', 'top_logprobs');
    }
  } else {
    const logprobs = int(b, 'logprobs');
    if (logprobs !== undefined && logprobs < 0) throw invalidField('`logprobs` must be a positive value.', 'logprobs', String(logprobs));
  }
}

/**
 * `temperature`, `top_p` and `top_k` (vLLM's defaults when absent: 1, 1, 0), each type-checked and
 * then range-checked as vLLM's `SamplingParams` checks them, in its order and words. The
 * Responses API has these three of the sampling fields.
 * @throws {BadRequest} in vLLM's words.
 */
export function readTemperatureTopPTopK(b: Record<string, unknown>): { temperature: number; topP: number; topK: number } {
  const temperature = num(b, 'temperature') ?? 1;
  const t = floatRepr(temperature);
  if (!Number.isFinite(temperature)) throw invalidField(`temperature must be a finite number, got ${t}.`, 'temperature', t);
  if (temperature < 0) throw invalidField(`temperature must be non-negative, got ${t}.`, 'temperature', t);
  if (temperature > 2) throw invalidField(`temperature must be in [0, 2], got ${t}.`, 'temperature', t);
  const topP = num(b, 'top_p') ?? 1;
  if (!(topP > 0 && topP <= 1)) throw invalidField(`top_p must be in (0, 1], got ${floatRepr(topP)}.`, 'top_p', floatRepr(topP));
  const topK = int(b, 'top_k') ?? 0;
  if (topK < -1) throw new BadRequest(`top_k must be 0 (disable), or at least 1, got ${topK}.`);
  return { temperature, topP, topK };
}

/**
 * The sampling fields of a request whose schema passed {@link checkSamplingSchema}, checked as
 * vLLM's `SamplingParams` checks them once the prompt is read (in its order).
 * @param maxTokens the output length the request asked for (`max_tokens`, a chat's `max_completion_tokens` first), unchecked
 * @param n the sequences a prompt samples, unchecked
 * @param maxSamples the most sequences the mock samples from a prompt (vLLM's `VLLM_MAX_N_SEQUENCES`)
 * @throws {BadRequest} in vLLM's words, naming the field where vLLM does.
 */
export function readSampling(b: Record<string, unknown>, chat: boolean, maxTokens: number, n: number, maxSamples: number): Sampling {
  if (n < 1) throw new BadRequest(`n must be at least 1, got ${n}.`);
  if (n > maxSamples) throw new BadRequest(`n must be at most ${maxSamples}, got ${n}.`);
  for (const name of ['presence_penalty', 'frequency_penalty']) {
    const v = num(b, name) ?? 0;
    if (!(v >= -2 && v <= 2)) throw new BadRequest(`${name} must be in [-2, 2], got ${floatRepr(v)}.`);
  }
  const repetition = num(b, 'repetition_penalty') ?? 1;
  if (!Number.isFinite(repetition)) throw new BadRequest(`repetition_penalty must be a finite number, got ${floatRepr(repetition)}.`);
  if (repetition <= 0) throw new BadRequest(`repetition_penalty must be greater than zero, got ${floatRepr(repetition)}.`);
  const { temperature } = readTemperatureTopPTopK(b);
  const minP = num(b, 'min_p') ?? 0;
  if (!(minP >= 0 && minP <= 1)) throw new BadRequest(`min_p must be in [0, 1], got ${floatRepr(minP)}.`);
  if (maxTokens < 1) throw invalidField(`max_tokens must be at least 1, got ${maxTokens}.`, 'max_tokens', String(maxTokens));
  const minTokens = int(b, 'min_tokens') ?? 0;
  if (minTokens < 0) throw new BadRequest(`min_tokens must be greater than or equal to 0, got ${minTokens}.`);
  if (minTokens > maxTokens) throw new BadRequest(`min_tokens must be less than or equal to max_tokens=${maxTokens}, got ${minTokens}.`);
  const stop = readStop(b.stop);
  if (stop.some((s) => s === '')) throw new BadRequest('stop cannot contain an empty string.');
  if (temperature < GREEDY_TEMPERATURE && n > 1) throw new BadRequest(`n must be 1 when using greedy sampling, got ${n}.`);
  let logprobs = chat ? (b.logprobs === true ? (int(b, 'top_logprobs') ?? 0) : undefined) : int(b, 'logprobs');
  if (logprobs === -1) logprobs = VOCAB_SIZE;
  if (logprobs !== undefined && logprobs > MAX_LOGPROBS)
    throw invalidField(
      `Requested sample logprobs of ${logprobs}, which is greater than max allowed: ${MAX_LOGPROBS}`,
      'logprobs',
      String(logprobs),
    );
  const seed = int(b, 'seed');
  return {
    stop,
    stopTokenIds: readStopTokenIds(b.stop_token_ids),
    includeStopStr: bool(b, 'include_stop_str_in_output') ?? false,
    minTokens,
    logprobs,
    echo: bool(b, 'echo') ?? false,
    // vLLM reads a seed of -1 as none.
    seed: seed === -1 ? undefined : seed,
    returnTokenIds: bool(b, 'return_token_ids') ?? false,
  };
}
