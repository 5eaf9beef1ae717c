/**
 * Bearer-token checks for the proxy (API keys; also as `x-api-key`) and the admin and indexer API (one token).
 * Tokens are compared as SHA-256 digests with `timingSafeEqual`, so neither a key's length nor
 * its prefix leaks through timing.
 * @internal
 * @module
 */

import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';

const digest = (s: string) => createHash('sha256').update(s).digest();

/**
 * A Fastify `onRequest` hook admitting requests that carry one of `tokens`; none: admits all.
 * The token comes as `Authorization: Bearer …`, or with `apiKeyHeader` also as Anthropic's
 * `x-api-key` (what Anthropic's SDKs send to the Messages API).
 */
export function bearerGuard(tokens: readonly string[], onReject: (reply: FastifyReply) => FastifyReply, apiKeyHeader = false) {
  const digests = tokens.map(digest);
  return async (req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => {
    if (digests.length === 0) return undefined;
    const header = req.headers.authorization;
    const apiKey = apiKeyHeader ? req.headers['x-api-key'] : undefined;
    const given =
      typeof header === 'string' && header.startsWith('Bearer ')
        ? digest(header.slice(7))
        : typeof apiKey === 'string'
          ? digest(apiKey)
          : undefined;
    let ok = false;
    // Every digest is compared, so the time does not tell which key matched.
    for (const d of digests) if (given && timingSafeEqual(given, d)) ok = true;
    if (ok) return undefined;
    void reply.header('www-authenticate', 'Bearer');
    return onReject(reply.code(401));
  };
}
