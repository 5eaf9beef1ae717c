/**
 * `tokenizer.json` fixtures shared by the tokenizer suites.
 */
import { mockTokenizerJson } from '../../ts/index.js';

/**
 * The mock model (one id per UTF-8 byte) with two added special tokens, `<|bos|>` (256) and
 * `<|eot|>` (257), and (unless `template` is false) a template that puts `<|bos|>` before a text.
 */
export function withSpecials(template = true): string {
  const base = mockTokenizerJson() as Record<string, unknown>;
  const special = (id: number, content: string) => ({
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  });
  return JSON.stringify({
    ...base,
    added_tokens: [special(256, '<|bos|>'), special(257, '<|eot|>')],
    post_processor: !template
      ? null
      : {
          type: 'TemplateProcessing',
          single: [{ SpecialToken: { id: '<|bos|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
          pair: [{ Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
          special_tokens: { '<|bos|>': { id: '<|bos|>', ids: [256], tokens: ['<|bos|>'] } },
        },
  });
}
