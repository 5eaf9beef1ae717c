import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { generateTrace, KvRouteError, parseTrace, type ReplayReport, replay, traceToJsonl } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { ROOT, requireDist } from './helpers/dist.js';
import { Rng } from './helpers/random.js';
import { simulatedPolicies } from './helpers/replay-report.js';
import { scratchDir } from './helpers/scratch-dir.js';

/** Dynamo's mocker polynomials as the README documents them (ms). */
const prefillMs = (t: number) => (t > 0 ? 4.209989e-7 * t * t + 0.01518344 * t + 16.50142 : 0);
const decodeMs = (p: number) => {
  const x = Math.min(p, 1);
  return Math.max(1, -25.74 * x * x + 54.01 * x + 5.74);
};

const BLOCK = 64;
const GPU_BLOCKS = 4096;

interface Isolated {
  at: number;
  hashIds: number[];
  output: number;
}

/** A trace of requests far enough apart that each runs alone, every trace block full. */
const traceOf = (reqs: Isolated[]) =>
  parseTrace(
    reqs
      .map((r) => JSON.stringify({ timestamp: r.at, input_length: 512 * r.hashIds.length, output_length: r.output, hash_ids: r.hashIds }))
      .join('\n'),
  );

/**
 * A deliberately simple model of one prefill worker and one decode worker serving requests one
 * at a time: the prefill worker reuses the longest prefix of hash ids seen before (8 engine
 * blocks per id, at most all but the last block) and computes the rest in one pass; the KV
 * arrives `fixedMs + perTokenMs × input` later (with `missingOnly`, × the tokens past that
 * prefix, which the decode worker holds from the earlier requests: every block of theirs); the
 * decode worker computes no prompt and takes one decode step per output token at its sequence's
 * occupancy.
 */
function reference(reqs: Isolated[], fixedMs: number, perTokenMs: number, missingOnly = false) {
  const seen: number[][] = [];
  let ttft = 0;
  let e2e = 0;
  let cached = 0;
  let prompt = 0;
  const t0 = reqs[0].at;
  for (const r of reqs) {
    const input = 512 * r.hashIds.length;
    let shared = 0;
    for (const s of seen) {
      let k = 0;
      while (k < s.length && k < r.hashIds.length && s[k] === r.hashIds[k]) k++;
      shared = Math.max(shared, k);
    }
    seen.push(r.hashIds);
    const cachedBlocks = Math.min(8 * shared, Math.floor((input - 1) / BLOCK));
    const arrival = r.at - t0;
    const sent = missingOnly ? input - 512 * shared : input;
    const handoff = arrival + prefillMs(input - cachedBlocks * BLOCK) + (fixedMs + sent * perTokenMs);
    const first = handoff + decodeMs(Math.ceil(input / BLOCK) / GPU_BLOCKS);
    let last = first;
    for (let k = 1; k < r.output; k++) last += decodeMs(Math.ceil((input + k) / BLOCK) / GPU_BLOCKS);
    ttft += first - arrival;
    e2e += last - arrival;
    cached += cachedBlocks * BLOCK;
    prompt += input;
  }
  return { ttftMean: ttft / reqs.length, e2eMean: e2e / reqs.length, hitRatio: cached / prompt };
}

const pools = (prefillWorkers: number, decodeWorkers: number, more: object = {}) => ({
  disaggregation: { prefillWorkers, decodeWorkers, ...more },
});

describe.each(BACKENDS)('replay of a disaggregated fleet (%s)', (backend) => {
  test("seeded isolated requests: TTFT, E2E and the hit ratio (the prefill pool's) match a simple model", async () => {
    for (const seed of [1, 2, 3]) {
      const rng = new Rng(seed);
      const reqs: Isolated[] = Array.from({ length: 12 }, (_, i) => ({
        at: i * 60_000,
        // Few ids, so prefixes repeat: a shared head of 0-3 ids, then the request's own.
        hashIds: [
          ...Array.from({ length: rng.int(4) }, (_, k) => k + 1),
          ...Array.from({ length: 1 + rng.int(5) }, (_, k) => 100 * (i + 1) + k),
        ],
        output: 1 + rng.int(40),
      }));
      const handoffMs = rng.int(20);
      const transferUsPerToken = 1 + rng.int(5);
      const missingOnly = seed === 3;
      const report = await replay({
        trace: traceOf(reqs),
        backend,
        numGpuBlocks: GPU_BLOCKS,
        ...pools(1, 1, { handoffMs, transferUsPerToken, ...(missingOnly ? { transferTiming: 'destination-missing' } : {}) }),
      });
      const p = report.policies[0];
      const want = reference(reqs, handoffMs, transferUsPerToken / 1000, missingOnly);
      expect(p.ttftMs.mean, `seed ${seed}`).toBeCloseTo(want.ttftMean, 6);
      expect(p.e2eMs.mean, `seed ${seed}`).toBeCloseTo(want.e2eMean, 6);
      expect(p.hitRatio, `seed ${seed}`).toBeCloseTo(want.hitRatio, 12);
      expect(p.workers.map((w) => [w.role, w.requests])).toEqual([
        ['prefill', reqs.length],
        ['decode', reqs.length],
      ]);
      // A decode worker computes no prompt: it counts none as cached.
      expect(p.workers[1].cachedTokens).toBe(0);
    }
  });

  test('prefills are routed by overlap in the prefill pool; each pool serves every request once', async () => {
    const trace = generateTrace({ requests: 300, rate: 6, prefixGroups: 6, sharedPrefixBlocks: 6, turns: 3, seed: 5 });
    const report = await replay({ trace, backend, policies: ['kv', 'round-robin'], ...pools(4, 3) });
    const [kv, rr] = report.policies;
    expect(kv.hitRatio).toBeGreaterThan(rr.hitRatio + 0.05);
    for (const p of report.policies) {
      const prefill = p.workers.filter((w) => w.role === 'prefill');
      const decode = p.workers.filter((w) => w.role === 'decode');
      expect(prefill.map((w) => w.workerId)).toEqual([0, 1, 2, 3]);
      expect(decode.map((w) => w.workerId)).toEqual([4, 5, 6]);
      expect(prefill.reduce((n, w) => n + w.requests, 0)).toBe(300);
      expect(decode.reduce((n, w) => n + w.requests, 0)).toBe(300);
      // The hit ratio is the prefill pool's: a decode worker computes no prompt, so it counts none as cached.
      expect(prefill.reduce((n, w) => n + w.cachedTokens, 0) / p.workers.reduce((n, w) => n + w.promptTokens, 0)).toBeCloseTo(
        p.hitRatio / 2,
        12,
      );
      expect(decode.every((w) => w.cachedTokens === 0)).toBe(true);
      // Nothing preempted: each prefill leg was admitted once, and a decode worker's own hits count for nothing.
      expect(p.preemptions).toBe(0);
      expect(p.hitRatio).toBe(p.firstAdmissionHitRatio);
    }
    // Round robin takes turns in each pool on its own.
    expect(rr.workers.map((w) => w.requests)).toEqual([75, 75, 75, 75, 100, 100, 100]);
    expect(report.config).toMatchObject({
      workers: 7,
      disaggregation: { prefillWorkers: 4, decodeWorkers: 3, handoffMs: 0, transferUsPerToken: 0 },
    });
  });

  test('a slower handoff delays first tokens by exactly the delay when requests run alone', async () => {
    const reqs: Isolated[] = [1, 2, 3].map((i) => ({ at: i * 60_000, hashIds: [i, i + 10], output: 8 }));
    const run = (more: object) => replay({ trace: traceOf(reqs), backend, numGpuBlocks: GPU_BLOCKS, ...pools(1, 1, more) });
    const base = (await run({})).policies[0];
    const slow = (await run({ handoffMs: 25, transferUsPerToken: 2 })).policies[0];
    // 25 ms + 1,024 tokens × 2 µs on every request.
    expect(slow.ttftMs.mean - base.ttftMs.mean).toBeCloseTo(25 + 1024 * 0.002, 9);
    expect(slow.itlMs).toEqual(base.itlMs);
  });

  test("the prefill worker holds a leg's KV until it has reached the decode worker, which first reserves room for it", async () => {
    // 64 blocks of 64 tokens a worker: a 6-id prompt (48 blocks) leaves no room for a 5-id one (40).
    const numGpuBlocks = 64;
    const decodeStep = (tokens: number) => decodeMs(Math.ceil(tokens / BLOCK) / numGpuBlocks);
    const run = async (reqs: Isolated[], handoffMs: number) => {
      const report = await replay({ trace: traceOf(reqs), backend, numGpuBlocks, ...pools(1, 1, { handoffMs }) });
      return report.policies[0];
    };

    // The source side: B arrives while A's KV is in flight; A's blocks are still held, so B's
    // prefill waits for the transfer's end (a delay that freed them at once would start B at 1 s).
    const held = await run(
      [
        { at: 0, hashIds: [1, 2, 3, 4, 5, 6], output: 1 },
        { at: 1000, hashIds: [11, 12, 13, 14, 15], output: 1 },
      ],
      5000,
    );
    const aSent = prefillMs(3072) + 5000;
    const aFirst = aSent + decodeStep(3072);
    const bFirst = aSent + prefillMs(2560) + 5000 + decodeStep(2560);
    expect(held.ttftMs.mean).toBeCloseTo((aFirst + (bFirst - 1000)) / 2, 6);

    // The destination side: D's prefill ends while C decodes on the only decode worker, which
    // has no room for D's prompt until C finishes; only then does D's transfer start.
    const reserved = await run(
      [
        { at: 0, hashIds: [1, 2, 3, 4, 5, 6], output: 200 },
        { at: 1000, hashIds: [11, 12, 13, 14, 15], output: 1 },
      ],
      100,
    );
    const cFirst = prefillMs(3072) + 100 + decodeStep(3072);
    let cLast = cFirst;
    for (let k = 1; k < 200; k++) cLast += decodeStep(3072 + k);
    const dFirst = cLast + 100 + decodeStep(2560);
    expect(reserved.ttftMs.mean).toBeCloseTo((cFirst + (dFirst - 1000)) / 2, 6);
    expect(reserved.e2eMs.mean).toBeCloseTo((cLast + (dFirst - 1000)) / 2, 6);
    expect(reserved.preemptions).toBe(0);
  });

  test('with router replicas and session affinity both pools still serve every request', async () => {
    const trace = generateTrace({ requests: 200, rate: 8, prefixGroups: 5, sharedPrefixBlocks: 6, turns: 3, seed: 3 });
    const report = await replay({
      trace,
      backend,
      replicas: 3,
      replicaBalancer: 'session',
      routerConfig: { sessionAffinityTtlSecs: 60 },
      ...pools(2, 2),
    });
    const p = report.policies[0];
    expect(p.requests).toBe(200);
    expect(p.workers.map((w) => w.requests).reduce((a, b) => a + b, 0)).toBe(400);
    expect(p.sessions?.hits).toBeGreaterThan(0);
  });

  test('bad disaggregation options are typed errors', async () => {
    const trace = generateTrace({ requests: 5, seed: 1 });
    const bad = async (opts: object, message: RegExp) => {
      const err = await replay({ trace, backend, ...opts }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(KvRouteError);
      expect((err as KvRouteError).code).toBe('ERR_INVALID_ARG');
      expect((err as KvRouteError).message).toMatch(message);
    };
    await bad({ workers: 4, ...pools(2, 2) }, /workers and disaggregation exclude each other/);
    await bad({ disaggregation: { prefillWorkers: 2 } }, /disaggregation\.decodeWorkers is required/);
    await bad({ disaggregation: { prefillWorkers: 0, decodeWorkers: 1 } }, /disaggregation\.prefillWorkers/);
    await bad(pools(1, 1, { handoffMs: -1 }), /disaggregation\.handoffMs/);
    await bad(pools(1, 1, { transferUsPerToken: Number.NaN }), /disaggregation\.transferUsPerToken/);
    await bad(
      pools(1, 1, { transferTiming: 'missing' }),
      /disaggregation\.transferTiming must be 'full-prompt' or 'destination-missing', got "missing"/,
    );
    await bad(pools(1, 1, { handoff: 3 }), /no option "handoff"/);
    await bad({ disaggregation: [1, 1] }, /disaggregation must be an object/);
    await bad({ ...pools(1, 1), routerConfig: { routerTrackActiveBlocks: true } }, /routerConfig\.routerTrackActiveBlocks is set per pool/);
    const own = { name: 'decode-cost', routerConfig: { workerType: 'decode' as const } };
    await bad({ ...pools(1, 1), policies: [own] }, /policies\[0\]\.routerConfig\.workerType is set per pool/);
  });
});

test('both backends give the same disaggregated report', async () => {
  const trace = generateTrace({ requests: 400, rate: 10, prefixGroups: 8, sharedPrefixBlocks: 6, turns: 3, seed: 9 });
  const opts = {
    trace,
    policies: ['kv', 'round-robin'] as const,
    numGpuBlocks: 2048,
    ...pools(3, 2, { handoffMs: 3, transferUsPerToken: 1.5 }),
  };
  const [native, js] = await Promise.all([
    replay({ ...opts, policies: [...opts.policies], backend: 'native' }),
    replay({ ...opts, policies: [...opts.policies], backend: 'js' }),
  ]);
  expect(simulatedPolicies(native)).toEqual(simulatedPolicies(js));
  // Small GPU pools: the comparison covers preemptions, which decode legs recompute. A recompute
  // finds blocks the decode worker cached: the best-admission ratio counts them (as Dynamo's
  // report does), the first-admission one stays the prefill pool's.
  for (const p of native.policies) {
    expect(p.preemptions).toBeGreaterThan(0);
    expect(p.hitRatio).toBeGreaterThan(p.firstAdmissionHitRatio);
  }
});

test('an overloaded fleet finishes: a recompute stalled on blocks that arrived KV holds yields to it', async () => {
  // Small pools and small prefill chunks: a decode worker's preempted request recomputes chunk by
  // chunk while handoffs reserve the blocks it needs; the requests whose KV arrived hold them and
  // can only start once it yields (without that the worker ran nothing, stuck, and the replay failed).
  const trace = generateTrace({ requests: 300, rate: 30, prefixGroups: 8, sharedPrefixBlocks: 6, turns: 3, seed: 2 });
  const opts = { trace, numGpuBlocks: 256, maxNumBatchedTokens: 128, ...pools(2, 2, { handoffMs: 5 }) };
  const [native, js] = await Promise.all([
    replay({ ...opts, policies: ['kv', 'round-robin'], backend: 'native' }),
    replay({ ...opts, policies: ['kv', 'round-robin'], backend: 'js' }),
  ]);
  expect(simulatedPolicies(native)).toEqual(simulatedPolicies(js));
  for (const p of native.policies) {
    expect(p.requests).toBe(300);
    expect(p.workers.filter((w) => w.role === 'decode').reduce((n, w) => n + w.requests, 0)).toBe(300);
    expect(p.preemptions).toBeGreaterThan(0);
  }
});

describe('kvroute replay --prefill-workers --decode-workers', () => {
  const dir = scratchDir('kvroute-disagg-');
  const cli = (args: string[]) => spawnSync(process.execPath, [join(ROOT, 'dist', 'cli.js'), ...args], { encoding: 'utf8', cwd: dir });

  test('the flags set the pools, and the table and the report say so', () => {
    requireDist();
    writeFileSync(join(dir, 't.jsonl'), traceToJsonl(generateTrace({ requests: 120, seed: 4 })));
    const args = ['--prefill-workers', '2', '--decode-workers', '3', '--handoff-ms', '4', '--transfer-us-per-token', '2.5'];
    const run = cli(['replay', 't.jsonl', '--compare', 'kv,round-robin', ...args, '--report', 'd.json', '--html', 'd.html']);
    expect(run.stderr).not.toMatch(/error/i);
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/2 prefill \+ 3 decode workers \(KV handoff 4 ms \+ 2\.5 µs per prompt token\)/);
    const report = JSON.parse(readFileSync(join(dir, 'd.json'), 'utf8')) as ReplayReport;
    expect(report.config.disaggregation).toEqual({
      prefillWorkers: 2,
      decodeWorkers: 3,
      handoffMs: 4,
      transferUsPerToken: 2.5,
      transferTiming: 'full-prompt',
    });
    expect(report.policies[0].workers.map((w) => w.role)).toEqual(['prefill', 'prefill', 'decode', 'decode', 'decode']);
    const html = readFileSync(join(dir, 'd.html'), 'utf8');
    expect(html).toContain('2 prefill + 3 decode workers (KV handoff 4 ms + 2.5 µs per prompt token)');
    expect(html).toMatch(/<title>kv, decode worker 4: \d+ requests/);
    expect(html).toMatch(/>1 P<\/text>.*>2 D<\/text>/s);
    const plain = cli(['replay', 't.jsonl', '--workers', '2']);
    expect(plain.stdout).not.toMatch(/prefill/);
    const missing = cli(['replay', 't.jsonl', ...args, '--transfer-timing', 'destination-missing', '--report', 'm.json']);
    expect(missing.status).toBe(0);
    expect(missing.stdout).toMatch(/\+ 2\.5 µs per prompt token the decode worker lacks\)/);
    const missingReport = JSON.parse(readFileSync(join(dir, 'm.json'), 'utf8')) as ReplayReport;
    expect(missingReport.config.disaggregation).toMatchObject({ transferTiming: 'destination-missing' });
  });

  test('bad flags are usage errors named as flags', () => {
    requireDist();
    const cases: Array<[string[], RegExp]> = [
      [['--prefill-workers', '2'], /needs both --prefill-workers and --decode-workers/],
      [['--handoff-ms', '3'], /--handoff-ms, --transfer-us-per-token and --transfer-timing need --prefill-workers and --decode-workers/],
      [
        ['--prefill-workers', '2', '--decode-workers', '2', '--workers', '4'],
        /--workers and --prefill-workers\/--decode-workers exclude each other/,
      ],
      [['--prefill-workers', '2', '--decode-workers', '0'], /--decode-workers must be a positive integer, got 0/],
      [['--prefill-workers', '1', '--decode-workers', '1', '--handoff-ms=-2'], /--handoff-ms must be/],
      [['--prefill-workers', '1', '--decode-workers', '1', '--transfer-timing', 'some'], /--transfer-timing must be 'full-prompt' or/],
      [['--transfer-timing', 'destination-missing'], /--transfer-timing need --prefill-workers and --decode-workers/],
    ];
    for (const [args, message] of cases) {
      const run = cli(['replay', ...args]);
      expect(run.status, args.join(' ')).toBe(2);
      expect(run.stderr).toMatch(message);
    }
  });
});
