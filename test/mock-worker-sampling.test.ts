import { describe, expect, test } from 'vitest';
import { KvIndex, mockTokenize, startMockWorker } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { postJson, sse } from './helpers/http.js';
import { mockWorkerSuite, PROMPT } from './helpers/mock-worker.js';
import { Rng } from './helpers/random.js';
import { sleep, waitFor } from './helpers/wait.js';

const { worker, closeAfter } = mockWorkerSuite();

/** What a request asks about stopping, as the reference below reads it. */
interface Stops {
  stop?: string[];
  stop_token_ids?: number[];
  min_tokens?: number;
  include_stop_str_in_output?: boolean;
}

/**
 * The reference: vLLM's stopping rules written the plain way, over the text the model would say
 * without stops (one character per token). After each token, once more than `min_tokens` are out:
 * a stop token ends the sequence (its text left out, unless included); else the first stop string
 * (in the request's order) that the text now ends with ends it, the text cut before it (unless included).
 */
function reference(full: string, s: Stops): { text: string; tokens: number; finish: string; reason: string | number | null } {
  const min = s.min_tokens ?? 0;
  for (let count = 1; count <= full.length; count++) {
    if (count <= min) continue;
    const so = full.slice(0, count);
    const token = full.charCodeAt(count - 1);
    const stopToken = (s.stop_token_ids ?? []).includes(token);
    if (stopToken && !s.include_stop_str_in_output) return { text: so.slice(0, -1), tokens: count, finish: 'stop', reason: token };
    const str = (s.stop ?? []).find((x) => so.endsWith(x));
    if (str !== undefined)
      return { text: s.include_stop_str_in_output ? so : so.slice(0, -str.length), tokens: count, finish: 'stop', reason: str };
    if (stopToken) return { text: so, tokens: count, finish: 'stop', reason: token };
  }
  return { text: full, tokens: full.length, finish: 'length', reason: null };
}

/** Tokens per chunk of a sequence of `tokens` streamed at `interval`: the first alone, then `interval` each, the rest last (the plain way). */
function intervalSizes(tokens: number, interval: number): number[] {
  const sizes = [1];
  for (let left = tokens - 1; left > 0; left -= interval) sizes.push(Math.min(interval, left));
  return sizes;
}

describe('mock worker: sampling fields as vLLM reads them', () => {
  test('out-of-range sampling fields are refused in vLLM words, naming the field where vLLM does, and nothing runs', async () => {
    const w = await worker({ model: 'm' });
    const cases: [string, Record<string, unknown>, string, string | null][] = [
      ['completions', { n: 0 }, 'n must be at least 1, got 0.', null],
      ['completions', { presence_penalty: 2.1 }, 'presence_penalty must be in [-2, 2], got 2.1.', null],
      ['completions', { frequency_penalty: -3 }, 'frequency_penalty must be in [-2, 2], got -3.0.', null],
      ['completions', { repetition_penalty: 0 }, 'repetition_penalty must be greater than zero, got 0.0.', null],
      [
        'completions',
        { temperature: -0.1 },
        'temperature must be non-negative, got -0.1. (parameter=temperature, value=-0.1)',
        'temperature',
      ],
      ['chat', { temperature: 2.5 }, 'temperature must be in [0, 2], got 2.5. (parameter=temperature, value=2.5)', 'temperature'],
      ['completions', { top_p: 0 }, 'top_p must be in (0, 1], got 0.0. (parameter=top_p, value=0.0)', 'top_p'],
      ['chat', { top_k: -2 }, 'top_k must be 0 (disable), or at least 1, got -2.', null],
      ['completions', { min_p: 1.5 }, 'min_p must be in [0, 1], got 1.5.', null],
      ['completions', { max_tokens: 0 }, 'max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)', 'max_tokens'],
      ['chat', { max_completion_tokens: -1 }, 'max_tokens must be at least 1, got -1. (parameter=max_tokens, value=-1)', 'max_tokens'],
      ['completions', { min_tokens: -1 }, 'min_tokens must be greater than or equal to 0, got -1.', null],
      ['completions', { min_tokens: 5, max_tokens: 4 }, 'min_tokens must be less than or equal to max_tokens=4, got 5.', null],
      ['chat', { stop: ['done', ''] }, 'stop cannot contain an empty string.', null],
      ['completions', { temperature: 0, n: 2 }, 'n must be 1 when using greedy sampling, got 2.', null],
      [
        'completions',
        { logprobs: 21 },
        'Requested sample logprobs of 21, which is greater than max allowed: 20 (parameter=logprobs, value=21)',
        'logprobs',
      ],
      ['completions', { logprobs: -1 }, '`logprobs` must be a positive value. (parameter=logprobs, value=-1)', 'logprobs'],
      [
        'chat',
        { logprobs: true, top_logprobs: 21 },
        'Requested sample logprobs of 21, which is greater than max allowed: 20 (parameter=logprobs, value=21)',
        'logprobs',
      ],
      [
        'chat',
        { logprobs: true, top_logprobs: -1 },
        'Requested sample logprobs of 256, which is greater than max allowed: 20 (parameter=logprobs, value=256)',
        'logprobs',
      ],
      ['chat', { top_logprobs: 2 }, 'when using `top_logprobs`, `logprobs` must be set to true. (parameter=top_logprobs)', 'top_logprobs'],
      [
        'chat',
        { stream_options: { include_usage: true } },
        'Stream options can only be defined when `stream=True`. (parameter=stream_options)',
        'stream_options',
      ],
      ['completions', { temperature: 'hot' }, 'temperature must be a number, got "hot"', null],
      ['completions', { stop: [1] }, 'stop must be a string or a list of strings, got [1]', null],
      ['completions', { stop_token_ids: [1.5] }, 'stop_token_ids must contain only integers, got [1.5].', null],
      ['completions', { prompt_logprobs: 1 }, 'prompt_logprobs are not modelled by the mock worker', null],
    ];
    for (const [kind, fields, message, param] of cases) {
      const body = kind === 'chat' ? { messages: [{ role: 'user', content: 'hi' }], ...fields } : { prompt: 'hi', ...fields };
      const r = await postJson(`${w.url}/v1/${kind === 'chat' ? 'chat/completions' : 'completions'}`, body);
      expect([r.status, r.json], JSON.stringify(fields)).toEqual([400, { error: { message, type: 'BadRequestError', param, code: 400 } }]);
    }
    expect(w.stats().finished).toEqual([0]);
    // A completion's suffix is refused once the model is known (a chat has none, and ignores it as vLLM does).
    const suffix = await postJson(`${w.url}/v1/completions`, { prompt: 'hi', suffix: 'end' });
    expect([suffix.status, suffix.json.error.message]).toEqual([400, 'suffix is not currently supported']);
    expect((await postJson(`${w.url}/v1/completions`, { prompt: 'hi', suffix: 'end', model: 'x' })).status).toBe(404);
    // The schema (types, the logprob fields, stream options) comes before the model, the ranges after it.
    expect((await postJson(`${w.url}/v1/completions`, { prompt: 'hi', model: 'x', temperature: 'hot' })).status).toBe(400);
    expect((await postJson(`${w.url}/v1/completions`, { prompt: 'hi', model: 'x', temperature: -1 })).status).toBe(404);
    // vLLM's boundaries are accepted; an empty stream_options is none (Python's truth), a seed of -1 is no seed.
    const edges = { temperature: 0, top_p: 1e-5, presence_penalty: -2, frequency_penalty: 2, repetition_penalty: 0.1, min_p: 1, top_k: -1 };
    for (const fields of [edges, { temperature: 2, n: 3 }, { stream_options: {} }, { min_tokens: 2, max_tokens: 2 }, { logprobs: 20 }]) {
      const r = await postJson(`${w.url}/v1/completions`, { prompt: 'hi', max_tokens: 2, ...fields });
      expect([r.status, r.json.error], JSON.stringify(fields)).toEqual([200, undefined]);
    }
    const unseeded = await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 12 });
    const minusOne = await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 12, seed: -1 });
    const seeded = await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 12, seed: 12345 });
    expect(minusOne.json.choices[0].text).toBe(unseeded.json.choices[0].text);
    expect(seeded.json.choices[0].text).not.toBe(unseeded.json.choices[0].text);
    expect((await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 12, seed: 12345 })).json.choices[0].text).toBe(
      seeded.json.choices[0].text,
    );
  });

  test('stops end sequences where vLLM would (seeded, against a plain reference), whole and streamed alike', async () => {
    const w = await worker();
    // The same engine streaming at an interval of 3 tokens (`--stream-interval`), as vLLM does.
    const grouped = await worker({ streamInterval: 3 });
    const rng = new Rng(20261205);
    const prompts = ['tell me a story', PROMPT, 'one more'];
    const chatBody = (p: string) => ({ messages: [{ role: 'user', content: p }], max_tokens: 40 });
    const fulls = new Map<string, string>();
    const chatFulls = new Map<string, string>();
    for (const p of prompts) {
      const r = await postJson(`${w.url}/v1/completions`, { prompt: p, max_tokens: 40 });
      const c = await postJson(`${w.url}/v1/chat/completions`, chatBody(p));
      expect([r.json.choices[0].finish_reason, c.json.choices[0].finish_reason]).toEqual(['length', 'length']);
      fulls.set(p, r.json.choices[0].text);
      chatFulls.set(p, c.json.choices[0].message.content);
    }
    let stopped = 0;
    for (let round = 0; round < 40; round++) {
      const prompt = rng.pick(prompts);
      const full = fulls.get(prompt) as string;
      const piece = () => {
        const at = rng.int(full.length - 1);
        return full.slice(at, at + 1 + rng.int(4));
      };
      const stops: Stops = {};
      if (rng.int(4) > 0) stops.stop = Array.from({ length: 1 + rng.int(3) }, () => (rng.int(5) === 0 ? 'zzz' : piece()));
      if (rng.int(3) === 0) stops.stop_token_ids = [rng.pick([32, 101, 97, 111])];
      if (rng.int(3) === 0) stops.min_tokens = rng.int(20);
      if (rng.int(2) === 0) stops.include_stop_str_in_output = true;
      const want = reference(full, stops);
      if (want.finish === 'stop') stopped++;
      const whole = await postJson(`${w.url}/v1/completions`, { prompt, max_tokens: 40, ...stops });
      const c = whole.json.choices[0];
      const why = JSON.stringify({ full, stops });
      expect([c.text, c.finish_reason, c.stop_reason, whole.json.usage.completion_tokens], why).toEqual([
        want.text,
        want.finish,
        want.reason,
        want.tokens,
      ]);
      const chat = await postJson(`${w.url}/v1/chat/completions`, { ...chatBody(prompt), ...stops });
      const chatWant = reference(chatFulls.get(prompt) as string, stops);
      const cc = chat.json.choices[0];
      expect([cc.message.content, cc.finish_reason, cc.stop_reason, chat.json.usage.completion_tokens], why).toEqual([
        chatWant.text,
        chatWant.finish,
        chatWant.reason,
        chatWant.tokens,
      ]);
      // Streamed: a chunk per generated token (the last says how it ended), text held back while a stop string may still match, the same text in the end.
      const streamed = await sse(`${w.url}/v1/completions`, { prompt, max_tokens: 40, stream: true, ...stops });
      const tokenChunks = streamed.events.filter((e) => e !== '[DONE]' && e.choices.length === 1);
      expect(tokenChunks.length, why).toBe(want.tokens);
      expect(
        tokenChunks.map((e) => [e.choices[0].finish_reason, e.choices[0].stop_reason]),
        why,
      ).toEqual([...Array.from({ length: want.tokens - 1 }, () => [null, null]), [want.finish, want.reason]]);
      const holdBack = stops.stop && !stops.include_stop_str_in_output ? Math.max(...stops.stop.map((s) => s.length)) - 1 : 0;
      let released = 0;
      tokenChunks.forEach((e, i) => {
        released += e.choices[0].text.length;
        if (i < tokenChunks.length - 1) expect(released, why).toBeLessThanOrEqual(Math.max(0, i + 1 - holdBack));
      });
      expect(tokenChunks.map((e) => e.choices[0].text).join(''), why).toBe(want.text);
      // At an interval: the first token alone, then 3 a chunk, the rest last; the same text, held back the same way.
      const byThree = (
        await sse(`${grouped.url}/v1/completions`, { prompt, max_tokens: 40, stream: true, return_token_ids: true, ...stops })
      ).events.filter((e) => e !== '[DONE]' && e.choices.length === 1);
      const sizes = byThree.map((e) => e.choices[0].token_ids.length);
      expect(sizes, why).toEqual(intervalSizes(want.tokens, 3));
      expect(byThree.at(-1)?.choices[0].finish_reason, why).toBe(want.finish);
      let made = 0;
      let shown = 0;
      byThree.forEach((e, i) => {
        made += sizes[i];
        shown += e.choices[0].text.length;
        if (i < byThree.length - 1) expect(shown, why).toBeLessThanOrEqual(Math.max(0, made - holdBack));
      });
      expect(byThree.map((e) => e.choices[0].text).join(''), why).toBe(want.text);
    }
    // The seed gives both kinds of ending.
    expect(stopped).toBeGreaterThan(10);
    expect(stopped).toBeLessThan(40);
  });

  test('logprobs come in vLLM shapes: completions maps (echo adds the prompt), chat lists of the top tokens', async () => {
    const w = await worker();
    const r = await postJson(`${w.url}/v1/completions`, { prompt: 'hello', max_tokens: 4, logprobs: 3, echo: true });
    const c = r.json.choices[0];
    expect(c.text.startsWith('hello')).toBe(true);
    expect(c.text).toHaveLength(9);
    const lp = c.logprobs;
    expect(lp.tokens).toEqual([...c.text]);
    expect(lp.text_offset).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect([lp.token_logprobs[0], lp.top_logprobs[0]]).toEqual([null, null]);
    for (let i = 1; i < 9; i++) {
      const top = Object.entries(lp.top_logprobs[i]) as [string, number][];
      expect(top).toHaveLength(3);
      expect(top[0]).toEqual([lp.tokens[i], lp.token_logprobs[i]]);
      expect(lp.token_logprobs[i]).toBeLessThan(0);
      for (let j = 1; j < top.length; j++) expect(top[j][1]).toBeLessThan(top[j - 1][1]);
    }
    // logprobs 0: the sampled token's alone; echo with max_tokens 0: the prompt alone (one token generated, none shown).
    const zero = await postJson(`${w.url}/v1/completions`, { prompt: 'hi', max_tokens: 2, logprobs: 0 });
    expect(zero.json.choices[0].logprobs.top_logprobs.map((m: object) => Object.keys(m).length)).toEqual([1, 1]);
    const echoOnly = await postJson(`${w.url}/v1/completions`, { prompt: 'hi', max_tokens: 0, echo: true });
    expect([echoOnly.json.choices[0].text, echoOnly.json.choices[0].finish_reason, echoOnly.json.usage.completion_tokens]).toEqual([
      'hi',
      'length',
      1,
    ]);
    const chat = await postJson(`${w.url}/v1/chat/completions`, {
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 3,
      logprobs: true,
      top_logprobs: 2,
    });
    const content = chat.json.choices[0].logprobs.content;
    expect(content.map((e: { token: string }) => e.token).join('')).toBe(chat.json.choices[0].message.content);
    for (const e of content) {
      expect(e.bytes).toEqual([...Buffer.from(e.token)]);
      expect(e.top_logprobs).toHaveLength(2);
      expect(e.top_logprobs[0]).toEqual({ token: e.token, logprob: e.logprob, bytes: e.bytes });
    }
    const noTop = await postJson(`${w.url}/v1/chat/completions`, {
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 2,
      logprobs: true,
    });
    expect(noTop.json.choices[0].logprobs.content.map((e: { top_logprobs: unknown[] }) => e.top_logprobs)).toEqual([[], []]);
    const none = await postJson(`${w.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });
    expect([none.json.choices[0].logprobs, none.json.choices[0].stop_reason]).toEqual([null, null]);
    // Streamed, each token's chunk carries its logprobs, offsets counted over the text sent so far.
    const streamed = await sse(`${w.url}/v1/completions`, { prompt: 'hi', max_tokens: 3, logprobs: 1, stream: true });
    const tokens = streamed.events.filter((e) => e !== '[DONE]' && e.choices.length === 1);
    expect(tokens.map((e) => e.choices[0].logprobs.text_offset)).toEqual([[0], [1], [2]]);
    const three = await postJson(`${w.url}/v1/completions`, { prompt: 'hi', max_tokens: 3 });
    expect(tokens.map((e) => e.choices[0].logprobs.tokens[0]).join('')).toBe(three.json.choices[0].text);
  });

  test("continuous usage stats (with include_usage) put each sequence's counts so far in every chunk", async () => {
    const w = await worker();
    const body = { prompt: ['hi', 'hello'], max_tokens: 3, stream: true, n: 2 };
    const continuous = await sse(`${w.url}/v1/completions`, {
      ...body,
      stream_options: { include_usage: true, continuous_usage_stats: true },
    });
    const chunks = continuous.events.filter((e) => e !== '[DONE]' && e.choices.length === 1);
    // Per choice: its prompt's tokens, its own output so far.
    for (const index of [0, 1, 2, 3]) {
      const own = chunks
        .filter((e) => e.choices[0].index === index)
        .map((e) => [e.usage.prompt_tokens, e.usage.completion_tokens, e.usage.total_tokens]);
      const p = index < 2 ? 2 : 5;
      expect(own, `choice ${index}`).toEqual([1, 2, 3].map((c) => [p, c, p + c]));
    }
    expect(continuous.events.at(-2)).toMatchObject({ choices: [], usage: { prompt_tokens: 7, completion_tokens: 12, total_tokens: 19 } });
    // Without include_usage they are off, as in vLLM.
    const alone = await sse(`${w.url}/v1/completions`, { ...body, stream_options: { continuous_usage_stats: true } });
    expect(alone.events.filter((e) => e !== '[DONE]' && e.usage)).toEqual([]);
  });

  test('return_token_ids gives the prompt and output ids beside the text, whole and streamed, a stop token included', async () => {
    const w = await worker();
    const body = { prompt: PROMPT, max_tokens: 20, stop_token_ids: [32], return_token_ids: true };
    const whole = await postJson(`${w.url}/v1/completions`, body);
    const c = whole.json.choices[0];
    expect(c.prompt_token_ids).toEqual(mockTokenize(PROMPT));
    // The ids run through the stop token, whose text is left out.
    expect([c.token_ids.length, c.token_ids.at(-1), c.stop_reason]).toEqual([whole.json.usage.completion_tokens, 32, 32]);
    expect(String.fromCharCode(...c.token_ids)).toBe(`${c.text} `);
    const streamed = await sse(`${w.url}/v1/completions`, { ...body, stream: true });
    const chunks = streamed.events.filter((e) => e !== '[DONE]' && e.choices.length === 1);
    expect(chunks.flatMap((e) => e.choices[0].token_ids)).toEqual(c.token_ids);
    expect(chunks.map((e) => e.choices[0].prompt_token_ids !== undefined)).toEqual(chunks.map((_, i) => i === 0));
    expect(chunks[0].choices[0].prompt_token_ids).toEqual(c.prompt_token_ids);
    // A chat's prompt ids sit beside its choices; without the flag there are none.
    const chat = await postJson(`${w.url}/v1/chat/completions`, {
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 3,
      return_token_ids: true,
    });
    expect([chat.json.prompt_token_ids.length, chat.json.choices[0].token_ids.length]).toEqual([chat.json.usage.prompt_tokens, 3]);
    const plain = await postJson(`${w.url}/v1/completions`, { prompt: PROMPT, max_tokens: 2 });
    expect(['token_ids' in plain.json.choices[0], 'prompt_token_ids' in plain.json.choices[0]]).toEqual([false, false]);
    // With echo, vLLM returns the prompt as ids instead of text; its logprobs still cover it.
    const echo = { prompt: 'hi', max_tokens: 2, echo: true, return_token_ids: true, logprobs: 0 };
    const echoed = (await postJson(`${w.url}/v1/completions`, echo)).json.choices[0];
    expect([echoed.text, echoed.prompt_token_ids, echoed.token_ids.length, echoed.logprobs.tokens.length]).toEqual([
      (await postJson(`${w.url}/v1/completions`, { prompt: 'hi', max_tokens: 2 })).json.choices[0].text,
      mockTokenize('hi'),
      2,
      4,
    ]);
    const echoStream = (await sse(`${w.url}/v1/completions`, { ...echo, stream: true })).events.filter((e) => e !== '[DONE]');
    expect(echoStream.map((e) => e.choices[0].text).join('')).toBe(echoed.text);
    expect(echoStream[0].choices[0].prompt_token_ids).toEqual(mockTokenize('hi'));
  });

  test("a chat's echo puts the assistant message it continues first; max_completion_tokens wins over max_tokens", async () => {
    const w = await worker();
    const messages = [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'Sure: ' },
    ];
    const body = { messages, max_tokens: 4, add_generation_prompt: false, continue_final_message: true };
    const plain = await postJson(`${w.url}/v1/chat/completions`, body);
    const echoed = await postJson(`${w.url}/v1/chat/completions`, { ...body, echo: true });
    expect(echoed.json.choices[0].message.content).toBe(`Sure: ${plain.json.choices[0].message.content}`);
    const streamed = await sse(`${w.url}/v1/chat/completions`, { ...body, echo: true, stream: true });
    const text = streamed.events
      .filter((e) => e !== '[DONE]' && e.choices.length === 1)
      .map((e) => e.choices[0].delta.content ?? '')
      .join('');
    expect(text).toBe(echoed.json.choices[0].message.content);
    // A chat's max_completion_tokens wins over its deprecated max_tokens, as vLLM reads them.
    const both = await postJson(`${w.url}/v1/chat/completions`, {
      messages: [{ role: 'user', content: 'hi' }],
      max_completion_tokens: 5,
      max_tokens: 3,
    });
    expect(both.json.usage.completion_tokens).toBe(5);
    // After a user message there is nothing to echo.
    const afterUser = await postJson(`${w.url}/v1/chat/completions`, {
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 4,
      echo: true,
    });
    expect(afterUser.json.choices[0].message.content).toHaveLength(4);
  });
});

describe("mock worker: a chat's tool_choice", () => {
  test("is checked against its tools as vLLM's chat schema checks it, before the model", async () => {
    const w = await worker();
    const tools = [{ type: 'function', function: { name: 'weather', parameters: {} } }];
    const usage = 'Correct usage: `{"type": "function", "function": {"name": "my_function"}}`';
    const cases: [Record<string, unknown>, string][] = [
      [{ tool_choice: 'auto' }, 'When using `tool_choice`, `tools` must be set.'],
      [
        { tools, tool_choice: 'sometimes' },
        'Invalid value for `tool_choice`: sometimes! Only named tools, "none", "auto" or "required" are supported.',
      ],
      [{ tools, tool_choice: { type: 'function' } }, `Invalid value for \`function\`: \`null\` in \`tool_choice\`! ${usage}`],
      [{ tools, tool_choice: { type: 'function', function: {} } }, `Expected field \`name\` in \`function\` in \`tool_choice\`! ${usage}`],
      [
        { tools, tool_choice: { type: 'function', function: { name: '' } } },
        `Invalid \`name\` in \`function\`: \`\` in \`tool_choice\`! ${usage}`,
      ],
      [
        { tools, tool_choice: { type: 'function', function: { name: 'stocks' } } },
        'The tool specified in `tool_choice` does not match any of the specified `tools`',
      ],
    ];
    for (const [fields, message] of cases) {
      const r = await postJson(`${w.url}/v1/chat/completions`, {
        messages: [{ role: 'user', content: 'hi' }],
        model: 'other',
        max_tokens: 2,
        ...fields,
      });
      expect([r.status, r.json.error?.message], JSON.stringify(fields)).toEqual([400, message]);
    }
    for (const fields of [
      { tool_choice: 'none' },
      { tools, tool_choice: 'required' },
      { tools },
      { tools, tool_choice: { type: 'function', function: { name: 'weather' } } },
    ]) {
      const r = await postJson(`${w.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...fields });
      expect(r.status, JSON.stringify(fields)).toBe(200);
    }
    expect(w.stats().finished).toEqual([4]);
  });
});

describe.each(BACKENDS)('mock worker: a stopped sequence caches only what it generated (%s)', (backend) => {
  test('the index sees a stopped request as one of its stopped length, shorter than the unstopped one', async () => {
    const workers = await Promise.all(
      [1, 2, 3].map(() => startMockWorker({ port: 0, speedup: 20, blockSize: 4, kvEvents: 'tcp://127.0.0.1:0' })),
    );
    for (const w of workers) closeAfter(() => w.close());
    const index = new KvIndex({ blockSize: 4, backend });
    closeAfter(() => index.close());
    for (const [i, w] of workers.entries()) index.subscribe({ workerId: i + 1, endpoint: w.kvEventsEndpoints });
    await sleep(300);
    const prompt = PROMPT;
    const full = (await postJson(`${workers[2].url}/v1/completions`, { prompt, max_tokens: 40 })).json.choices[0].text as string;
    const stop = full.slice(20, 23);
    const stopped = await postJson(`${workers[0].url}/v1/completions`, { prompt, max_tokens: 40, stop: [stop] });
    const n = stopped.json.usage.completion_tokens;
    expect([stopped.json.choices[0].finish_reason, n < 40]).toEqual(['stop', true]);
    await postJson(`${workers[1].url}/v1/completions`, { prompt, max_tokens: n });
    const tokens = mockTokenize(prompt + full);
    const blocks = (id: bigint) => index.findMatchesForRequest(tokens).scores.find((s) => s.workerId === id)?.blocks ?? 0;
    await waitFor(() => [1n, 2n, 3n].every((id) => blocks(id) > 0), 'every worker stored');
    await sleep(300);
    expect(blocks(1n)).toBe(blocks(2n));
    expect(blocks(1n)).toBeLessThan(blocks(3n));
  });
});
