/**
 * The engine tokenizer's cache: token ids by prompt, least recently used out first. Clients
 * resend the same system prompts and conversations, and asking a worker's `/tokenize` costs a
 * round trip; prompts can be megabytes, so the cache is bounded in bytes as well as in prompts.
 * @internal
 * @module
 */

/** Bounds of a {@link TokenCache}. */
export interface TokenCacheLimits {
  /** Prompts kept; 0 turns the cache off. */
  maxPrompts: number;
  /** Bytes kept (a prompt's key as UTF-16 and its ids as doubles); one prompt over a quarter of it is not kept. */
  maxBytes: number;
}

/** What a {@link TokenCache} did and holds. */
export interface TokenCacheStats {
  hits: number;
  misses: number;
  prompts: number;
  bytes: number;
}

/** An LRU; a Map keeps insertion order, so its first key is the oldest. */
export class TokenCache {
  private readonly entries = new Map<string, number[]>();
  private hits = 0;
  private misses = 0;
  private bytes = 0;

  constructor(private readonly limits: TokenCacheLimits) {}

  private static size(key: string, ids: readonly number[]): number {
    return 2 * key.length + 8 * ids.length;
  }

  get(key: string): number[] | undefined {
    const ids = this.entries.get(key);
    if (ids === undefined) {
      this.misses++;
      return undefined;
    }
    this.hits++;
    this.entries.delete(key);
    this.entries.set(key, ids);
    return ids;
  }

  set(key: string, ids: number[]): void {
    const size = TokenCache.size(key, ids);
    if (this.limits.maxPrompts === 0 || size > this.limits.maxBytes / 4 || this.entries.has(key)) return;
    this.entries.set(key, ids);
    this.bytes += size;
    while (this.entries.size > this.limits.maxPrompts || this.bytes > this.limits.maxBytes) {
      const [oldest, old] = this.entries.entries().next().value as [string, number[]];
      this.entries.delete(oldest);
      this.bytes -= TokenCache.size(oldest, old);
    }
  }

  stats(): TokenCacheStats {
    return { hits: this.hits, misses: this.misses, prompts: this.entries.size, bytes: this.bytes };
  }
}
