/**
 * The part of an SGLang `POST /generate` request the gateway reads: its one prompt (`input_ids`,
 * routed as they are, or `text`, tokenized as a completion's prompt is, special tokens added as
 * SGLang's tokenizer adds them), `lora_path` (the adapter, which scopes the prompt's KV blocks
 * as a `model` naming an adapter does), `sampling_params.max_new_tokens` and `.n` (the output
 * the router expects), `priority` (the router's queue order, higher first as SGLang's default)
 * and `stream`. The body goes to the worker as it came.
 *
 * A batch (`text` or `input_ids` a list of prompts, or `sampling_params` a list) is refused: it
 * runs on one worker, so routing it by one prompt would book the others where their prefixes may
 * not be. `input_embeds` carry no tokens to route by and are refused too.
 * @internal
 * @module
 */

import { BadRequest } from '../mock-worker/openai.js';
import type { ReadRequest } from './prompt.js';
import type { PromptInput } from './tokenize.js';

/** SGLang's default `max_new_tokens`, the output the router expects when a request names none. */
const SGLANG_MAX_NEW_TOKENS = 128;

const ONE_PROMPT = 'kvroute routes each prompt by its own prefix: send one prompt per /generate request';

const prompts = (n: number) => `${n} prompt${n === 1 ? '' : 's'}`;

/** The prompt of `text` or `input_ids`, exactly one of them. */
function readPromptInput(b: Record<string, unknown>, model: string | undefined): PromptInput {
  if (b.input_embeds !== undefined && b.input_embeds !== null)
    throw new BadRequest('input_embeds carry no tokens to route by: send text or input_ids');
  const text = b.text ?? undefined;
  const ids = b.input_ids ?? undefined;
  if ((text === undefined) === (ids === undefined)) throw new BadRequest('give exactly one of text and input_ids');
  if (text !== undefined) {
    if (Array.isArray(text)) throw new BadRequest(`text is a list of ${prompts(text.length)} (a batch); ${ONE_PROMPT}`);
    if (typeof text !== 'string' || text === '') throw new BadRequest('text must be a non-empty string');
    return { kind: 'text', text, ...(model === undefined ? {} : { model }) };
  }
  if (!Array.isArray(ids) || ids.length === 0) throw new BadRequest('input_ids must be a non-empty list of token ids');
  if (Array.isArray(ids[0])) throw new BadRequest(`input_ids is a list of ${prompts(ids.length)} (a batch); ${ONE_PROMPT}`);
  for (const [i, id] of ids.entries())
    if (!Number.isSafeInteger(id) || (id as number) < 0)
      throw new BadRequest(`input_ids[${i}] must be a token id (a non-negative integer)`);
  return { kind: 'ids', ids: ids as number[] };
}

/** `sampling_params`, an object when present. */
function samplingParams(b: Record<string, unknown>): Record<string, unknown> {
  const s = b.sampling_params;
  if (s === undefined || s === null) return {};
  if (Array.isArray(s)) throw new BadRequest(`sampling_params is a list, one per prompt of a batch; ${ONE_PROMPT}`);
  if (typeof s !== 'object') throw new BadRequest('sampling_params must be an object');
  return s as Record<string, unknown>;
}

/** `v` when it is a positive safe integer (the worker checks the field otherwise). */
function positiveInteger(v: unknown): number | undefined {
  return Number.isSafeInteger(v) && (v as number) > 0 ? (v as number) : undefined;
}

/** Reads an SGLang `/generate` request (an object: `readRequest` checked it). */
export function readGenerateRequest(b: Record<string, unknown>): ReadRequest {
  if (b.lora_path !== undefined && b.lora_path !== null && typeof b.lora_path !== 'string')
    throw new BadRequest(`lora_path is a list, one per prompt of a batch; ${ONE_PROMPT}`);
  const model = typeof b.lora_path === 'string' && b.lora_path !== '' ? b.lora_path : undefined;
  const input = readPromptInput(b, model);
  const sampling = samplingParams(b);
  if (b.stream !== undefined && b.stream !== null && typeof b.stream !== 'boolean') throw new BadRequest('stream must be a boolean');
  return {
    input,
    stream: b.stream === true,
    // Every event carries the request's `meta_info`: nothing is asked on the client's behalf.
    clientWantsUsage: true,
    forward: JSON.stringify(b),
    model,
    cacheSalt: undefined,
    // SGLang serves higher priorities first (unless --schedule-low-priority-values-first); the
    // field read here is vLLM's way round.
    priority: Number.isSafeInteger(b.priority) ? -(b.priority as number) : undefined,
    maxOutputTokens: positiveInteger(sampling.max_new_tokens) ?? SGLANG_MAX_NEW_TOKENS,
    truncation: undefined,
    choicesPerPrompt: positiveInteger(sampling.n) ?? 1,
  };
}
