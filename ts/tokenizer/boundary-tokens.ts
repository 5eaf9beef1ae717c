/**
 * The added tokens a text can be cut after without changing its token ids: the seams the prefix
 * cache (`prefix-cache.ts`) reuses a conversation's earlier tokens at.
 *
 * Hugging Face's `tokenizers` (and tokenizers.js) first split a text at its added tokens, then
 * normalize, pre-tokenize and encode each piece between them on its own. So the ids of
 * `A + <tok> + B` are the ids of `A + <tok>` followed by those of `<tok> + B` less the first
 * (`B` is encoded behind the token, not at the start of a text, which some pre-tokenizers treat
 * apart), as long as `<tok>` splits the text there in both cases. That holds for an added token that is matched on the raw text
 * (`normalized: false`), takes no whitespace beside it (`lstrip`, `rstrip` false) and need not
 * stand alone (`single_word` false), when no other added token contains its text: the matcher
 * picks the longest token at the leftmost position, and only a token that covers `<tok>` could
 * match across the cut in one text but not in the other. Chat templates put such tokens
 * (`<|im_start|>`, `<|eot_id|>`, `<start_of_turn>`) around every message.
 *
 * The model's unknown token is left out: the model emits its id for text that is not the token's.
 * What is not proven here is checked per text: a text's ids must hold the boundary tokens' ids
 * in the order the scan finds their texts before any of its pieces is cached.
 * @internal
 * @module
 */

/** An added token that cuts texts cleanly. */
export interface BoundaryToken {
  text: string;
  id: number;
}

/** One place a boundary token stands in a text: it ends at `end` (UTF-16 units). */
export interface Boundary {
  end: number;
  token: BoundaryToken;
}

/** An `added_tokens` entry of a `tokenizer.json`, as far as it is read here. */
interface AddedTokenEntry {
  id?: unknown;
  content?: unknown;
  single_word?: unknown;
  lstrip?: unknown;
  rstrip?: unknown;
  normalized?: unknown;
}

/** The added tokens of a parsed `tokenizer.json` that cut texts cleanly (see the module docs). */
export function boundaryTokens(tokenizer: unknown): BoundaryToken[] {
  const added = (tokenizer as { added_tokens?: unknown } | null)?.added_tokens;
  if (!Array.isArray(added)) return [];
  const entries = added.filter(
    (e): e is AddedTokenEntry & { content: string } =>
      e !== null && typeof e === 'object' && typeof (e as AddedTokenEntry).content === 'string' && (e as AddedTokenEntry).content !== '',
  );
  // The model's unknown token stands for text that is not its own, so its id says nothing of where the token's text is.
  const unknown = (tokenizer as { model?: { unk_token?: unknown } }).model?.unk_token;
  const candidates = new Map<string, number>();
  for (const e of entries) {
    if (e.content === unknown) continue;
    const clean = e.normalized === false && e.lstrip !== true && e.rstrip !== true && e.single_word !== true;
    if (clean && Number.isSafeInteger(e.id) && (e.id as number) >= 0) candidates.set(e.content, e.id as number);
  }
  // A candidate inside another added token's text (or named twice) could be matched across a cut.
  const lengths = [...new Set([...candidates.keys()].map((t) => t.length))];
  const seen = new Set<string>();
  for (const { content } of entries) {
    if (seen.has(content)) candidates.delete(content);
    seen.add(content);
    for (const length of lengths)
      for (let at = 0; at + length <= content.length; at++) {
        if (length === content.length) continue;
        const inner = content.slice(at, at + length);
        if (candidates.has(inner)) candidates.delete(inner);
      }
  }
  return [...candidates].map(([text, id]) => ({ text, id }));
}

const SPECIAL_CHARS = /[.*+?^${}()|[\]\\]/g;

/** A trie of texts by UTF-16 unit. */
type Trie = Map<string, Trie>;

/**
 * One regular expression matching any of `texts`, shaped as their trie
 * (`<\|(?:im_(?:start|end)|eot)\|>`): a plain alternation tries every text in turn wherever the
 * first character matches, about a millisecond per long prompt for a model with thousands of
 * added tokens. No text is a prefix of another (none contains another: `boundaryTokens`), so a
 * node with children ends no text.
 */
function triePattern(texts: readonly string[]): string {
  const root: Trie = new Map();
  for (const text of texts) {
    let node = root;
    for (let i = 0; i < text.length; i++) {
      let next = node.get(text[i]);
      if (next === undefined) {
        next = new Map();
        node.set(text[i], next);
      }
      node = next;
    }
  }
  const emit = (node: Trie): string => {
    const alternatives = [...node].map(([unit, next]) => unit.replace(SPECIAL_CHARS, '\\$&') + emit(next));
    return alternatives.length <= 1 ? (alternatives[0] ?? '') : `(?:${alternatives.join('|')})`;
  };
  return emit(root);
}

/** Finds the boundary tokens' texts in a text, left to right. */
export class BoundaryScanner {
  private readonly pattern: RegExp | undefined;
  private readonly byText: Map<string, BoundaryToken>;
  /** The boundary tokens' ids. */
  readonly ids: ReadonlySet<number>;

  constructor(readonly tokens: readonly BoundaryToken[]) {
    this.byText = new Map(tokens.map((t) => [t.text, t]));
    this.ids = new Set(tokens.map((t) => t.id));
    this.pattern = tokens.length === 0 ? undefined : new RegExp(triePattern(tokens.map((t) => t.text)), 'g');
  }

  /** Where the boundary tokens stand in `text`, in order. */
  scan(text: string): Boundary[] {
    const out: Boundary[] = [];
    const pattern = this.pattern;
    if (pattern === undefined) return out;
    pattern.lastIndex = 0;
    for (let m = pattern.exec(text); m !== null; m = pattern.exec(text))
      out.push({ end: m.index + m[0].length, token: this.byText.get(m[0]) as BoundaryToken });
    return out;
  }
}
