/**
 * The gateway's local tokenizer finds a model's chat templates where transformers finds them
 * (`tokenizer_config.json`, `chat_template.jinja`, `additional_chat_templates/`) and picks the one
 * vLLM would for each request (`tool_use` when it has tools, else `default`), checked through
 * `/admin/explain` against the text each template renders.
 */

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { createGateway, mockTokenize, mockTokenizerConfig, writeMockTokenizer } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { expectKvError } from './helpers/errors.js';
import { closeFleetsAfterEach, startFleet } from './helpers/gateway.js';
import { postJson } from './helpers/http.js';
import { scratchDir } from './helpers/scratch-dir.js';

closeFleetsAfterEach();

/** A template that renders `<tag>` and then each message's content. */
const tagged = (tag: string) => `${tag}{% for m in messages %}{{ m.content }}{% endfor %}`;
const hi = [{ role: 'user', content: 'hi' }];
const tool = { type: 'function', function: { name: 'weather', parameters: { type: 'object', properties: {} } } };

/** A model directory: the mock tokenizer, its config with `extra`, and `files` (path → text). */
function modelDir(extra: Record<string, unknown>, files: Record<string, string> = {}): string {
  const dir = scratchDir('kvroute-tpl-');
  const path = writeMockTokenizer(dir);
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ ...mockTokenizerConfig(), ...extra }));
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(join(dir, file, '..'), { recursive: true });
    writeFileSync(join(dir, file), text);
  }
  return path;
}

describe.each(BACKENDS)('gateway chat templates from the model directory (%s)', (backend) => {
  test("chat_template.jinja replaces the config's; additional templates are chosen by the request's tools", async () => {
    const explain = async (f: { adminUrl: string }, body: object) => postJson(`${f.adminUrl}/admin/explain`, body);
    const expectText = async (f: { adminUrl: string }, body: object, text: string) =>
      expect((await explain(f, body)).json.tokens, JSON.stringify(body)).toEqual(mockTokenize(text));

    // The file clobbers the config's template, as transformers loads it.
    const jinja = await startFleet(backend, 1, {
      tokenizer: modelDir({ chat_template: tagged('C') }, { 'chat_template.jinja': tagged('J') }),
    });
    await expectText(jinja, { messages: hi }, 'Jhi');

    // A named file makes the templates a set: the single one is `default`, `tool_use` serves requests with tools (an empty list too).
    const named = await startFleet(backend, 1, {
      tokenizer: modelDir({}, { 'chat_template.jinja': tagged('J'), 'additional_chat_templates/tool_use.jinja': tagged('T') }),
    });
    await expectText(named, { messages: hi }, 'Jhi');
    await expectText(named, { messages: hi, tools: [tool] }, 'Thi');
    await expectText(named, { messages: hi, tools: [] }, 'Thi');
    await expectText(named, { messages: hi, tools: null }, 'Jhi');

    // A list of {name, template} in the config; without a tool_use template, tools get the default.
    const list = await startFleet(backend, 1, {
      tokenizer: modelDir({
        chat_template: [
          { name: 'rag', template: tagged('R') },
          { name: 'default', template: tagged('D') },
        ],
      }),
    });
    await expectText(list, { messages: hi }, 'Dhi');
    await expectText(list, { messages: hi, tools: [tool] }, 'Dhi');

    // The gateway's chatTemplate (vLLM's --chat-template) wins over all of them.
    const path = modelDir({}, { 'chat_template.jinja': tagged('J'), 'additional_chat_templates/tool_use.jinja': tagged('T') });
    const given = await startFleet(backend, 1, { tokenizer: { path, chatTemplate: tagged('G') } });
    await expectText(given, { messages: hi, tools: [tool] }, 'Ghi');

    // Several templates and none named default: a request without a match is the model's gap, a 400.
    const noDefault = await startFleet(backend, 1, { tokenizer: modelDir({ chat_template: [{ name: 'rag', template: tagged('R') }] }) });
    const refused = await explain(noDefault, { messages: hi });
    expect([refused.status, refused.json.error]).toEqual([
      400,
      expect.stringMatching(/several chat templates \(rag\) and none named default/),
    ]);
    // No template anywhere.
    const none = await startFleet(backend, 1, { tokenizer: modelDir({ chat_template: null }) });
    const missing = await explain(none, { messages: hi });
    expect([missing.status, missing.json.error]).toEqual([400, expect.stringMatching(/no chat template: .* has none/)]);
    // Completions need no template.
    await expectText(none, { prompt: 'plain' }, 'plain');
    // A template's bos_token comes from special_tokens_map.json when the config names none.
    const mapped = await startFleet(backend, 1, {
      tokenizer: modelDir(
        { chat_template: `{{ bos_token }}${tagged('M')}`, bos_token: null },
        { 'special_tokens_map.json': JSON.stringify({ bos_token: '<s>' }) },
      ),
    });
    await expectText(mapped, { messages: hi }, '<s>Mhi');
  });

  test('a chat_template of another shape, or a template that does not parse, stops the gateway at start', () => {
    const start = (path: string) => () => createGateway({ blockSize: 16, backend, tokenizer: path, logLevel: false });
    expectKvError(
      start(modelDir({ chat_template: 42 })),
      'ERR_INVALID_ARG',
      /chat_template must be a string or a list of \{name, template\}, got 42/,
    );
    expectKvError(start(modelDir({ chat_template: [{ name: 'default' }] })), 'ERR_INVALID_ARG', /list of \{name, template\}/);
    expectKvError(
      start(modelDir({}, { 'additional_chat_templates/tool_use.jinja': '{% for %}' })),
      'ERR_INVALID_ARG',
      /the chat template "tool_use" of .*tokenizer\.json/,
    );
    expectKvError(start(modelDir({}, { 'chat_template.jinja': '{% if %}' })), 'ERR_INVALID_ARG', /the chat template of .*tokenizer\.json/);
  });
});
