/**
 * The engine tokenizer's cache: token ids by prompt, least recently used out first. Clients
 * resend the same system prompts and conversations, and asking a worker's `/tokenize` costs a
 * round trip; prompts can be megabytes, so the cache is bounded in bytes as well as in prompts.
 * @internal
 * @module
 */

import { mapKey } from '../long-keys.js';

/** Bounds of a {@link TokenCache}. */
export interface TokenCacheLimits {
  /** Prompts kept; 0 turns the cache off. */
  maxPrompts: number;
  /** Bytes kept (a prompt's key as UTF-16 and its ids as doubles); one prompt over a quarter of it is not kept. */
  maxBytes: number;
}

/** A prompt and its map key ({@link mapKey}). */
export interface CacheKey {
  prompt: string;
  k: string;
}

/** What a {@link TokenCache} did and holds. */
export interface TokenCacheStats {
  hits: number;
  misses: number;
  prompts: number;
  bytes: number;
}

/**
 * An LRU; a Map keeps insertion order, so its first key is the oldest. Prompts are keyed by
 * {@link mapKey} (a long prompt by a digest, checked against the prompt on a hit).
 */
export class TokenCache {
  private readonly entries = new Map<string, { key: string; ids: number[] }>();
  private hits = 0;
  private misses = 0;
  private bytes = 0;

  constructor(private readonly limits: TokenCacheLimits) {}

  private static size(key: string, ids: readonly number[]): number {
    return 2 * key.length + 8 * ids.length;
  }

  /** A prompt's key in the cache, for a `get` and the `set` after it (a long prompt's digest taken once). */
  static key(prompt: string): CacheKey {
    return { prompt, k: mapKey(prompt) };
  }

  get({ prompt: key, k }: CacheKey): number[] | undefined {
    const entry = this.entries.get(k);
    if (entry === undefined || entry.key !== key) {
      this.misses++;
      return undefined;
    }
    this.hits++;
    this.entries.delete(k);
    this.entries.set(k, entry);
    return entry.ids;
  }

  set({ prompt: key, k }: CacheKey, ids: number[]): void {
    const size = TokenCache.size(key, ids);
    if (this.limits.maxPrompts === 0 || size > this.limits.maxBytes / 4) return;
    const held = this.entries.get(k);
    if (held?.key === key) return;
    // Another prompt with the same digest gives way to this one.
    if (held !== undefined) this.remove(k, held);
    this.entries.set(k, { key, ids });
    this.bytes += size;
    while (this.entries.size > this.limits.maxPrompts || this.bytes > this.limits.maxBytes) {
      const [oldest, old] = this.entries.entries().next().value as [string, { key: string; ids: number[] }];
      this.remove(oldest, old);
    }
  }

  private remove(k: string, entry: { key: string; ids: number[] }): void {
    this.entries.delete(k);
    this.bytes -= TokenCache.size(entry.key, entry.ids);
  }

  stats(): TokenCacheStats {
    return { hits: this.hits, misses: this.misses, prompts: this.entries.size, bytes: this.bytes };
  }
}
