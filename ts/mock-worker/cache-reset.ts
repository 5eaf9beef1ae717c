/**
 * Dropping the mock worker's prefix cache on demand, as the engines' own routes do: vLLM's
 * `POST /reset_prefix_cache` (served in its dev mode) answers 200 with no body, SGLang's
 * `POST /flush_cache` (GET too) its "Cache flushed." text. Every rank drops its cache and
 * publishes `AllBlocksCleared`, so an index following its KV events forgets it too. Like both
 * engines, the mock will not drop a cache its running requests hold: it then answers 400 and
 * keeps it.
 * @internal
 * @module
 */

import type { FastifyInstance, FastifyReply } from 'fastify';
import { errorBody } from './openai.js';

/** SGLang's answer to `/flush_cache`, whether or not it flushed (its status says). */
const SGLANG_FLUSHED =
  'Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n';

/**
 * Drops every rank's prefix cache; false when some rank's running requests hold theirs. Every rank
 * is tried, so that an idle rank drops its cache even when another is busy.
 */
export function resetAllCaches(ranks: readonly { resetPrefixCache(): boolean }[]): boolean {
  return ranks.reduce((all, rank) => rank.resetPrefixCache() && all, true);
}

export function registerCacheReset(app: FastifyInstance, ranks: () => readonly { resetPrefixCache(): boolean }[]): void {
  const resetAll = () => resetAllCaches(ranks());
  app.post('/reset_prefix_cache', async (_req, reply) =>
    resetAll() ? reply.code(200).send() : reply.code(400).send(errorBody('the prefix cache is in use by running requests', 400, null)),
  );
  const flush = async (_req: unknown, reply: FastifyReply) =>
    reply
      .code(resetAll() ? 200 : 400)
      .type('text/plain')
      .send(SGLANG_FLUSHED);
  app.post('/flush_cache', flush);
  app.get('/flush_cache', flush);
}
