import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { generateTrace, loadTrace, parseTrace, replay, synthesizeTokens, traceToJsonl, upperBoundHitRatio } from '../ts/index.js';
import { ROOT } from './helpers/dist.js';
import { expectKvError } from './helpers/errors.js';
import { scratchDir } from './helpers/scratch-dir.js';

const REAL_TRACE = join(ROOT, '..', 'shared', 'traces', 'conversation_trace.jsonl');

const rejects = (fn: () => unknown, message: RegExp) => expectKvError(fn, 'ERR_INVALID_ARG', message);

describe('trace parsing', () => {
  test('Mooncake rows, aliases and multi-turn fields', () => {
    const trace = parseTrace(
      [
        '{"timestamp": 0, "input_length": 700, "output_length": 5, "hash_ids": [0, 1]}',
        '',
        '{"created_time": 12.5, "input_tokens": 10, "output_tokens": 3, "hash_ids": [0], "session_id": "a", "delay": 40}',
        '{"timestamp": 20, "input_length": 16, "output_length": 1, "hash_ids": [4], "chat_id": 7, "parent_chat_id": -1, "turn": 1}',
        '{"timestamp": 30, "input_length": 16, "output_length": 1, "hash_ids": [4, 5], "chat_id": 8, "parent_chat_id": 7, "turn": 2}',
      ].join('\n'),
      { traceBlockSize: 512 },
    );
    expect(trace.requests.map((r) => [r.line, r.timestampMs, r.inputLength, r.outputLength])).toEqual([
      [1, 0, 700, 5],
      [3, 12.5, 10, 3],
      [4, 20, 16, 1],
      [5, 30, 16, 1],
    ]);
    expect(trace.requests[1]).toMatchObject({ sessionId: 'a', delayMs: 40 });
    expect(trace.requests[2]).toMatchObject({ chatId: '7', sessionId: '7', turn: 1 });
    expect(trace.requests[2].parentChatId).toBeUndefined();
    // The second turn joins the session of the chat it continues.
    expect(trace.requests[3]).toMatchObject({ chatId: '8', sessionId: '7', parentChatId: '7', turn: 2 });
  });

  test.each([
    ['{"timestamp": 0, "input_length": 10, "output_length": 1', /line 2: invalid JSON/],
    ['[1, 2]', /line 2: expected a JSON object/],
    ['{"input_length": 10, "output_length": 1, "hash_ids": [0]}', /line 2: timestamp \(or created_time\) is missing/],
    ['{"timestamp": -1, "input_length": 10, "output_length": 1, "hash_ids": [0]}', /line 2: timestamp must be a non-negative/],
    ['{"timestamp": 0, "input_length": 0, "output_length": 1, "hash_ids": [0]}', /line 2: input_length must be an integer >= 1/],
    ['{"timestamp": 0, "input_length": 10, "output_length": 1.5, "hash_ids": [0]}', /line 2: output_length/],
    ['{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": []}', /line 2: hash_ids must be a non-empty array/],
    ['{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0, -2]}', /line 2: hash_ids\[1\]/],
    [
      '{"timestamp": 0, "input_length": 1025, "output_length": 1, "hash_ids": [0, 1]}',
      /line 2: input_length 1025 exceeds 2 hash ids × 512 tokens/,
    ],
    ['{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0], "promt": 1}', /line 2: unknown field "promt"/],
    [
      '{"timestamp": 0, "created_time": 0, "input_length": 10, "output_length": 1, "hash_ids": [0]}',
      /line 2: both timestamp and created_time/,
    ],
    ['{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0], "delay": -5}', /line 2: delay/],
  ])('a malformed line fails with its line number: %s', (row, message) => {
    rejects(() => parseTrace(`{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]}\n${row}`), message);
  });

  test('loadTrace reads a file or parses text; errors are clear', () => {
    const dir = scratchDir('kvroute-trace-');
    const path = join(dir, 't.jsonl');
    writeFileSync(path, '{"timestamp": 5, "input_length": 3, "output_length": 2, "hash_ids": [9]}\n');
    expect(loadTrace(path)).toMatchObject({ path, traceBlockSize: 512, requests: [{ timestampMs: 5, hashIds: [9] }] });
    expect(loadTrace('{"timestamp": 5, "input_length": 3, "output_length": 2, "hash_ids": [9]}').requests).toHaveLength(1);
    rejects(() => loadTrace(join(dir, 'missing.jsonl')), /cannot read trace/);
    rejects(() => parseTrace('\n\n'), /no requests/);
    rejects(() => parseTrace('{}', { traceBlockSize: 0 }), /traceBlockSize/);
  });

  test('the real conversation trace loads whole', () => {
    if (!existsSync(REAL_TRACE)) {
      console.log(`skipped: ${REAL_TRACE} is absent`);
      return;
    }
    const trace = loadTrace(REAL_TRACE);
    expect(trace.requests).toHaveLength(12_031);
    expect(trace.requests.every((r) => r.hashIds[0] === 0)).toBe(true);
  });
});

describe('token synthesis', () => {
  test('equal hash ids give equal tokens, different ids different tokens, cut to the input length', () => {
    const a = synthesizeTokens({ line: 1, timestampMs: 0, inputLength: 1000, outputLength: 1, hashIds: [3, 4] }, 512);
    const b = synthesizeTokens({ line: 2, timestampMs: 0, inputLength: 1024, outputLength: 1, hashIds: [3, 5] }, 512);
    expect(a).toHaveLength(1000);
    expect(a.subarray(0, 512)).toEqual(b.subarray(0, 512));
    const firstB = new Set(b.subarray(512, 1024));
    expect(a.subarray(512, 1000).some((t) => firstB.has(t))).toBe(false);
    // Engine blocks inside one trace block differ from each other.
    expect(a.subarray(0, 64)).not.toEqual(a.subarray(64, 128));
  });

  test('a request or block size built in code is checked as a parsed line would be', async () => {
    const req = { line: 0, timestampMs: 0, inputLength: 600, outputLength: 1, hashIds: [3, 4] };
    // A block size of 0 used to loop forever; too few hash ids gave NaN-derived tokens.
    rejects(() => synthesizeTokens(req, 0), /traceBlockSize must be an integer >= 1, got 0/);
    rejects(() => synthesizeTokens(req, 256), /req\.inputLength 600 exceeds 2 hash ids × 256 tokens/);
    rejects(() => synthesizeTokens({ ...req, hashIds: [3, -1] }, 512), /req\.hashIds\[1\] must be an integer >= 0/);
    rejects(() => synthesizeTokens(undefined as never, 512), /req must be a trace request/);
    const trace = { traceBlockSize: 512, requests: [req, { ...req, inputLength: 1.5 }] };
    rejects(() => upperBoundHitRatio(trace, 64), /trace\.requests\[1\]\.inputLength must be an integer >= 1, got 1\.5/);
    rejects(() => upperBoundHitRatio({ traceBlockSize: 512, requests: [] }, 64), /trace\.requests is empty/);
    await expect(replay({ trace: trace as never, workers: 1 })).rejects.toMatchObject({
      code: 'ERR_INVALID_ARG',
      message: expect.stringMatching(/trace\.requests\[1\]\.inputLength/),
    });
    await expect(replay(null as never)).rejects.toMatchObject({ code: 'ERR_INVALID_ARG' });
    // A valid hand-built trace runs.
    const ok = await replay({ trace: { traceBlockSize: 512, requests: [req] }, workers: 1 });
    expect(ok.policies[0].requests).toBe(1);
    expect(upperBoundHitRatio({ traceBlockSize: 512, requests: [req, req] }, 64)).toBeGreaterThan(0);
  });
});

describe('trace generation', () => {
  test('is deterministic per seed and honours its options', () => {
    const opts = { requests: 300, rate: 10, prefixGroups: 5, sharedPrefixBlocks: 3, turns: 3, seed: 9 };
    const a = generateTrace(opts);
    expect(generateTrace(opts)).toEqual(a);
    expect(generateTrace({ ...opts, seed: 10 })).not.toEqual(a);
    expect(a.requests).toHaveLength(300);
    const ts = a.requests.map((r) => r.timestampMs);
    expect(ts).toEqual([...ts].sort((x, y) => x - y));
    const seconds = ts[ts.length - 1] / 1000;
    expect(300 / seconds).toBeGreaterThan(5);
    expect(300 / seconds).toBeLessThan(20);
    for (const r of a.requests) expect(r.inputLength).toBeLessThanOrEqual(r.hashIds.length * 512);
  });

  test('requests share system prompts, and later turns extend an earlier request of their conversation', () => {
    const { requests } = generateTrace({ requests: 400, prefixGroups: 4, sharedPrefixBlocks: 6, turns: 4, seed: 3 });
    const prefixes = new Set(requests.map((r) => r.hashIds.slice(0, 6).join(',')));
    expect(prefixes.size).toBeLessThanOrEqual(4);
    const isPrefix = (short: number[], long: number[]) => short.length < long.length && short.every((id, i) => long[i] === id);
    const continuations = requests.filter((r, i) =>
      requests.slice(0, i).some((e) => e.hashIds.length > 6 && isPrefix(e.hashIds, r.hashIds)),
    );
    expect(continuations.length).toBeGreaterThan(50);
  });

  test('round-trips through JSONL and rejects bad options', () => {
    const trace = generateTrace({ requests: 20, seed: 2 });
    const back = parseTrace(traceToJsonl(trace));
    expect(back.requests.map((r) => [r.timestampMs, r.inputLength, r.outputLength, r.hashIds])).toEqual(
      trace.requests.map((r) => [r.timestampMs, r.inputLength, r.outputLength, r.hashIds]),
    );
    rejects(() => generateTrace({ requests: 0 }), /requests/);
    rejects(() => generateTrace({ rate: -1 }), /rate/);
  });
});
