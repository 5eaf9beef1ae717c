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
 * is a leaf. Its size is bounded in bytes, counted as V8 holds them ({@link pieceBytes}: within a
 * few percent of its heap statistics for short and long pieces alike).
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
  readonly ids: PieceIds;
  readonly parent: Piece | undefined;
  /** The pieces that follow it (created with the first: most pieces end a text). */
  children: Map<string, Piece> | undefined;
  readonly bytes: number;
}

/** A piece of a text being encoded, and its map key ({@link mapKey}, computed once for lookup and store). */
export interface TextPiece {
  text: string;
  key: string;
}

/** A text's cached prefix: its ids (pieces in order) and the boundary it ends at. */
export interface CachedPrefix {
  parts: PieceIds[];
  /** The boundary the cached prefix ends at (undefined when none). */
  boundary: Boundary | undefined;
  tokens: number;
}

/**
 * A piece's ids: a plain array when short (a typed array's two objects outweigh its 4 bytes an
 * id), else a `Uint32Array` (half an array's 8 bytes an id).
 */
type PieceIds = readonly number[] | Uint32Array;

/** Ids kept as a plain array below this many. */
const TYPED_IDS_FROM = 64;

/**
 * What a piece costs beside its text and ids, in bytes: the piece, its entries in its parent's
 * map and in the LRU, its children's map, the text's string headers. Measured with V8's heap
 * statistics on 117,000 pieces of about 15 characters (about 510 bytes each in all).
 */
const PIECE_OVERHEAD = 370;

/** Bytes a piece of this text and these ids holds (see {@link PIECE_OVERHEAD}). */
function pieceBytes(text: string, ids: PieceIds): number {
  const idBytes = Array.isArray(ids) ? 8 * ids.length : 4 * ids.length + 160;
  return 2 * text.length + idBytes + PIECE_OVERHEAD;
}

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
  static pieces(text: string, boundaries: readonly Boundary[]): TextPiece[] {
    let start = 0;
    return boundaries.map((b) => {
      const piece = text.slice(start, b.end);
      start = b.end;
      return { text: piece, key: mapKey(piece) };
    });
  }

  /** The longest cached prefix of a text whose pieces are `pieces` (cut at `boundaries`). */
  lookup(pieces: readonly TextPiece[], boundaries: readonly Boundary[]): CachedPrefix {
    const parts: PieceIds[] = [];
    const path: Piece[] = [];
    let level: Map<string, Piece> | undefined = this.roots;
    let tokens = 0;
    for (const { text, key } of pieces) {
      const piece: Piece | undefined = level?.get(key);
      if (piece === undefined || piece.text !== text) break;
      parts.push(piece.ids);
      path.push(piece);
      tokens += piece.ids.length;
      level = piece.children;
    }
    this.touch(path);
    const boundary = path.length === 0 ? undefined : boundaries[path.length - 1];
    return { parts, boundary, tokens };
  }

  /**
   * Caches the pieces of a text whose whole ids are `ids`, when those ids hold the boundary
   * tokens (`boundaryIds`) exactly where `boundaries` put them; returns false (and caches
   * nothing) when they do not. `known`: the text's cached prefix, whose ids were checked when
   * they were cached.
   */
  store(
    pieces: readonly TextPiece[],
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
    let start = 0;
    for (let i = 0; i < pieces.length; i++) {
      const { key, text: given } = pieces[i];
      if (parent !== undefined && parent.children === undefined) parent.children = new Map();
      const level = parent === undefined ? this.roots : (parent.children as Map<string, Piece>);
      let piece = level.get(key);
      // Another long piece with the same digest holds the place: the rest of this text is not cached.
      if (piece !== undefined && piece.text !== given) break;
      if (piece === undefined) {
        const text = ownCopy(given);
        // A short piece is its own key: the copy, not the slice, which would keep the whole prompt alive.
        const slice = ids.slice(start, ends[i]);
        const own = slice.length < TYPED_IDS_FROM ? slice : Uint32Array.from(slice);
        const stored = key === given ? text : key;
        piece = { text, key: stored, ids: own, parent, children: undefined, bytes: pieceBytes(text, own) };
        level.set(stored, piece);
        this.bytes += piece.bytes;
      }
      path.push(piece);
      parent = piece;
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
      const parent = oldest.parent;
      if (parent === undefined) this.roots.delete(oldest.key);
      else {
        parent.children?.delete(oldest.key);
        if (parent.children?.size === 0) parent.children = undefined;
      }
      this.bytes -= oldest.bytes;
    }
  }
}
