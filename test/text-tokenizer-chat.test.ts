/**
 * TextTokenizer's chat API on both backends: `encodeChat` gives the tokens vLLM's engine sees for
 * a chat request, checked against the mock worker's own `/tokenize` (the engine the gateway is
 * tested against) on the same fields, and against hand-written renderings of small templates.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { mockTokenize, TextTokenizer, writeMockTokenizer } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { expectKvError } from './helpers/errors.js';
import { closeFleetsAfterEach, startWorker } from './helpers/gateway.js';
import { postJson } from './helpers/http.js';
import { scratchDir } from './helpers/scratch-dir.js';

closeFleetsAfterEach();

const weather = {
  type: 'function',
  function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
};

describe.each(BACKENDS)('TextTokenizer chat (%s)', (backend) => {
  test("encodeChat gives the mock worker's own tokens for the same request fields", async () => {
    const worker = await startWorker({ trustRequestChatTemplate: true });
    const t = TextTokenizer.fromFile(writeMockTokenizer(scratchDir('kvroute-chat-')), { backend, trustRequestChatTemplate: true });
    const requests = [
      { messages: [{ role: 'user', content: 'Grüße, 世界!' }] },
      {
        messages: [
          { role: 'system', content: 'Be brief.' },
          {
            role: 'user',
            content: [
              { type: 'text', text: 'a' },
              { type: 'text', text: 'b' },
            ],
          },
        ],
      },
      {
        messages: [
          { role: 'user', content: 'Weather in Oslo?' },
          {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: 'c1', type: 'function', function: { name: 'weather', arguments: '{"city": "Oslo"}' } }],
          },
          { role: 'tool', tool_call_id: 'c1', content: '-3 C' },
        ],
        tools: [weather],
      },
      {
        messages: [
          { role: 'user', content: 'q' },
          { role: 'assistant', content: 'It is' },
        ],
        add_generation_prompt: false,
        continue_final_message: true,
      },
      {
        messages: [{ role: 'user', content: 'q' }],
        chat_template: '{{ x }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}',
        chat_template_kwargs: { x: 'X' },
      },
    ];
    for (const request of requests) {
      const truth = await postJson(`${worker.url}/tokenize`, request);
      expect(truth.status, JSON.stringify(request)).toBe(200);
      expect(await t.encodeChat(request), JSON.stringify(request)).toEqual(truth.json.tokens);
      expect(mockTokenize(t.applyChatTemplate(request))).toEqual(truth.json.tokens);
    }
  });

  test('the model directory and the options choose the template; bad requests are typed errors that change nothing', async () => {
    const dir = scratchDir('kvroute-chat-');
    const path = writeMockTokenizer(dir);
    writeFileSync(join(dir, 'chat_template.jinja'), '{{ bos_token }}J{% for m in messages %}{{ m.content }}{% endfor %}');
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ bos_token: '<s>', chat_template: 'C' }));
    const hi = { messages: [{ role: 'user', content: 'hi' }] };
    expect(await TextTokenizer.fromFile(path, { backend }).encodeChat(hi)).toEqual(mockTokenize('<s>Jhi'));
    // The model directory works as well as its tokenizer.json; one without a tokenizer.json is named.
    expect(await TextTokenizer.fromFile(dir, { backend }).encodeChat(hi)).toEqual(mockTokenize('<s>Jhi'));
    expectKvError(
      () => TextTokenizer.fromFile(scratchDir('kvroute-chat-empty-'), { backend }),
      'ERR_INVALID_ARG',
      /kvroute-chat-empty-\w+ holds no tokenizer\.json/,
    );
    const given = TextTokenizer.fromFile(path, { backend, chatTemplate: 'G{{ messages[0].content }}' });
    expect(given.applyChatTemplate(hi)).toBe('Ghi');
    // From the text of a tokenizer.json, the config's template (a list of named ones here).
    const json = JSON.stringify((await import('../ts/index.js')).mockTokenizerJson());
    const named = new TextTokenizer(json, {
      backend,
      config: {
        chat_template: [
          { name: 'default', template: 'D{{ messages[0].content }}' },
          { name: 'tool_use', template: 'T{{ messages[0].content }}' },
        ],
      },
    });
    expect(named.applyChatTemplate(hi)).toBe('Dhi');
    expect(named.applyChatTemplate({ ...hi, tools: [weather] })).toBe('Thi');
    // add_special_tokens runs the tokenizer's post-processor on the rendered text (none here: bytes only).
    expect(await named.encodeChat({ ...hi, add_special_tokens: true })).toEqual(mockTokenize('Dhi'));
    const bare = new TextTokenizer(json, { backend });
    for (const [call, message] of [
      [() => bare.encodeChat(hi), /no chat template: the tokenizer has none/],
      [() => named.encodeChat({ messages: [] }), /messages must be a non-empty array/],
      [() => named.encodeChat({ ...hi, chat_template: 'x' }), /chat_template in a request is refused/],
      [() => named.encodeChat({ ...hi, continue_final_message: true }), /Cannot set both/],
      [() => named.encodeChat(null as never), /request must be an object, got null/],
      [async () => named.applyChatTemplate({ messages: [{ role: 7 }] } as never), /messages\[0\]\.role must be a string/],
    ] as const) {
      const err = await call().catch((e: unknown) => e);
      expect(err, String(message)).toMatchObject({ code: 'ERR_INVALID_ARG', message: expect.stringMatching(message) });
    }
    expectKvError(
      () => new TextTokenizer(json, { backend, chatTemplate: '{% for %}' }),
      'ERR_INVALID_ARG',
      /the chat template of options.chatTemplate/,
    );
    expectKvError(
      () => new TextTokenizer(json, { backend, config: { chat_template: '{% if %}' } }),
      'ERR_INVALID_ARG',
      /the chat template of the config/,
    );
    expectKvError(
      () => new TextTokenizer(json, { backend, chatTemplateContentFormat: 'xml' as never }),
      'ERR_INVALID_ARG',
      /chatTemplateContentFormat must be/,
    );
    expectKvError(
      () => new TextTokenizer(json, { backend, trustRequestChatTemplate: 1 as never }),
      'ERR_INVALID_ARG',
      /trustRequestChatTemplate must be a boolean/,
    );
  });
});
