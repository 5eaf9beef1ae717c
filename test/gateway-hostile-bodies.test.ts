import { describe, expect, test } from 'vitest';
import { BACKENDS } from './helpers/backends.js';
import { closeFleetsAfterEach, startFleet } from './helpers/gateway.js';

closeFleetsAfterEach();

/** JSON values a careless or hostile client may send anywhere (as JSON text). */
const HOSTILE_JSON = [
  'null',
  'true',
  '0',
  '-1',
  '1.5',
  '-0',
  '1e308',
  '18446744073709551616',
  '""',
  '"x"',
  '"\\ud800"',
  `"${'a'.repeat(100_000)}"`,
  '[]',
  '[null]',
  '[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]',
  '{}',
  '{"a":{"b":[]}}',
  '{"__proto__":{"polluted":true}}',
];

/** Each route's valid body, whose fields are replaced one at a time. */
const ROUTES: [string, Record<string, unknown>][] = [
  [
    '/v1/completions',
    { model: 'mock-model', prompt: 'hello there', max_tokens: 2, n: 1, stream: false, priority: 0, cache_salt: 's', stop: ['x'] },
  ],
  [
    '/v1/chat/completions',
    {
      model: 'mock-model',
      messages: [{ role: 'user', content: 'hi' }],
      max_completion_tokens: 2,
      stream: true,
      stream_options: { include_usage: true },
      tools: [],
      chat_template_kwargs: {},
      add_generation_prompt: true,
      truncate_prompt_tokens: 100,
      logprobs: false,
    },
  ],
  ['/v1/responses', { model: 'mock-model', input: 'hi', max_output_tokens: 2, instructions: 'be brief', stream: false }],
  [
    '/v1/messages',
    {
      model: 'mock-model',
      max_tokens: 2,
      system: [{ type: 'text', text: 'be brief' }],
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'hi' }] },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'f', input: { a: 1 } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'ok' }] },
      ],
      tools: [{ name: 'f', input_schema: { type: 'object' } }],
      tool_choice: { type: 'auto' },
      stream: false,
    },
  ],
  ['/generate', { text: 'hello there', sampling_params: { max_new_tokens: 2 }, rid: 'r', lora_path: null, priority: 0, stream: false }],
  [
    '/generate',
    {
      input_ids: [
        [1, 2, 3],
        [4, 5],
      ],
      sampling_params: [{ max_new_tokens: 1 }, { max_new_tokens: 2 }],
      stream: true,
    },
  ],
  ['/tokenize', { model: 'mock-model', prompt: 'hi' }],
  ['/admin/explain', { prompt: 'hello there' }],
  ['/query', { model_name: 'mock-model', token_ids: [1, 2, 3, 4] }],
];

async function post(url: string, path: string, body: string): Promise<number> {
  const r = await fetch(`${url}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
  await r.arrayBuffer();
  return r.status;
}

describe.each(BACKENDS)('gateway: hostile JSON bodies and fields get a 4xx, never a 5xx, and leave nothing booked (%s)', (backend) => {
  test('every route, every field, every hostile value', async () => {
    const f = await startFleet(backend, 1);
    const base = (path: string) => (path === '/admin/explain' || path === '/query' ? f.adminUrl : f.url);
    const failures: string[] = [];
    for (const [path, valid] of ROUTES) {
      expect(await post(base(path), path, JSON.stringify(valid)), `${path} with its valid body`).toBeLessThan(300);
      for (const value of HOSTILE_JSON) {
        const whole = await post(base(path), path, value);
        if (whole >= 500) failures.push(`${path} ${value.slice(0, 40)}: ${whole}`);
        for (const field of Object.keys(valid)) {
          const body = JSON.stringify({ ...valid, [field]: '\u0000HOSTILE\u0000' }).replace('"\\u0000HOSTILE\\u0000"', value);
          const status = await post(base(path), path, body);
          if (status >= 500) failures.push(`${path} ${field}=${value.slice(0, 40)}: ${status}`);
        }
      }
    }
    // Admin and indexer writes: a bad body changes nothing.
    for (const [method, path] of [
      ['POST', '/admin/workers'],
      ['PUT', '/admin/workers'],
      ['POST', '/register'],
      ['POST', '/unregister'],
    ]) {
      for (const value of HOSTILE_JSON) {
        // An empty list is a valid whole fleet (none): not hostile.
        if (method === 'PUT' && value === '[]') continue;
        const r = await fetch(`${f.adminUrl}${path}`, { method, body: value, headers: { 'content-type': 'application/json' } });
        await r.arrayBuffer();
        if (r.status >= 500 || r.status < 400) failures.push(`${method} ${path} ${value.slice(0, 40)}: ${r.status}`);
      }
    }
    expect(failures).toEqual([]);
    expect(f.gateway.workers().map((w) => w.id)).toEqual([1n]);
    // Still serving, and nothing left booked.
    expect(await post(f.url, '/v1/completions', JSON.stringify({ prompt: 'after all that', max_tokens: 1 }))).toBe(200);
    expect(f.gateway.router.stats().inFlight).toBe(0);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});
