/**
 * Token ids of text prefixes that end at a boundary token (`boundary-tokens.ts`), so that a
 * conversation's next turn encodes only what it adds. A chat prompt repeats every earlier turn,
 * and encoding is the gateway's largest cost per long prompt (a 6,400-token conversation takes
 * about 10 ms in Hugging Face's Rust tokenizer), while the part that is new is usually one
 * message.
 *
 * The cache is a trie of the pieces between boundaries, each holding its own ids: a text's
 * cached prefix is the path its pieces walk from the root, compared as whole strings (no hash
 * that could collide). Pieces are evicted least recently used first, and a walk touches its
 * pieces from the deepest up, so a piece is always newer than its children and the oldest piece
 * is a leaf. Its size is bounded in bytes (text as UTF-16 plus 4 per id and a fixed overhead).
 * @internal
 * @module
 */

import { mapKey } from '../long-keys.js';
import type { Boundary } from './boundary-tokens.js';

/**
 * What a tokenizer's prefix cache did and holds (`TextTokenizer.prefixCacheStats()`).
 * @group Tokenizer
 */
export interface TokenizerPrefixCacheStats {
  /** The added tokens texts are cut after; 0: the cache cannot help this model. */
  boundaryTokens: number;
  /** Encodes that took a cached prefix and encoded only the rest. */
  hits: number;
  /** Encodes of a text with boundary tokens that found no cached prefix (encoded whole, then cached). */
  misses: number;
  /**
   * Encodes the cache could not help, encoded whole with nothing cached: no boundary token in the
   * text, or special tokens asked of a post-processor that does more than put ids around a text.
   */
  skipped: number;
  /**
   * Texts whose ids did not hold their boundary tokens where the text does (not cached), and
   * suffixes whose ids did not start with their boundary token (the text encoded whole instead):
   * a tokenizer the boundary rule does not fit. Expected to stay 0.
   */
  rejected: number;
  /** Token ids taken from the cache instead of encoded. */
  reusedTokens: number;
  /** Pieces held. */
  pieces: number;
  /** Bytes held, as counted against `maxBytes`. */
  bytes: number;
  /** The bound. */
  maxBytes: number;
}

/** One piece of text between boundaries (ending with its boundary token) and its ids. */
interface Piece {
  readonly text: string;
  /** Its key in its parent's map ({@link mapKey}: a long piece by a digest, so the text is checked too). */
  readonly key: string;
  readonly ids: Uint32Array;
  readonly parent: Piece | undefined;
  readonly children: Map<string, Piece>;
  readonly bytes: number;
}

/** A text's cached prefix: its ids (pieces in order) and where it ends. */
export interface CachedPrefix {
  parts: Uint32Array[];
  /** UTF-16 offset where the cached prefix ends (0: none). */
  end: number;
  /** The boundary the cached prefix ends at (undefined when none). */
  boundary: Boundary | undefined;
  tokens: number;
}

/** A piece's count against the bound: its text, its ids and the map entries holding it. */
const PIECE_OVERHEAD = 96;

/** A copy of `text` that keeps no larger string alive (a slice of a long prompt would keep the whole prompt). */
function ownCopy(text: string): string {
  return text.length < 16 ? text : `${text} `.slice(0, -1);
}

export class PrefixCache {
  private readonly roots = new Map<string, Piece>();
  /** Every piece, least recently used first. */
  private readonly lru = new Map<Piece, true>();
  private bytes = 0;
  readonly counts = { hits: 0, misses: 0, skipped: 0, rejected: 0, reusedTokens: 0 };

  constructor(readonly maxBytes: number) {}

  /** The pieces of `text` cut at `boundaries`, in order. */
  static pieces(text: string, boundaries: readonly Boundary[]): string[] {
    let start = 0;
    return boundaries.map((b) => {
      const piece = text.slice(start, b.end);
      start = b.end;
      return piece;
    });
  }

  /** The longest cached prefix of a text whose pieces are `pieces` (cut at `boundaries`). */
  lookup(pieces: readonly string[], boundaries: readonly Boundary[]): CachedPrefix {
    const parts: Uint32Array[] = [];
    const path: Piece[] = [];
    let level = this.roots;
    let tokens = 0;
    for (const text of pieces) {
      const piece = level.get(mapKey(text));
      if (piece === undefined || piece.text !== text) break;
      parts.push(piece.ids);
      path.push(piece);
      tokens += piece.ids.length;
      level = piece.children;
    }
    this.touch(path);
    const boundary = path.length === 0 ? undefined : boundaries[path.length - 1];
    return { parts, end: boundary?.end ?? 0, boundary, tokens };
  }

  /**
   * Caches the pieces of a text whose whole ids are `ids`, when those ids hold the boundary
   * tokens (`boundaryIds`) exactly where `boundaries` put them; returns false (and caches
   * nothing) when they do not. `known`: the text's cached prefix, whose ids were checked when
   * they were cached.
   */
  store(
    pieces: readonly string[],
    boundaries: readonly Boundary[],
    ids: readonly number[],
    boundaryIds: ReadonlySet<number>,
    known: CachedPrefix | undefined,
  ): boolean {
    const ends: number[] = [];
    let at = 0;
    if (known !== undefined)
      for (const part of known.parts) {
        at += part.length;
        ends.push(at);
      }
    for (let i = at; i < ids.length; i++)
      if (boundaryIds.has(ids[i])) {
        if (ends.length === boundaries.length || boundaries[ends.length].token.id !== ids[i]) return false;
        ends.push(i + 1);
      }
    if (ends.length !== boundaries.length) return false;
    const path: Piece[] = [];
    let parent: Piece | undefined;
    let level = this.roots;
    let start = 0;
    for (let i = 0; i < pieces.length; i++) {
      const key = mapKey(pieces[i]);
      let piece = level.get(key);
      // Another long piece with the same digest holds the place: the rest of this text is not cached.
      if (piece !== undefined && piece.text !== pieces[i]) break;
      if (piece === undefined) {
        const text = ownCopy(pieces[i]);
        const own = Uint32Array.from(ids.slice(start, ends[i]));
        piece = { text, key, ids: own, parent, children: new Map(), bytes: 2 * text.length + 4 * own.length + PIECE_OVERHEAD };
        level.set(key, piece);
        this.bytes += piece.bytes;
      }
      path.push(piece);
      parent = piece;
      level = piece.children;
      start = ends[i];
    }
    this.touch(path);
    this.evict();
    return true;
  }

  stats(): Omit<TokenizerPrefixCacheStats, 'boundaryTokens'> {
    return { ...this.counts, pieces: this.lru.size, bytes: this.bytes, maxBytes: this.maxBytes };
  }

  /** Marks a path used, deepest first, so that each piece is newer than its children. */
  private touch(path: readonly Piece[]): void {
    for (let i = path.length - 1; i >= 0; i--) {
      this.lru.delete(path[i]);
      this.lru.set(path[i], true);
    }
  }

  private evict(): void {
    while (this.bytes > this.maxBytes) {
      const oldest = this.lru.keys().next().value as Piece;
      this.lru.delete(oldest);
      (oldest.parent?.children ?? this.roots).delete(oldest.key);
      this.bytes -= oldest.bytes;
    }
  }
}
