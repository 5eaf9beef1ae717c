/**
 * `tokenizer.json` fixtures shared by the tokenizer suites.
 */
import { mockTokenizerJson } from '../../ts/index.js';

/** An `added_tokens` entry: matched on the raw text and standing anywhere unless `flags` say otherwise. */
export function added(id: number, content: string, flags: Record<string, boolean> = {}) {
  return { id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true, ...flags };
}

/** A post-processor putting `token` (id `id`) before every text. */
function bosTemplate(token: string, id: number) {
  return {
    type: 'TemplateProcessing',
    single: [{ SpecialToken: { id: token, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
    pair: [{ Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
    special_tokens: { [token]: { id: token, ids: [id], tokens: [token] } },
  };
}

/** A `tokenizer.json` of a BPE model: what a fixture sets, the rest null or off. */
export function bpeTokenizer(o: {
  vocab: Record<string, number>;
  merges?: string[][];
  unkToken?: string | null;
  byteFallback?: boolean;
  addedTokens?: object[];
  preTokenizer?: object | null;
  postProcessor?: object | null;
}): string {
  return JSON.stringify({
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: o.addedTokens ?? [],
    normalizer: null,
    pre_tokenizer: o.preTokenizer ?? null,
    post_processor: o.postProcessor ?? null,
    decoder: null,
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: o.unkToken ?? null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: o.byteFallback ?? false,
      ignore_merges: false,
      vocab: o.vocab,
      merges: (o.merges ?? []).map(([l, r]) => `${l} ${r}`),
    },
  });
}

/**
 * The mock model (one id per UTF-8 byte) with two added special tokens, `<|bos|>` (256) and
 * `<|eot|>` (257), and (unless `template` is false) a template that puts `<|bos|>` before a text.
 */
export function withSpecials(template = true): string {
  return JSON.stringify({
    ...(mockTokenizerJson() as Record<string, unknown>),
    added_tokens: [added(256, '<|bos|>'), added(257, '<|eot|>')],
    post_processor: template ? bosTemplate('<|bos|>', 256) : null,
  });
}

/**
 * Tokenizers with chat-template special tokens, for the prefix cache: each lists the texts
 * its added tokens cut after (`boundaries`) and the pieces a random text is made of.
 */
export interface ChatTokenizerFixture {
  json: string;
  /** The added tokens the prefix cache may cut after. */
  boundaries: string[];
  /** Text pieces for random prompts: words, whitespace, every added token and parts of them. */
  pieces: string[];
}

/**
 * The mock model's bytes with ChatML's `<|im_start|>` (256) and `<|im_end|>` (257), a BOS
 * token the post-processor adds (`<|bos|>`, 262), and added tokens the cache must not cut
 * after: `<|rs|>` takes the whitespace after it (`rstrip`), `<|a|>` is part of `<|a|>b` (which
 * may be cut after), `<|n|>` is matched on normalized text.
 */
export function chatmlBytes(): ChatTokenizerFixture {
  const base = mockTokenizerJson() as Record<string, unknown>;
  const json = JSON.stringify({
    ...base,
    added_tokens: [
      added(256, '<|im_start|>'),
      added(257, '<|im_end|>'),
      added(258, '<|rs|>', { rstrip: true }),
      added(259, '<|a|>'),
      added(260, '<|a|>b'),
      added(261, '<|n|>', { normalized: true }),
      added(262, '<|bos|>'),
    ],
    post_processor: bosTemplate('<|bos|>', 262),
  });
  return {
    json,
    boundaries: ['<|im_start|>', '<|im_end|>', '<|a|>b', '<|bos|>'],
    pieces: [
      'hi',
      ' ',
      '  ',
      '\n',
      'é',
      '中文',
      '🙂',
      'user',
      '<|im_start|>',
      '<|im_end|>',
      '<|rs|>',
      '<|a|>',
      '<|a|>b',
      '<|n|>',
      '<|im_',
      'end|>',
      '<|bos|>',
    ],
  };
}

/**
 * SentencePiece's layout: `Metaspace` marking the start of the text only (`prepend_scheme`
 * "first": a piece encoded at the start of a text gets `▁`, the same piece after a token does
 * not), a character BPE with merges, `<unk>` for anything else, and Gemma-like turn tokens.
 */
export function metaspaceFirst(): ChatTokenizerFixture {
  const vocab: Record<string, number> = { '<unk>': 0, '<bos>': 1, '<start_of_turn>': 2, '<end_of_turn>': 3 };
  for (const ch of '▁abcdehnorsu\n') vocab[ch] = Object.keys(vocab).length;
  const merges = [
    ['▁', 'a'],
    ['b', 'c'],
    ['▁a', 'bc'],
    ['u', 's'],
    ['us', 'e'],
    ['use', 'r'],
    ['▁', 'h'],
    ['e', 'r'],
  ];
  for (const [l, r] of merges) vocab[l + r] ??= Object.keys(vocab).length;
  const json = bpeTokenizer({
    vocab,
    merges,
    unkToken: '<unk>',
    addedTokens: [added(0, '<unk>'), added(1, '<bos>'), added(2, '<start_of_turn>'), added(3, '<end_of_turn>')],
    preTokenizer: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false },
    postProcessor: bosTemplate('<bos>', 1),
  });
  return {
    json,
    boundaries: ['<bos>', '<start_of_turn>', '<end_of_turn>'],
    pieces: ['a', 'bc', 'user', 'her', ' ', '\n', 'x', '<bos>', '<start_of_turn>', '<end_of_turn>', '<start_of', '<unk>'],
  };
}

/**
 * Llama 3's layout (a Split on the GPT-4 regex, then ByteLevel, a byte-level BPE with merges)
 * with its header tokens and BOS added by the post-processor.
 */
export function llama3Chat(): ChatTokenizerFixture {
  const base = mockTokenizerJson() as { model: { vocab: Record<string, number> } };
  const vocab: Record<string, number> = { ...base.model.vocab };
  const merges: string[] = [];
  for (const [l, r] of [
    ['Ġ', 't'],
    ['h', 'e'],
    ['Ġt', 'he'],
    ['u', 's'],
    ['us', 'e'],
    ['use', 'r'],
    ['Ċ', 'Ċ'],
    ['Ġ', 'Ġ'],
  ]) {
    merges.push(`${l} ${r}`);
    vocab[l + r] ??= Object.keys(vocab).length;
  }
  const next = Object.keys(vocab).length;
  const gpt4 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  const json = JSON.stringify({
    ...base,
    added_tokens: [
      added(next, '<|begin_of_text|>'),
      added(next + 1, '<|start_header_id|>'),
      added(next + 2, '<|end_header_id|>'),
      added(next + 3, '<|eot_id|>'),
    ],
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        { type: 'Split', pattern: { Regex: gpt4 }, behavior: 'Isolated', invert: false },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    },
    post_processor: bosTemplate('<|begin_of_text|>', next),
    model: { ...(base.model as object), ignore_merges: true, vocab, merges },
  });
  return {
    json,
    boundaries: ['<|begin_of_text|>', '<|start_header_id|>', '<|end_header_id|>', '<|eot_id|>'],
    pieces: [
      'the',
      ' the',
      'user',
      '\n\n',
      '  ',
      ' ',
      "'s",
      '42',
      '中文',
      '<|start_header_id|>',
      '<|end_header_id|>',
      '<|eot_id|>',
      '<|eot',
    ],
  };
}

/** Words `a`, `b`, `ab`, `ba` split on whitespace, a `<t>` token and a BOS the post-processor adds; no unknown token. */
export function wordModel(): string {
  return JSON.stringify({
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [added(2, '<t>'), added(3, '<bos>')],
    normalizer: null,
    pre_tokenizer: { type: 'WhitespaceSplit' },
    post_processor: bosTemplate('<bos>', 3),
    decoder: null,
    model: { type: 'WordLevel', vocab: { a: 0, b: 1, '<t>': 2, '<bos>': 3, ab: 4, ba: 5 }, unk_token: '<none>' },
  });
}
