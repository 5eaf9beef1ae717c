/**
 * TextTokenizer on both backends: the special tokens a `tokenizer_config.json` makes `encode`
 * add in place of the file's post-processor (`add_bos_token`, `add_eos_token`, the Llama
 * family's defaults), against a deliberately simple reference of transformers' rule on seeded
 * random configs, and the typed errors of a config that breaks it.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { TextTokenizer } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { expectKvError } from './helpers/errors.js';
import { Rng } from './helpers/random.js';
import { withSpecials } from './helpers/tokenizer-files.js';

const BOS = 256;
const EOT = 257;
const bytes = (text: string) => [...new TextEncoder().encode(text)];

/**
 * The reference: the ids transformers' tokenizer gives for `text`, spelled out case by case.
 * `fileBos` is whether the file's own template adds `<|bos|>`.
 */
function reference(text: string, config: Record<string, unknown>, fileBos: boolean, addSpecialTokens: boolean): number[] {
  const body = bytes(text);
  if (!addSpecialTokens) return body;
  const llama = ['LlamaTokenizer', 'LlamaTokenizerFast', 'CodeLlamaTokenizerFast', 'GemmaTokenizerFast'].includes(
    config.tokenizer_class as string,
  );
  const hasFlag = 'add_bos_token' in config || 'add_eos_token' in config;
  if (!llama && !hasFlag) return fileBos ? [BOS, ...body] : body;
  const bosWanted = 'add_bos_token' in config ? config.add_bos_token === true : llama;
  const eosWanted = config.add_eos_token === true;
  const named = (key: string) => config[key] !== undefined && config[key] !== null;
  return [...(bosWanted && named('bos_token') ? [BOS] : []), ...body, ...(eosWanted && named('eos_token') ? [EOT] : [])];
}

const scratch = mkdtempSync(join(tmpdir(), 'kvroute-tokenizer-config-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe.each(BACKENDS)('TextTokenizer special tokens from tokenizer_config.json (%s)', (backend) => {
  test("add_bos_token false drops the file's BOS; add_eos_token appends EOS; the Llama family adds BOS by default", async () => {
    const make = (config: Record<string, unknown>, template = true) => new TextTokenizer(withSpecials(template), { backend, config });
    // No flag, a class transformers leaves alone: the file's template stands.
    expect(await make({ tokenizer_class: 'PreTrainedTokenizerFast', bos_token: '<|bos|>' }).encode('hi')).toEqual([BOS, ...bytes('hi')]);
    // A fine-tune that switched BOS off: vLLM's tokenizer adds none, whatever the file says.
    expect(await make({ add_bos_token: false, bos_token: '<|bos|>' }).encode('hi')).toEqual(bytes('hi'));
    // Setting only add_eos_token rebuilds the template too, with BOS off by default.
    expect(await make({ add_eos_token: true, bos_token: '<|bos|>', eos_token: '<|eot|>' }).encode('hi')).toEqual([...bytes('hi'), EOT]);
    // The Llama family: BOS on by default even when the file has no template; the token as an AddedToken object.
    const llama = make({ tokenizer_class: 'LlamaTokenizerFast', bos_token: { content: '<|bos|>', special: true } }, false);
    expect(await llama.encode('hi')).toEqual([BOS, ...bytes('hi')]);
    expect(await llama.encode('hi', { addSpecialTokens: false })).toEqual(bytes('hi'));
    const both = make({ tokenizer_class: 'GemmaTokenizer', add_eos_token: true, bos_token: '<|bos|>', eos_token: '<|eot|>' });
    // Long texts take the native backend's thread-pool path.
    const long = 'kv '.repeat(700);
    expect(await both.encode(long)).toEqual([BOS, ...bytes(long), EOT]);
    expect(await both.encode(long, { addSpecialTokens: false })).toEqual(bytes(long));
    // A flag asking for a token the config does not name is dropped, as transformers 5 drops it.
    expect(await make({ add_bos_token: true }).encode('hi')).toEqual(bytes('hi'));
    expect(await make({ add_bos_token: null, bos_token: '<|bos|>' }).encode('hi')).toEqual(bytes('hi'));
  });

  test("the slow tokenizers' keys remove_space and do_lowercase_and_remove_accent change nothing, as for vLLM's fast tokenizer", async () => {
    const text = '  Héllo   Wörld \t KV  ';
    const config = { remove_space: true, do_lowercase_and_remove_accent: true, bos_token: '<|bos|>' };
    const t = new TextTokenizer(withSpecials(true), { backend, config });
    expect(await t.encode(text)).toEqual([BOS, ...bytes(text)]);
    expect(await t.encode(text, { addSpecialTokens: false })).toEqual(bytes(text));
  });

  test('seeded random configs give the reference ids', async () => {
    const rng = new Rng(20261204);
    const flagValues = [undefined, true, false, null];
    for (let i = 0; i < 120; i++) {
      const config: Record<string, unknown> = {};
      const cls = rng.pick([
        undefined,
        'PreTrainedTokenizerFast',
        'LlamaTokenizer',
        'LlamaTokenizerFast',
        'CodeLlamaTokenizerFast',
        'GemmaTokenizerFast',
        'Qwen2TokenizerFast',
      ]);
      if (cls !== undefined) config.tokenizer_class = cls;
      for (const key of ['add_bos_token', 'add_eos_token']) {
        const value = rng.pick(flagValues);
        if (value !== undefined) config[key] = value;
      }
      const bos = rng.pick([undefined, null, '<|bos|>', { content: '<|bos|>' }]);
      if (bos !== undefined) config.bos_token = bos;
      const eos = rng.pick([undefined, null, '<|eot|>', { content: '<|eot|>', lstrip: false }]);
      if (eos !== undefined) config.eos_token = eos;
      const fileBos = rng.int(2) === 0;
      const t = new TextTokenizer(withSpecials(fileBos), { backend, config });
      const text = rng.pick(['', 'x', 'KV cache router', 'é🙂 <|eot|>', 'long '.repeat(260)]);
      for (const add of [true, false])
        expect(await t.encode(text, { addSpecialTokens: add }), JSON.stringify({ config, fileBos, add })).toEqual(
          text === 'é🙂 <|eot|>' ? withEot(reference(text, config, fileBos, add)) : reference(text, config, fileBos, add),
        );
    }
  });

  test('fromFile fills in the special tokens of special_tokens_map.json that the config lacks, as transformers does', async () => {
    const dir = join(scratch, `${backend}-map`);
    mkdirSync(dir, { recursive: true });
    const path = join(dir, 'tokenizer.json');
    writeFileSync(path, withSpecials(false));
    const write = (file: string, value: unknown) => writeFileSync(join(dir, file), JSON.stringify(value));
    write('tokenizer_config.json', { tokenizer_class: 'LlamaTokenizerFast', add_eos_token: true });
    // Without the map the Llama family's BOS and the asked-for EOS name no token: none is added.
    expect(await TextTokenizer.fromFile(path, { backend }).encode('hi')).toEqual(bytes('hi'));
    write('special_tokens_map.json', { bos_token: { content: '<|bos|>', lstrip: false }, eos_token: '<|eot|>' });
    const t = TextTokenizer.fromFile(path, { backend });
    expect(t.config).toMatchObject({ tokenizer_class: 'LlamaTokenizerFast', eos_token: '<|eot|>' });
    expect(await t.encode('hi')).toEqual([BOS, ...bytes('hi'), EOT]);
    // The config's own token wins over the map's.
    write('tokenizer_config.json', {
      tokenizer_class: 'LlamaTokenizerFast',
      add_bos_token: false,
      add_eos_token: true,
      eos_token: '<|bos|>',
    });
    expect(await TextTokenizer.fromFile(path, { backend }).encode('hi')).toEqual([...bytes('hi'), BOS]);
    for (const bad of ['{', '[1]']) {
      writeFileSync(join(dir, 'special_tokens_map.json'), bad);
      expectKvError(
        () => TextTokenizer.fromFile(path, { backend }),
        'ERR_INVALID_ARG',
        /cannot load the tokenizer .*special_tokens_map\.json/,
      );
    }
  });

  test("a config that breaks the rule is a typed error naming the key, and fromFile names the file's path", () => {
    const make = (config: Record<string, unknown>) => () => new TextTokenizer(withSpecials(), { backend, config });
    expectKvError(make({ add_bos_token: 'yes' }), 'ERR_INVALID_ARG', /add_bos_token must be a boolean or null, got "yes"/);
    expectKvError(make({ add_eos_token: 1 }), 'ERR_INVALID_ARG', /add_eos_token must be a boolean or null/);
    expectKvError(make({ add_bos_token: true, bos_token: 42 }), 'ERR_INVALID_ARG', /bos_token must be a string or \{content\}/);
    expectKvError(
      make({ add_eos_token: true, eos_token: '</s>' }),
      'ERR_INVALID_ARG',
      /eos_token "<\/s>" is not in the tokenizer's vocabulary/,
    );
    // Tokens no flag asks for are not looked at.
    expect(() => make({ add_bos_token: false, bos_token: '</s>', eos_token: 42 })()).not.toThrow();
    const dir = join(scratch, backend);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'tokenizer.json'), withSpecials());
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ tokenizer_class: 'LlamaTokenizerFast', bos_token: '<s>' }));
    expectKvError(
      () => TextTokenizer.fromFile(join(dir, 'tokenizer.json'), { backend }),
      'ERR_INVALID_ARG',
      /tokenizer\.json: tokenizer_config\.json's bos_token "<s>" is not in the tokenizer's vocabulary/,
    );
  });
});

/** `<|eot|>` written in a text is one id (an added special token), not its bytes. */
function withEot(ids: number[]): number[] {
  const marker = bytes('<|eot|>');
  for (let i = 0; i + marker.length <= ids.length; i++)
    if (marker.every((b, j) => ids[i + j] === b)) return [...ids.slice(0, i), EOT, ...withEot(ids.slice(i + marker.length))];
  return ids;
}
