/**
 * The part of an SGLang `POST /generate` request the gateway reads: its prompt (`input_ids`,
 * routed as they are, or `text`, tokenized as a completion's prompt is, special tokens added as
 * SGLang's tokenizer adds them), `lora_path` (the adapter, which scopes the prompt's KV blocks
 * as a `model` naming an adapter does), `sampling_params.max_new_tokens` and `.n` (the output
 * the router expects), `priority` (the router's queue order, higher first as SGLang's default)
 * and `stream`. The body goes to the worker as it came.
 *
 * A batch (`text` or `input_ids` a list of prompts) runs on one SGLang server, whose answer is a
 * list: the gateway sends it whole to one worker, routed by all its prompts (the first as the
 * request's `tokens`, the others as its `batchPrompts`, each tokenized and booked there; with a
 * `lora_path` list, each under its own adapter, on a worker serving them all), with
 * the batch's sequences as its output (each prompt's `max_new_tokens` and `n` may differ: the
 * first one's are taken). SGLang's own router sends a batch where its first prompt routes.
 * `input_embeds` carry no tokens to route by and are refused.
 * @internal
 * @module
 */

import { MAX_PROMPTS_PER_BATCH } from '../limits.js';
import { BadRequest } from '../mock-worker/openai.js';
import type { ReadRequest } from './prompt.js';
import { positiveInteger } from './request-fields.js';
import type { PromptInput } from './tokenize.js';

/** SGLang's default `max_new_tokens`, the output the router expects when a request names none. */
const SGLANG_MAX_NEW_TOKENS = 128;

/** One prompt's input: a non-empty text (of `text`), or a non-empty list of token ids (of `input_ids`). */
function promptInput(p: unknown, field: 'text' | 'input_ids', at: string, model: string | undefined): PromptInput {
  if (field === 'text') {
    if (typeof p !== 'string') throw new BadRequest(`${at} must be a string`);
    if (p === '') throw new BadRequest(`${at} must be a non-empty string`);
    return { kind: 'text', text: p, ...(model === undefined ? {} : { model }) };
  }
  if (!Array.isArray(p) || p.length === 0) throw new BadRequest(`${at} must be a non-empty list of token ids`);
  for (const [i, id] of p.entries())
    if (!Number.isSafeInteger(id) || (id as number) < 0) throw new BadRequest(`${at}[${i}] must be a token id (a non-negative integer)`);
  return { kind: 'ids', ids: p as number[] };
}

/**
 * The prompts of `text` or `input_ids` (exactly one of them), each under its adapter (`models[i]`),
 * and whether as a batch (a list, even of one).
 */
function readPrompts(b: Record<string, unknown>, models: (i: number) => string | undefined): { inputs: PromptInput[]; batch: boolean } {
  if (b.input_embeds !== undefined && b.input_embeds !== null)
    throw new BadRequest('input_embeds carry no tokens to route by: send text or input_ids');
  const text = b.text ?? undefined;
  const ids = b.input_ids ?? undefined;
  if ((text === undefined) === (ids === undefined)) throw new BadRequest('give exactly one of text and input_ids');
  const field: 'text' | 'input_ids' = text !== undefined ? 'text' : 'input_ids';
  const given = text ?? ids;
  if (text !== undefined && typeof text !== 'string' && !Array.isArray(text))
    throw new BadRequest('text must be a string or a list of strings');
  if (ids !== undefined && !Array.isArray(ids))
    throw new BadRequest('input_ids must be a list of token ids, or a list of such lists for a batch');
  const batch = Array.isArray(given) && (text !== undefined || Array.isArray(given[0]));
  if (!batch) return { inputs: [promptInput(given, field, field, models(0))], batch };
  const prompts = given as unknown[];
  if (prompts.length === 0) throw new BadRequest(`${field} must hold a prompt`);
  if (prompts.length > MAX_PROMPTS_PER_BATCH + 1)
    throw new BadRequest(`${field} holds ${prompts.length} prompts; the gateway routes a batch of at most ${MAX_PROMPTS_PER_BATCH + 1}`);
  // Every prompt is checked, as the engine will read each.
  return { inputs: prompts.map((p, i) => promptInput(p, field, `${field}[${i}]`, models(i))), batch };
}

/**
 * Each prompt's adapter, from `lora_path`: one name for all, or a list with one per prompt of a
 * batch (SGLang takes prompt i's from entry i), null or empty naming none.
 */
function readAdapters(b: Record<string, unknown>): { models: (i: number) => string | undefined; perPrompt: boolean } {
  const lora = b.lora_path;
  const name = (v: unknown, fault: string): string | undefined => {
    if (v !== undefined && v !== null && typeof v !== 'string') throw new BadRequest(fault);
    return typeof v === 'string' && v !== '' ? v : undefined;
  };
  if (!Array.isArray(lora)) {
    const model = name(lora, 'lora_path must be a string, or a list of them for a batch');
    return { models: () => model, perPrompt: false };
  }
  const models = lora.map((v, i) => name(v, `lora_path[${i}] must be a string or null`));
  return { models: (i) => models[i], perPrompt: true };
}

/** A field a batch may give once for all prompts or as a list, one per prompt: the first prompt's. */
function firstOf(value: unknown): unknown {
  return Array.isArray(value) ? value[0] : value;
}

/** `sampling_params` of the first prompt, an object when present. */
function samplingParams(b: Record<string, unknown>): Record<string, unknown> {
  const s = firstOf(b.sampling_params);
  if (s === undefined || s === null) return {};
  if (typeof s !== 'object' || Array.isArray(s)) throw new BadRequest('sampling_params must be an object, or a list of them for a batch');
  return s as Record<string, unknown>;
}

/** Reads an SGLang `/generate` request (an object: `readRequest` checked it). */
export function readGenerateRequest(b: Record<string, unknown>): ReadRequest {
  const adapters = readAdapters(b);
  const { inputs, batch } = readPrompts(b, adapters.models);
  if (adapters.perPrompt && batch && (b.lora_path as unknown[]).length < inputs.length)
    throw new BadRequest(
      `lora_path names ${(b.lora_path as unknown[]).length} adapters for ${inputs.length} prompts: give one (or null) per prompt`,
    );
  const model = adapters.models(0);
  const count = inputs.length;
  const sampling = samplingParams(b);
  if (b.stream !== undefined && b.stream !== null && typeof b.stream !== 'boolean') throw new BadRequest('stream must be a boolean');
  return {
    input: inputs[0],
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
    // A batch's sequences all run on the worker chosen, each holding its own output blocks.
    choicesPerPrompt: count * (positiveInteger(sampling.n) ?? 1),
    // A batch's answer is a list, even of one, which one bootstrap room cannot serve.
    ...(batch ? { wholeBatch: count } : {}),
    ...(count > 1 ? { batchInputs: inputs.slice(1) } : {}),
    // Adapters per prompt (a `lora_path` list) scope the worker and each prompt's blocks.
    ...(count > 1 && adapters.perPrompt ? { batchModels: inputs.slice(1).map((_, i) => adapters.models(i + 1)) } : {}),
  };
}
