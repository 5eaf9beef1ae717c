/**
 * `POST /admin/explain`: what routing would weigh for a request, booking nothing. The body is a
 * request as the proxy takes it (a completion's, a chat's, a Responses API request's or a
 * `/generate` body); the answer is its tokens and candidates, as the proxy would serve it (in a
 * prefill and a decode leg, or whole). A completion's batch of prompts, which the proxy routes
 * one prompt at a time, is explained prompt by prompt (`prompts`), each as if it came alone; an
 * SGLang batch, which goes whole to one worker, is weighed whole.
 * @internal
 * @module
 */

import { KvRouteError } from '../errors.js';
import type { AdminContext } from './admin-api.js';
import { skipsPrefill, splits } from './disaggregation.js';
import { EngineRefusal } from './engine-tokenize.js';
import { BadRequest, engineTokens, type ReadRequest, type RequestKind, readRequest } from './prompt.js';
import { batchPromptsOf, inScope, routingScope } from './scope.js';

/** The request kind of an explain body, told apart by the fields each carries. */
function kindOf(b: Record<string, unknown>): RequestKind {
  if (b.input !== undefined) return 'responses';
  if (b.messages !== undefined) return 'chat';
  if (b.text !== undefined || b.input_ids !== undefined) return 'generate';
  return 'completion';
}

/**
 * The explanation of a request body, as JSON-ready values (ids as bigints).
 * @throws {KvRouteError} `ERR_INVALID_ARG` for a body the proxy would refuse; {@link EngineRefusal} for a model no worker serves.
 */
export async function explain(ctx: AdminContext, body: unknown): Promise<Record<string, unknown>> {
  const b = (body ?? {}) as Record<string, unknown>;
  const kind = kindOf(b);
  let read: ReadRequest;
  try {
    read = readRequest(b, kind);
  } catch (err) {
    if (err instanceof BadRequest) throw new KvRouteError('ERR_INVALID_ARG', err.message);
    throw err;
  }
  if (read.batch) return { prompts: await Promise.all(read.batch.map((prompt) => explainOne(ctx, prompt, kind))) };
  return explainOne(ctx, read, kind);
}

async function explainOne(ctx: AdminContext, read: ReadRequest, kind: RequestKind): Promise<Record<string, unknown>> {
  // The engine tokenizer gets the workers' own refusal; a local one asks their model lists, as the proxy's answer would come from a worker.
  if (ctx.tokenizer.kind === 'local' && read.model !== undefined && ctx.fleet.servedByNone(read.model))
    throw new EngineRefusal(404, `The model \`${read.model}\` does not exist.`);
  const tokens = await engineTokens(ctx.tokenizer, read);
  // An SGLang batch is weighed whole, as the proxy routes it.
  const batch = read.batchInputs && (await Promise.all(read.batchInputs.map((input) => engineTokens(ctx.tokenizer, { ...read, input }))));
  const scope = routingScope(read.model, read.cacheSalt, ctx.fleet, read.batchModels);
  const pools = ctx.fleet.routableByRole();
  const weigh = (workers: readonly bigint[]) =>
    ctx.router.potentialLoads({
      requestId: 'explain',
      tokens,
      ...(batch ? { batchPrompts: batchPromptsOf(batch, scope) } : {}),
      allowedWorkers: workers.filter((id) => inScope(scope, id)),
      ...scope.hash,
    });
  // As the proxy serves it: in a prefill and a decode leg, or whole.
  const decoders = splits(ctx.fleet, read, kind, undefined);
  const decodeCandidates = decoders ? weigh(decoders) : [];
  const split = decoders !== undefined && !skipsPrefill(tokens.length, decodeCandidates, ctx.blockSize, ctx.bypassBelowTokens);
  const candidates = weigh(split ? pools.prefill : pools.whole);
  const legs = split ? { split, decodeCandidates } : { split };
  return { promptTokens: tokens.length, tokens, ...(batch ? { batchTokens: batch } : {}), candidates, ...legs };
}
