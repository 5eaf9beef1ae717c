/**
 * The mock worker's tokenizer as Hugging Face files, so a gateway's local tokenizer can be tested
 * against the worker: a byte-level BPE with no merges whose 256 tokens have the byte values as
 * ids (one token per UTF-8 byte, as {@link tokenize} does), and a `tokenizer_config.json` with
 * the ChatML template the worker renders. `kvroute mock-worker --write-tokenizer <dir>` writes them.
 * @module
 */

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { KvRouteError } from '../errors.js';
import { describe } from '../validate.js';
import { MOCK_CHAT_TEMPLATE } from './tokenizer.js';

/** GPT-2's byte → printable character table, which the ByteLevel pre-tokenizer uses. */
function byteLevelAlphabet(): string[] {
  const printable: number[] = [];
  for (let b = 33; b <= 126; b++) printable.push(b);
  for (let b = 161; b <= 172; b++) printable.push(b);
  for (let b = 174; b <= 255; b++) printable.push(b);
  const chars: string[] = new Array(256);
  for (const b of printable) chars[b] = String.fromCodePoint(b);
  let shifted = 0;
  for (let b = 0; b < 256; b++) if (chars[b] === undefined) chars[b] = String.fromCodePoint(256 + shifted++);
  return chars;
}

/**
 * The mock model's `tokenizer.json`.
 * @group Mock worker
 */
export function mockTokenizerJson(): Record<string, unknown> {
  const vocab: Record<string, number> = {};
  byteLevelAlphabet().forEach((ch, byte) => {
    vocab[ch] = byte;
  });
  const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true };
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [],
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: null,
    decoder: byteLevel,
    model: { type: 'BPE', dropout: null, unk_token: null, fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges: [] },
  };
}

/**
 * The mock model's `tokenizer_config.json` (its chat template).
 * @group Mock worker
 */
export function mockTokenizerConfig(): Record<string, unknown> {
  return { tokenizer_class: 'PreTrainedTokenizerFast', chat_template: MOCK_CHAT_TEMPLATE, model_max_length: 32768 };
}

/**
 * Writes `tokenizer.json` and `tokenizer_config.json` into `dir` (created if missing); returns
 * the tokenizer's path.
 * @throws {KvRouteError} `ERR_INVALID_ARG` when `dir` is not a non-empty string or cannot be written.
 * @group Mock worker
 */
export function writeMockTokenizer(dir: string): string {
  if (typeof dir !== 'string' || dir.length === 0)
    throw new KvRouteError('ERR_INVALID_ARG', `dir must be a non-empty path, got ${describe(dir)}`);
  try {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(mockTokenizerJson()));
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify(mockTokenizerConfig(), null, 2));
  } catch (err) {
    throw new KvRouteError('ERR_INVALID_ARG', `cannot write the mock tokenizer into ${dir}: ${(err as Error).message}`, { cause: err });
  }
  return join(dir, 'tokenizer.json');
}
