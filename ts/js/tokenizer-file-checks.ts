/**
 * What the JS backend checks of a `tokenizer.json` before tokenizers.js reads it, so that it
 * refuses what the native backend (and vLLM's fast tokenizer) refuses; tokenizers.js checks none
 * of it.
 *
 * BPE models, as Hugging Face's Rust `tokenizers` builds them: `vocab` and `merges` both present;
 * merges all `"a b"` lines (exactly one space; `#version` lines skipped, the line number counted
 * without them) or all `["a", "b"]` pairs (tokenizers.js would cut `"a b c"` to `a b`);
 * `dropout`, when set, in [0, 1]. A model with a `continuing_subword_prefix` is refused as well:
 * tokenizers.js ignores the prefix and would encode other ids than the engine (the Rust library
 * merges `a` with `b` past the prefix). Not checked: that every merge's tokens are in the
 * vocabulary, which the Rust library also checks; a set of a large vocabulary and three lookups
 * per merge took about 200 ms per load of Qwen 2.5's file (151k merges), for files no model ships.
 *
 * A `TemplateProcessing` post-processor (alone or in a `Sequence`) whose `single` template names
 * a special token its `special_tokens` lack, or uses sequence `B`: the native backend refuses it
 * at load (the Rust library would panic encoding with it; kvroute-core's `tokenize/file_checks.rs`),
 * where tokenizers.js loaded it and failed each encode with a message of its internals.
 * @internal
 * @module
 */

import { isRecord } from '../chat/prompt.js';

/** A BPE model section as `tokenizer.json` writes it (the fields checked). */
interface BpeModelJson {
  type?: unknown;
  vocab?: unknown;
  merges?: unknown;
  dropout?: unknown;
  continuing_subword_prefix?: unknown;
}

/** Throws in the Rust reader's words when the merges are in neither of its forms. */
function checkMerges(merges: unknown[]): void {
  const isPair = (m: unknown) => Array.isArray(m) && m.length === 2 && typeof m[0] === 'string' && typeof m[1] === 'string';
  if (merges.every(isPair)) return;
  if (!merges.every((m) => typeof m === 'string')) throw new Error('merges must be all "a b" strings or all ["a", "b"] pairs');
  let line = 0;
  for (const m of merges as string[]) {
    if (m.startsWith('#version')) continue;
    line++;
    const space = m.indexOf(' ');
    if (space < 0 || m.indexOf(' ', space + 1) >= 0) throw new Error(`Merges text file invalid at line ${line}`);
  }
}

/**
 * Throws (an `Error` in the Rust library's words where it has them) when `model`, a typed BPE
 * model, is one the Rust library refuses for the faults above, or one with a
 * `continuing_subword_prefix`, which tokenizers.js would encode otherwise; other models pass.
 */
function checkBpeModel(model: unknown): void {
  if (!isRecord(model)) return;
  const m = model as BpeModelJson;
  if (m.type !== 'BPE') return;
  if (m.vocab === undefined || m.vocab === null || m.merges === undefined || m.merges === null) throw new Error('Missing vocab/merges');
  if (!isRecord(m.vocab) || !Array.isArray(m.merges)) throw new Error('a BPE model needs its vocab as an object and its merges as a list');
  checkMerges(m.merges);
  if (m.dropout !== undefined && m.dropout !== null && !(typeof m.dropout === 'number' && m.dropout >= 0 && m.dropout <= 1))
    throw new Error('Dropout should be between 0 and 1, inclusive');
  if (typeof m.continuing_subword_prefix === 'string' && m.continuing_subword_prefix !== '')
    throw new Error(
      "the pure-JS backend's tokenizers.js does not apply a BPE model's continuing_subword_prefix, so its ids would not be the engine's: use the native backend, or the engine's tokenizer",
    );
}

/** A JSON object's field, when it is an object. */
function field(value: unknown, key: string): unknown {
  return isRecord(value) ? value[key] : undefined;
}

/**
 * Throws when a template post-processor's `single` template would fail every encode (see the
 * module docs). Processors are told by their fields, as the Rust library reads them.
 */
function checkPostProcessor(processor: unknown): void {
  const all = field(processor, 'processors');
  if (Array.isArray(all)) {
    for (const p of all) checkPostProcessor(p);
    return;
  }
  const single = field(processor, 'single');
  if (!Array.isArray(single)) return;
  const defined = field(processor, 'special_tokens');
  for (const piece of single) {
    const id = field(field(piece, 'SpecialToken'), 'id');
    if (typeof id === 'string' && field(defined, id) === undefined)
      throw new Error(`the post-processor's single template names the special token \`${id}\`, which its special_tokens do not define`);
    if (field(field(piece, 'Sequence'), 'id') === 'B')
      throw new Error("the post-processor's single template uses sequence B, which a single text does not have");
  }
}

/** Throws (an `Error` saying why) when `file`, a parsed `tokenizer.json`, has one of the faults in the module docs. */
export function checkTokenizerFile(file: unknown): void {
  checkPostProcessor(field(file, 'post_processor'));
  checkBpeModel(field(file, 'model'));
}
