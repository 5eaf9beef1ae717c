/**
 * vLLM's `/tokenize` and `/detokenize` routes on the mock worker (the gateway's engine tokenizer
 * asks them).
 * @internal
 * @module
 */

import type { FastifyInstance } from 'fastify';
import { BadRequest, chatTokens, completionTokens, requestedLora, type Served } from './openai.js';
import type { ResolvedMockOptions } from './options.js';
import { detokenize } from './tokenizer.js';

export function registerTokenize(app: FastifyInstance, o: ResolvedMockOptions, served: Served & ResolvedMockOptions): void {
  app.post('/tokenize', async (req) => {
    const b = (req.body ?? {}) as Record<string, unknown>;
    requestedLora(b.model, served);
    let tokens: number[];
    if (b.messages !== undefined) tokens = chatTokens(b, o);
    else if (typeof b.prompt === 'string') tokens = completionTokens(b);
    else throw new BadRequest('prompt must be a string, or give messages');
    return { count: tokens.length, max_model_len: o.maxModelLen, tokens };
  });
  app.post('/detokenize', async (req) => {
    const b = (req.body ?? {}) as Record<string, unknown>;
    if (!Array.isArray(b.tokens) || !b.tokens.every((t) => Number.isInteger(t) && t >= 0))
      throw new BadRequest('tokens must be a list of token ids');
    return { prompt: detokenize(b.tokens as number[]) };
  });
}
