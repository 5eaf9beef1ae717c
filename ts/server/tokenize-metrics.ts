/**
 * The tokenizer's cache as Prometheus metrics, read at scrape time: its hit rate says how many
 * `/tokenize` round trips (or local encodes) the gateway saves, its size whether `tokenizeCache`
 * fits.
 * @internal
 * @module
 */

import type { Registry } from 'prom-client';
import { scrapedCounter, scrapedGauge } from './scraped-metrics.js';
import type { TokenCache } from './token-cache.js';

export function tokenizeCacheMetrics(cache: TokenCache, registry: Registry): void {
  scrapedCounter(registry, 'kvroute_gateway_tokenize_cache_hits_total', 'Prompts tokenized from the cache.', () => cache.stats().hits);
  scrapedCounter(
    registry,
    'kvroute_gateway_tokenize_cache_misses_total',
    "Prompts not in the cache (each tokenized by a worker's /tokenize or the local tokenizer).",
    () => cache.stats().misses,
  );
  scrapedGauge(registry, 'kvroute_gateway_tokenize_cache_prompts', 'Prompts in the cache.', () => cache.stats().prompts);
  scrapedGauge(
    registry,
    'kvroute_gateway_tokenize_cache_bytes',
    'Bytes the cache holds (prompts as UTF-16, 8 per token).',
    () => cache.stats().bytes,
  );
}
