/**
 * The tokenizer's cache as Prometheus metrics, read at scrape time: its hit rate says how many
 * `/tokenize` round trips (or local encodes) the gateway saves, its size whether `tokenizeCache`
 * fits.
 * @internal
 * @module
 */

import type { Registry } from 'prom-client';
import type { TokenizerPrefixCacheStats } from '../tokenizer/prefix-cache.js';
import { scrapedCounter, scrapedGauge } from './scraped-metrics.js';
import type { PromptTokenizer } from './tokenize.js';

export function tokenizeCacheMetrics(tokenizer: PromptTokenizer, registry: Registry): void {
  const cache = tokenizer.cache;
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
  prefixCacheMetrics(tokenizer, registry);
}

/** The prefix cache's figures: its stats key, metric name (after the prefix), help, and whether it only grows. */
const PREFIX_CACHE_FIGURES: [keyof TokenizerPrefixCacheStats, string, string, 'counter' | 'gauge'][] = [
  ['hits', 'hits_total', 'Local encodes that reused a cached prompt beginning and encoded only the rest.', 'counter'],
  ['misses', 'misses_total', 'Local encodes of a prompt with special tokens whose beginning was not cached.', 'counter'],
  ['skipped', 'skipped_total', 'Local encodes the prefix cache could not help (no special token to cut after).', 'counter'],
  [
    'rejected',
    'rejected_total',
    "Prompts whose token ids did not hold their special tokens where the text does (not cached; expected 0: the model's tokenizer does not fit the cache's rule).",
    'counter',
  ],
  ['reusedTokens', 'reused_tokens_total', 'Token ids taken from the prefix cache instead of encoded.', 'counter'],
  ['bytes', 'bytes', 'Bytes the prefix cache holds, as V8 counts them (within a few percent of its heap statistics).', 'gauge'],
  ['pieces', 'pieces', 'Pieces of prompts (between special tokens) the prefix cache holds.', 'gauge'],
];

/** The local tokenizer's prefix cache, when it has one: what its hits save and what it holds. */
function prefixCacheMetrics(tokenizer: PromptTokenizer, registry: Registry): void {
  if (tokenizer.prefixCacheStats?.() === undefined) return;
  for (const [key, name, help, kind] of PREFIX_CACHE_FIGURES) {
    const read = () => tokenizer.prefixCacheStats?.()?.[key] ?? 0;
    (kind === 'counter' ? scrapedCounter : scrapedGauge)(registry, `kvroute_gateway_tokenize_prefix_cache_${name}`, help, read);
  }
}
