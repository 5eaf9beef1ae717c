/**
 * Chat templates print values as Python's Jinja2 does (what vLLM renders with): a dict, list,
 * boolean or `none` printed without `tojson` gives Python's `str()`, not JSON. Checked through
 * `TextTokenizer.applyChatTemplate` (the renderer the gateway and the mock worker use) against
 * what Jinja2 3.1.6, set up as transformers sets it up, printed for the same templates: the
 * literal expectations below, and 400 seeded random values in `test/vectors/python-repr.json`
 * (written by `scripts/python-repr-vectors.py`).
 */

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import { TextTokenizer, writeMockTokenizer } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { scratchDir } from './helpers/scratch-dir.js';

const vectors = JSON.parse(readFileSync(join(import.meta.dirname, 'vectors', 'python-repr.json'), 'utf8')) as {
  cases: { value: unknown; printed: string; printedInList: string }[];
};

const d = { a: 1, b: "x'y", c: [true, null, 1.5] };

describe.each(BACKENDS)('chat templates print as Python (%s)', (backend) => {
  const dir = scratchDir('kvroute-pyprint-');
  let tokenizer: TextTokenizer;
  beforeAll(() => {
    tokenizer = TextTokenizer.fromFile(writeMockTokenizer(dir), { backend, trustRequestChatTemplate: true });
  });
  const render = (template: string, kwargs: Record<string, unknown> = {}) =>
    tokenizer.applyChatTemplate({
      messages: [{ role: 'user', content: 'hi' }],
      chat_template: template,
      chat_template_kwargs: { d, b: true, n: null, s: 'ab😀c', ...kwargs },
    });

  test("values printed without tojson read as Jinja2's, in every kind of block; loops over strings", () => {
    // Each expectation is Jinja2 3.1.6's output for the same template and variables.
    const cases: [string, string][] = [
      ['{{ d }}', `{'a': 1, 'b': "x'y", 'c': [True, None, 1.5]}`],
      ["{{ 'a' ~ b ~ n }}", 'aTrueNone'],
      ['{{ d | string }}', `{'a': 1, 'b': "x'y", 'c': [True, None, 1.5]}`],
      ['{% set y %}{{ b }}{% endset %}{{ y }}', 'True'],
      ['{% macro m(v) %}<{{ v }}>{% endmacro %}{{ m(d) }}', `<{'a': 1, 'b': "x'y", 'c': [True, None, 1.5]}>`],
      ['{% filter upper %}{{ b }} {{ n }}{% endfilter %}', 'TRUE NONE'],
      ['{% for i in [1, none, "q"] %}{{ i }},{% else %}e{% endfor %}', '1,None,q,'],
      ['{% for i in [] %}{{ i }}{% else %}{{ n }}{% endfor %}', 'None'],
      ['{% if b %}{{ n }}{% else %}{{ d }}{% endif %}', 'None'],
      [
        '{{ 1.0 }}|{{ 123456789.0 * 1000000000.0 }}|{{ 0.1 + 0.2 }}|{{ -0.0 }}|{{ 3 / 2 }}|{{ 4 / 2 }}|{{ 0.0001 }}',
        '1.0|1.23456789e+17|0.30000000000000004|-0.0|1.5|2.0|0.0001',
      ],
      ['{{ x }}|{{ none }}|{{ true }}', '|None|True'],
      ['{{ (1, "a") }}', "(1, 'a')"],
      ['{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}', "a=1;b=x'y;c=[True, None, 1.5];"],
      ["{{ {'k': [1, {'z': false}]} }}", "{'k': [1, {'z': False}]}"],
      // A loop over a string goes over its characters (code points), a dict's over its keys.
      ['{% for c in s %}[{{ c }}]{% endfor %}', '[a][b][😀][c]'],
      ['{% for c in s if c != "b" %}{{ c }}{% endfor %}', 'a😀c'],
      ['{% for k in d %}{{ k }};{% endfor %}', 'a;b;c;'],
      ['{% for c in "" %}x{% else %}empty{% endfor %}', 'empty'],
      // join joins str() of its items, a string's characters, a dict's keys.
      ["{{ [1, true, none, 1.5, [2]] | join(',') }}", '1,True,None,1.5,[2]'],
      ["{{ s | join('-') }}|{{ d | join }}", 'a-b-😀-c|abc'],
      // transformers' own tojson (json.dumps, not Jinja2's HTML-safe one) is unchanged.
      ['{{ d | tojson }}', '{"a": 1, "b": "x\'y", "c": [true, null, 1.5]}'],
    ];
    for (const [template, printed] of cases) expect(render(template), template).toBe(printed);
  });

  test("an assistant's tool-call arguments printed as they are read as Python's dict", () => {
    // vLLM parses each tool call's JSON arguments into a dict before rendering; a template that
    // prints them without tojson shows Python's repr (the request's text was JSON).
    const template =
      '{% for m in messages %}{% if m.tool_calls %}{% for c in m.tool_calls %}[{{ c.function.name }} {{ c.function.arguments }}]{% endfor %}{% else %}{{ m.content }}{% endif %}{% endfor %}';
    const text = tokenizer.applyChatTemplate({
      messages: [
        { role: 'user', content: 'Weather?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'c1', type: 'function', function: { name: 'weather', arguments: '{"city": "Oslo", "days": 2, "metric": true}' } },
          ],
        },
      ],
      chat_template: template,
    });
    expect(text).toBe("Weather?[weather {'city': 'Oslo', 'days': 2, 'metric': True}]");
  });

  test(`seeded random values print as Jinja2 printed them (${vectors.cases.length} cases)`, () => {
    const plain = '{{ v }}';
    const listed = '{{ [v] }}';
    for (const [i, c] of vectors.cases.entries()) {
      expect(render(plain, { v: c.value }), `case ${i}: ${JSON.stringify(c.value)}`).toBe(c.printed);
      expect(render(listed, { v: c.value }), `case ${i} in a list`).toBe(c.printedInList);
    }
  });
});
