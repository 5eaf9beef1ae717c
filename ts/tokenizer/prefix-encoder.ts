/**
 * Encoding through the prefix cache (`prefix-cache.ts`): a text's longest cached prefix ending
 * at a boundary token, then only the rest encoded, behind that boundary token so the tokenizer
 * sees the rest exactly as it sits in the whole text (a piece after a token, not the text's
 * start, which some pre-tokenizers treat apart). One implementation above both backends, so they
 * cannot disagree about what is reused.
 * @internal
 * @module
 */

import type { TextTokenizerBackend } from '../backend-types.js';
import { type Boundary, BoundaryScanner, boundaryTokens } from './boundary-tokens.js';
import { type CachedPrefix, PrefixCache, type TokenizerPrefixCacheStats } from './prefix-cache.js';

/** The ids a post-processor puts around every text, when it only does that. */
interface Wrapper {
  lead: number[];
  trail: number[];
}

/** Texts the post-processor is tried on: a wrapper must be the same around each. */
const PROBES = ['a', 'Hello, world.\n\n  Two lines.'];

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((id, i) => id === b[i]);
}

/** `lead` and `trail` when `full` is `raw` with ids around it. */
function wrapperOf(raw: readonly number[], full: readonly number[]): Wrapper | undefined {
  for (let at = 0; at + raw.length <= full.length; at++)
    if (sameIds(full.slice(at, at + raw.length), raw)) return { lead: full.slice(0, at), trail: full.slice(at + raw.length) };
  return undefined;
}

export class PrefixEncoder {
  private readonly cache: PrefixCache;
  private readonly scanner: BoundaryScanner;
  /** The post-processor as a wrapper (undefined: not yet tried; null: it is not one). */
  private wrapper: Promise<Wrapper | null> | undefined;

  /** `tokenizer`: the parsed `tokenizer.json` (its added tokens). */
  constructor(
    private readonly inner: TextTokenizerBackend,
    tokenizer: unknown,
    maxBytes: number,
  ) {
    this.cache = new PrefixCache(maxBytes);
    this.scanner = new BoundaryScanner(boundaryTokens(tokenizer));
  }

  stats(): TokenizerPrefixCacheStats {
    return { boundaryTokens: this.scanner.tokens.length, ...this.cache.stats() };
  }

  /** The ids of `text` with the post-processor (`addSpecialTokens`), through the cache when its wrapper allows. */
  async encodeWithSpecials(text: string): Promise<number[]> {
    this.wrapper ??= this.findWrapper();
    const wrapper = await this.wrapper;
    const boundaries = this.scanner.scan(text);
    if (wrapper === null || boundaries.length === 0) {
      this.cache.counts.skipped++;
      return this.inner.encode(text, true);
    }
    const ids = await this.encodeAt(text, boundaries);
    return [...wrapper.lead, ...ids, ...wrapper.trail];
  }

  /** The ids of `text` without the post-processor. */
  async encode(text: string): Promise<number[]> {
    const boundaries = this.scanner.scan(text);
    if (boundaries.length === 0) {
      this.cache.counts.skipped++;
      return this.inner.encode(text, false);
    }
    return this.encodeAt(text, boundaries);
  }

  private async encodeAt(text: string, boundaries: Boundary[]): Promise<number[]> {
    const cache = this.cache;
    const pieces = PrefixCache.pieces(text, boundaries);
    const prefix = cache.lookup(pieces, boundaries);
    let ids: number[];
    let known: CachedPrefix | undefined;
    if (prefix.boundary === undefined) {
      cache.counts.misses++;
      ids = await this.inner.encode(text, false);
    } else {
      const token = prefix.boundary.token;
      const rest = await this.inner.encode(token.text + text.slice(prefix.boundary.end), false);
      if (rest[0] !== token.id) {
        cache.counts.rejected++;
        return this.inner.encode(text, false);
      }
      cache.counts.hits++;
      cache.counts.reusedTokens += prefix.tokens;
      ids = new Array<number>(prefix.tokens + rest.length - 1);
      let at = 0;
      for (const part of prefix.parts) for (const id of part) ids[at++] = id;
      for (let i = 1; i < rest.length; i++) ids[at++] = rest[i];
      known = prefix;
    }
    if (!cache.store(pieces, boundaries, ids, this.scanner.ids, known)) cache.counts.rejected++;
    return ids;
  }

  /** The post-processor's ids around a text, when the probes show it only wraps; else null. */
  private async findWrapper(): Promise<Wrapper | null> {
    let found: Wrapper | undefined;
    const probes = this.scanner.tokens.length === 0 ? PROBES : [...PROBES, `x${this.scanner.tokens[0].text} y`];
    for (const probe of probes) {
      let wrapper: Wrapper | undefined;
      try {
        wrapper = wrapperOf(await this.inner.encode(probe, false), await this.inner.encode(probe, true));
      } catch {
        return null; // a model that cannot encode a probe (no unknown token) is encoded whole
      }
      if (wrapper === undefined) return null;
      if (found !== undefined && !(sameIds(found.lead, wrapper.lead) && sameIds(found.trail, wrapper.trail))) return null;
      found = wrapper;
    }
    return found ?? null;
  }
}
