import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { generateTrace, KvRouteError, parseTrace, type ReplayOptions, type ReplayReport, replay } from '../ts/index.js';
import { ROOT, requireDist } from './helpers/dist.js';
import { withoutWallClock } from './helpers/replay-report.js';
import { scratchDir } from './helpers/scratch-dir.js';

/** One round-robin worker replaying `lines` (Mooncake JSONL) on both backends, which must simulate alike; the native policy report. */
async function roundRobinOnBoth(lines: string[], opts: Omit<ReplayOptions, 'trace' | 'policies' | 'backend'>) {
  const run = (backend: 'native' | 'js') =>
    replay({ ...opts, trace: parseTrace(lines.join('\n')), workers: 1, policies: ['round-robin'], backend });
  const [native, js] = [await run('native'), await run('js')];
  expect(withoutWallClock(js).policies).toEqual(withoutWallClock(native).policies);
  return native.policies[0];
}

/**
 * One worker of 40 GPU blocks of 64 tokens and 64 of host memory: A's prompt leaves the GPU for
 * B's and stays in host memory; C repeats it at 2 s and loads it back.
 */
const OFFLOAD_FLEET = { numGpuBlocks: 40, cpuOffloadBlocks: 64, blockSize: 64 };
const LOADED_BACK_AT_2S = [
  '{"timestamp": 0, "input_length": 512, "output_length": 2, "hash_ids": [1]}',
  '{"timestamp": 100, "input_length": 2432, "output_length": 2, "hash_ids": [2, 3, 4, 5, 6]}',
  '{"timestamp": 2000, "input_length": 1000, "output_length": 2, "hash_ids": [1, 7]}',
];

const small = () => generateTrace({ requests: 250, rate: 6, prefixGroups: 6, sharedPrefixBlocks: 6, turns: 4, seed: 11 });
const smallFleet = { workers: 4, numGpuBlocks: 4096 };

describe.each(['dynamo', 'classic'] as const)('replay with %s timing', (timing) => {
  test('KV-aware routing beats round-robin on a workload with shared prefixes', async () => {
    const report = await replay({ timing, trace: small(), policies: ['kv', 'round-robin'], ...smallFleet });
    const [kv, rr] = report.policies;
    expect(kv.requests).toBe(250);
    expect(rr.requests).toBe(250);
    expect(kv.hitRatio).toBeGreaterThan(rr.hitRatio);
    expect(kv.ttftMs.mean).toBeLessThan(rr.ttftMs.mean);
    expect(kv.hitRatio).toBeLessThanOrEqual(report.trace.upperBoundHitRatio);
    expect(rr.workers.map((w) => w.requests)).toEqual([63, 63, 62, 62]);
    for (const p of report.policies) {
      expect(p.ttftMs.p50).toBeLessThanOrEqual(p.ttftMs.p99);
      expect(p.ttftMs.p99).toBeLessThanOrEqual(p.ttftMs.max);
      expect(p.e2eMs.mean).toBeGreaterThan(p.ttftMs.mean);
      expect(p.cdf.ttftMs.length).toBeGreaterThan(10);
    }
  });

  test('is deterministic: the same options give the same report', async () => {
    const a = await replay({ timing, trace: small(), policies: ['kv', 'random'], ...smallFleet, seed: 5 });
    const b = await replay({ timing, trace: small(), policies: ['kv', 'random'], ...smallFleet, seed: 5 });
    expect(JSON.stringify(withoutWallClock(b))).toBe(JSON.stringify(withoutWallClock(a)));
  });

  test('the native and pure-JS backends simulate identically', async () => {
    const opts = { trace: small(), policies: ['kv' as const], ...smallFleet, dpSize: 2 };
    const native = await replay({ timing, ...opts, backend: 'native' });
    const js = await replay({ timing, ...opts, backend: 'js' });
    expect(withoutWallClock(js).policies).toEqual(withoutWallClock(native).policies);
  });

  test("decodeSpeedup (Dynamo's decode_speedup_ratio): the backends still simulate identically, and decode passes are shorter", async () => {
    const opts = { trace: small(), policies: ['round-robin' as const], ...smallFleet };
    const native = await replay({ timing, ...opts, decodeSpeedup: 4, backend: 'native' });
    const js = await replay({ timing, ...opts, decodeSpeedup: 4, backend: 'js' });
    expect(withoutWallClock(js).policies).toEqual(withoutWallClock(native).policies);
    // Round robin places the requests alike at any speed; only the passes' lengths differ.
    const plain = (await replay({ timing, ...opts })).policies[0];
    const fast = native.policies[0];
    expect(fast.itlMs.mean).toBeLessThan(plain.itlMs.mean / 2);
    expect(fast.e2eMs.mean).toBeLessThan(plain.e2eMs.mean);
    expect(native.config.decodeSpeedup).toBe(4);
  });

  test("without prefix caching (vLLM's --no-enable-prefix-caching) nothing is reused, on both backends alike", async () => {
    const opts = { trace: small(), policies: ['kv' as const, 'round-robin' as const], ...smallFleet, prefixCaching: false };
    const native = await replay({ timing, ...opts, backend: 'native' });
    const js = await replay({ timing, ...opts, backend: 'js' });
    expect(withoutWallClock(js).policies).toEqual(withoutWallClock(native).policies);
    expect(native.config.prefixCaching).toBe(false);
    const cached = await replay({ timing, ...opts, prefixCaching: true, backend: 'native' });
    for (const [i, p] of native.policies.entries()) {
      expect(p.hitRatio, p.name).toBe(0);
      // The same trace with caching reuses prefixes and answers sooner.
      expect(cached.policies[i].hitRatio, p.name).toBeGreaterThan(0.2);
      expect(p.ttftMs.mean, p.name).toBeGreaterThan(cached.policies[i].ttftMs.mean);
    }
  });

  test('with CPU offload the backends still simulate identically, and loads from host memory are counted', async () => {
    // The conversations outgrow 4 GPUs of 256 blocks; host memory holds 512 more per rank.
    const opts = { trace: small(), ...smallFleet, numGpuBlocks: 256, cpuOffloadBlocks: 512 };
    const policies = ['kv' as const, { name: 'host ignored', routerConfig: { hostCacheHitWeight: 0 } }, 'round-robin' as const];
    const native = await replay({ timing, ...opts, policies, backend: 'native' });
    const js = await replay({ timing, ...opts, policies, backend: 'js' });
    expect(withoutWallClock(js).policies).toEqual(withoutWallClock(native).policies);
    for (const p of native.policies) expect(p.hostLoadedBlocks).toBeGreaterThan(0);
    // Without host memory nothing loads, and the same fleet serves less from cache under a
    // policy that ignores caches altogether (its placement does not depend on them).
    const gpuOnly = await replay({ timing, ...opts, cpuOffloadBlocks: 0, policies: ['round-robin'] });
    expect(gpuOnly.policies[0].hostLoadedBlocks).toBe(0);
    expect(native.policies[2].hitRatio).toBeGreaterThan(gpuOnly.policies[0].hitRatio);
  });

  test('custom selectors, queueing routers and data-parallel ranks run to completion', async () => {
    const report = await replay({
      timing,
      trace: small(),
      policies: [{ name: 'first', selector: () => 0 }, 'kv'],
      routerConfig: { routerQueueThreshold: 0.5 },
      ...smallFleet,
      dpSize: 2,
      maxNumBatchedTokens: 2048,
    });
    const [first, kv] = report.policies;
    expect(first.workers.map((w) => w.requests)).toEqual([250, 0, 0, 0]);
    expect(kv.requests).toBe(250);
  });

  test('a later turn of a session arrives its delay after the previous turn finished', async () => {
    const trace = parseTrace(
      [
        '{"timestamp": 0, "input_length": 600, "output_length": 50, "hash_ids": [1, 2], "session_id": "s"}',
        '{"timestamp": 0, "input_length": 1100, "output_length": 50, "hash_ids": [1, 2, 3, 4, 5], "session_id": "s", "delay": 5000}',
      ].join('\n'),
    );
    const report = await replay({ timing, trace, workers: 2 });
    const [kv] = report.policies;
    expect(report.policies[0].simulatedSeconds).toBeGreaterThan(5 + (2 * kv.e2eMs.mean) / 1000 - 0.001);
    expect(kv.hitRatio).toBeGreaterThan(0.3);
  });

  test('approximate mode replays without KV events and still finds shared prefixes', async () => {
    const report = await replay({
      timing,
      trace: small(),
      policies: ['kv', 'round-robin'],
      routerConfig: { useKvEvents: false },
      ...smallFleet,
    });
    const [kv, rr] = report.policies;
    expect(kv.requests).toBe(250);
    expect(kv.hitRatio).toBeGreaterThan(rr.hitRatio);
  });

  test('bad options and requests that cannot fit are rejected clearly', async () => {
    await expect(replay({ timing, trace: small(), workers: 0 })).rejects.toMatchObject({
      code: 'ERR_INVALID_ARG',
      message: expect.stringMatching(/workers/),
    });
    await expect(replay({ timing, trace: small(), policies: ['best' as never] })).rejects.toBeInstanceOf(KvRouteError);
    await expect(replay({ timing, trace: small(), numGpuBlocks: 8 })).rejects.toMatchObject({
      message: expect.stringMatching(/trace line \d+ needs \d+ KV blocks/),
    });
    await expect(replay({ timing, trace: small(), prefixCaching: 'no' as never })).rejects.toMatchObject({
      code: 'ERR_INVALID_ARG',
      message: expect.stringMatching(/prefixCaching must be a boolean, got/),
    });
    for (const decodeSpeedup of [0, -2, Number.NaN])
      await expect(replay({ timing, trace: small(), decodeSpeedup })).rejects.toMatchObject({
        code: 'ERR_INVALID_ARG',
        message: expect.stringMatching(/decodeSpeedup must be a finite number > 0/),
      });
    await expect(replay({ timing, trace: small(), cpuOffloadBlocks: -1 })).rejects.toMatchObject({
      message: expect.stringMatching(/cpuOffloadBlocks must be a non-negative integer/),
    });
    await expect(replay({ timing, trace: small(), cpuLoadUsPerToken: Number.NaN })).rejects.toMatchObject({
      message: expect.stringMatching(/cpuLoadUsPerToken must be a finite number >= 0/),
    });
    // Router options: an object, valid for a KvRouter, and none the replay sets itself (those were silently overridden).
    const routerConfigs: [unknown, RegExp][] = [
      [5, /routerConfig must be an object of KvRouter options, got 5/],
      [{ blockSize: 8 }, /routerConfig\.blockSize is set by the replay: use blockSize/],
      [{ seed: 1 }, /routerConfig\.seed is set by the replay/],
      [{ bogus: 1 }, /routerConfig has an unknown option "bogus"/],
      [{ routerQueueThreshold: -1 }, /routerConfig\.routerQueueThreshold must be/],
    ];
    for (const [routerConfig, message] of routerConfigs) {
      await expect(replay({ timing, trace: small(), routerConfig: routerConfig as never })).rejects.toMatchObject({
        code: 'ERR_INVALID_ARG',
        message: expect.stringMatching(message),
      });
    }
  });

  test('a request that cannot fit beside the running ones waits instead of starting and being preempted', async () => {
    // One worker of 16 blocks of 64 tokens. A (2 prompt blocks) grows to 12 blocks as it decodes;
    // B arrives while A runs and needs 14 blocks for its prompt: alone it fits, beside A it does
    // not. Admitted on room for one 128-token chunk, B would be preempted each time A grows, and
    // come back to find its own blocks cached; under Dynamo's rule it waits until A is done.
    const p = await roundRobinOnBoth(
      [
        '{"timestamp": 0, "input_length": 128, "output_length": 600, "hash_ids": [1]}',
        '{"timestamp": 100, "input_length": 896, "output_length": 1, "hash_ids": [2, 3]}',
      ],
      { timing, numGpuBlocks: 16, blockSize: 64, maxNumBatchedTokens: 128 },
    );
    expect(p.requests).toBe(2);
    expect(p.preemptions).toBe(0);
    expect(p.hitRatio).toBe(0);
    // B (arrived at 100 ms) gets its first token only after A's last one.
    expect(p.ttftMs.max + 100).toBeGreaterThanOrEqual(p.e2eMs.max);
  });

  test('a waiting request needs room only for the blocks a running request does not hold already', async () => {
    // A holds 8 prompt blocks (+1 partial) and grows to 12; C shares A's 8 blocks and adds one.
    // C's 9 blocks beside A's 9 would not fit in 16, but the 8 shared ones cost nothing.
    const p = await roundRobinOnBoth(
      [
        '{"timestamp": 0, "input_length": 512, "output_length": 200, "hash_ids": [1]}',
        '{"timestamp": 100, "input_length": 576, "output_length": 1, "hash_ids": [1, 5]}',
      ],
      { timing, numGpuBlocks: 16, blockSize: 64, maxNumBatchedTokens: 1024 },
    );
    expect(p.preemptions).toBe(0);
    expect(p.hitRatio).toBeCloseTo(512 / (512 + 576), 9);
    // C starts while A decodes: both first tokens come long before A's last.
    expect(p.ttftMs.max).toBeLessThan(0.5 * p.e2eMs.max);
  });

  test('a load from host memory runs beside the passes: the loading request waits, the others do not', async () => {
    // D decodes throughout. A's prompt leaves the GPU for B's and stays in host memory; C repeats
    // A's prompt and loads it back. A load a thousand times slower delays C's first token by
    // seconds, and no pass of D's.
    const lines = [
      '{"timestamp": 0, "input_length": 512, "output_length": 2, "hash_ids": [1]}',
      '{"timestamp": 50, "input_length": 64, "output_length": 600, "hash_ids": [9]}',
      '{"timestamp": 100, "input_length": 2048, "output_length": 2, "hash_ids": [2, 3, 4, 5]}',
      '{"timestamp": 2000, "input_length": 1000, "output_length": 2, "hash_ids": [1, 6]}',
    ];
    const fleet = { timing, numGpuBlocks: 40, cpuOffloadBlocks: 64, blockSize: 64 };
    const fast = await roundRobinOnBoth(lines, { ...fleet, cpuLoadUsPerToken: 6 });
    const slow = await roundRobinOnBoth(lines, { ...fleet, cpuLoadUsPerToken: 6000 });
    expect(fast.hostLoadedBlocks).toBeGreaterThan(0);
    expect(slow.hostLoadedBlocks).toBe(fast.hostLoadedBlocks);
    // C waits for its load (and the pass under way when it ends), then prefills.
    const loadMs = (slow.hostLoadedBlocks * 64 * 6000) / 1000;
    expect(slow.ttftMs.max).toBeGreaterThan(loadMs);
    expect(slow.ttftMs.max).toBeLessThan(loadMs + 200);
    expect(slow.itlMs.max).toBeCloseTo(fast.itlMs.max, 6);
  });

  test('a rank waiting only for a load from host memory starts an arriving request at once', async () => {
    // A's prompt leaves the GPU for B's and stays in host memory. C repeats A's prompt at 2 s and
    // loads it back, slowly; nothing else runs, so the rank has only that load to wait for. E
    // arrives 10 ms later with a prompt of its own: it fits beside C's blocks, so it prefills at
    // once instead of waiting for C's load to end (as in Dynamo's simulator and vLLM, whose
    // scheduler skips requests waiting for their KV and runs the rest).
    const lines = [...LOADED_BACK_AT_2S, '{"timestamp": 2010, "input_length": 64, "output_length": 2, "hash_ids": [8]}'];
    const p = await roundRobinOnBoth(lines, { timing, ...OFFLOAD_FLEET, cpuLoadUsPerToken: 6000 });
    expect(p.hostLoadedBlocks).toBeGreaterThan(0);
    const loadMs = (p.hostLoadedBlocks * 64 * 6000) / 1000;
    const ttfts = p.cdf.ttftMs;
    expect(ttfts).toHaveLength(4);
    // C waits for its load; the three others (E among them) take one short prefill each.
    expect(ttfts[3]).toBeGreaterThan(loadMs);
    expect(ttfts[2]).toBeLessThan(200);
  });

  test('blocks still loading from host memory are no one else’s hit: a request sharing them waits for the load', async () => {
    // As above, C loads A's prompt back slowly; F repeats C's prompt 10 ms into that load. The
    // blocks C's load fills hold nothing yet: F waits for the load to end, then finds them on the
    // GPU (it neither hits them early nor loads them a second time).
    const lines = [...LOADED_BACK_AT_2S, '{"timestamp": 2010, "input_length": 1000, "output_length": 2, "hash_ids": [1, 7]}'];
    const opts = { timing, ...OFFLOAD_FLEET };
    const p = await roundRobinOnBoth(lines, { ...opts, cpuLoadUsPerToken: 6000 });
    const loadMs = (p.hostLoadedBlocks * 64 * 6000) / 1000;
    expect(p.hostLoadedBlocks).toBeGreaterThan(0);
    const ttfts = p.cdf.ttftMs;
    // C and F both wait for the one load (F 10 ms less); A and B take one prefill each.
    expect(ttfts[2]).toBeGreaterThan(loadMs - 10);
    expect(ttfts[3]).toBeGreaterThan(loadMs);
    // The blocks come back once, as with fast loads, and F reuses all of C's prompt blocks.
    const fast = await roundRobinOnBoth(lines, { ...opts, cpuLoadUsPerToken: 6 });
    expect(p.hostLoadedBlocks).toBe(fast.hostLoadedBlocks);
    expect(p.hitRatio).toBeCloseTo(fast.hitRatio, 12);
  });

  test('a prompt cached whole that ends on a block boundary recomputes its last block, as vLLM does', async () => {
    const line = (at: number) => `{"timestamp": ${at}, "input_length": 512, "output_length": 2, "hash_ids": [1]}`;
    const p = await roundRobinOnBoth([line(0), line(1000)], { timing, blockSize: 64 });
    // The second request finds all 8 blocks, takes 7 and computes the last 64 tokens.
    expect(p.hitRatio).toBeCloseTo(448 / 1024, 12);
  });

  test('arrivals that share a timestamp share an engine pass only under dynamo timing', async () => {
    const line = (id: number) => `{"timestamp": 0, "input_length": 512, "output_length": 4, "hash_ids": [${id}]}`;
    const trace = parseTrace([line(1), line(2), line(3)].join('\n'));
    const [kv] = (await replay({ timing, trace, workers: 1 })).policies;
    if (timing === 'dynamo') {
      // One pass prefills all three: the same first-token time, one polynomial on 1,536 tokens.
      expect(kv.ttftMs.mean).toBeCloseTo(kv.ttftMs.max, 6);
      expect(kv.ttftMs.max).toBeCloseTo(4.209989e-7 * 1536 ** 2 + 0.01518344 * 1536 + 16.50142, 6);
    } else {
      // The first arrival starts a pass alone; the other two wait for it.
      expect(kv.ttftMs.mean).toBeLessThan(kv.ttftMs.max - 10);
    }
  });

  test('the timing model is validated', async () => {
    await expect(replay({ trace: small(), timing: 'fast' as never })).rejects.toMatchObject({
      code: 'ERR_INVALID_ARG',
      message: expect.stringMatching(/timing/),
    });
  });
});

describe('kvroute command', () => {
  const dir = scratchDir('kvroute-cli-');
  const cli = (args: string[]) => spawnSync(process.execPath, [join(ROOT, 'dist', 'cli.js'), ...args], { encoding: 'utf8', cwd: dir });

  test('gen-trace writes a trace that replay reads, with a JSON report and an HTML page', () => {
    requireDist();
    const text = execFileSync(process.execPath, [join(ROOT, 'dist', 'cli.js'), 'gen-trace', '--requests', '120', '--seed', '3'], {
      encoding: 'utf8',
    });
    expect(parseTrace(text).requests).toHaveLength(120);
    writeFileSync(join(dir, 't.jsonl'), text);
    const run = cli(['replay', 't.jsonl', '--compare', 'kv,round-robin', '--workers', '3', '--report', 'r.json', '--html', 'p.html']);
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/TTFT mean ms/);
    // Without a terminal: only plain progress lines (one per policy at its end for a short run).
    expect(run.stderr).toBe('replay kv: 120/120 requests\nreplay round-robin: 120/120 requests\n');
    expect(run.stdout).toMatch(/^backend: (native|js)\n/);
    const report = JSON.parse(readFileSync(join(dir, 'r.json'), 'utf8')) as ReplayReport;
    expect(report.policies.map((p) => p.name)).toEqual(['kv', 'round-robin']);
    expect(report.trace.path).toBe('t.jsonl');
    const html = readFileSync(join(dir, 'p.html'), 'utf8');
    expect(html).toMatch(/<svg/);
    expect(html).not.toMatch(/https?:|<script|src=/);
    // CPU offload from the command line: the engines load blocks back from host memory.
    const offload = cli([
      'replay',
      't.jsonl',
      '--workers',
      '3',
      '--num-gpu-blocks',
      '256',
      '--cpu-offload-blocks',
      '512',
      '--report',
      'o.json',
      '--html',
      'o.html',
    ]);
    expect(offload.status).toBe(0);
    expect(offload.stdout).toMatch(/host loads \(blocks\) +[1-9]/);
    expect(run.stdout).not.toMatch(/host loads/);
    expect(html).not.toMatch(/loaded back from host memory/);
    expect(readFileSync(join(dir, 'o.html'), 'utf8')).toMatch(/<th>blocks loaded back from host memory<\/th><td>[1-9]/);
    const loads = (JSON.parse(readFileSync(join(dir, 'o.json'), 'utf8')) as ReplayReport).policies[0].hostLoadedBlocks;
    expect(loads).toBeGreaterThan(0);
    expect(report.policies[0].hostLoadedBlocks).toBe(0);
    // Engines without prefix caching, and faster decode steps, from the command line.
    const flags = [
      'replay',
      't.jsonl',
      '--workers',
      '3',
      '--no-enable-prefix-caching',
      '--decode-speedup',
      '2',
      '--report',
      'n.json',
      '--html',
      'n.html',
    ];
    const plain = cli(flags);
    expect(plain.status).toBe(0);
    expect(plain.stdout).toMatch(/hit ratio +0\.0%/);
    expect(plain.stdout).toMatch(/3 workers; engines without prefix caching\n/);
    expect(run.stdout).toMatch(/3 workers; hit ratio ceiling \d+\.\d%\n/);
    expect(readFileSync(join(dir, 'n.html'), 'utf8')).toMatch(/Engines without prefix caching: nothing is reused\./);
    expect(html).toMatch(/Ceiling of the prefix-cache hit ratio/);
    const noCache = JSON.parse(readFileSync(join(dir, 'n.json'), 'utf8')) as ReplayReport;
    expect([noCache.config.prefixCaching, noCache.config.decodeSpeedup, noCache.policies[0].hitRatio]).toEqual([false, 2, 0]);
  });

  test('a custom selector module is loaded by path', () => {
    requireDist();
    writeFileSync(join(dir, 'last.mjs'), 'export default (candidates) => candidates.length - 1;\n');
    const run = cli(['replay', '--router', 'last.mjs', '--limit', '40', '--workers', '2', '--report', 'last.json']);
    expect(run.status).toBe(0);
    const report = JSON.parse(readFileSync(join(dir, 'last.json'), 'utf8')) as ReplayReport;
    expect(report.policies[0].name).toBe('last.mjs');
    expect(report.policies[0].workers.map((w) => w.requests)).toEqual([0, 40]);
  });

  test('the table says how many router replicas routed, and whether they shared load', () => {
    requireDist();
    const small = (...flags: string[]) => cli(['replay', '--limit', '30', '--workers', '2', ...flags]);
    expect(small().stdout).toMatch(/^30 requests \(built-in generated workload\), 2 workers; hit ratio ceiling/m);
    const unsynced = small('--replicas', '3', '--replica-sync', 'off', '--replica-lb', 'round-robin');
    expect(unsynced.stdout).toMatch(/, 2 workers, 3 router replicas \(not sharing load, round-robin balancer\); hit ratio ceiling/);
    const delayed = small('--replicas', '3', '--replica-sync-delay-ms', '2.5', '--arrival-spread-ms', '800');
    expect(delayed.stdout).toMatch(
      /, 3 router replicas \(sharing load after 2\.5 ms, random balancer\); hit ratio ceiling [^;\n]*; arrivals spread over 800 ms\n/,
    );
    const bad = small('--replica-sync', 'off', '--replicas', '2', '--replica-sync-delay-ms', '5');
    expect([bad.status, bad.stderr]).toEqual([2, expect.stringMatching(/--replica-sync-delay-ms needs --replica-sync on/)]);
  });

  test('help, version, and errors found before a simulation starts', () => {
    requireDist();
    const top = cli(['--help']);
    expect(top.status).toBe(0);
    expect(top.stdout).toMatch(/mock-worker/);
    expect(cli(['--version']).stdout.trim()).toBe(`kvroute ${JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version}`);
    for (const flag of ['--help', '-h']) {
      const help = cli(['replay', flag]);
      expect(help.status).toBe(0);
      expect(help.stdout).toMatch(/--workers <number>\s+simulated workers \(default: 16\)/);
      expect(help.stdout).toMatch(/its code runs/);
    }
    expect(cli(['gen-trace', '--help']).stdout).toMatch(/--requests <number>\s+requests to generate \(default: 2000\)/);
    expect(cli(['mock-worker', '--help']).stdout).toMatch(/--wire <vllm-0.33\|vllm-0.11\|sglang>/);
    // The mock worker's option errors name its flags.
    const badRanks = cli(['mock-worker', '--port', '0', '--dp-size', '0']);
    expect(badRanks.status).toBe(2);
    expect(badRanks.stderr).toMatch(/--dp-size must be an integer in \[1, 64\], got 0/);
    expect(cli(['mock-worker', '--port', '0', '--replay', 'tcp://127.0.0.1:1']).stderr).toMatch(/--replay needs --kv-events/);
    // serve's long --worker flag gets a line of its own; the other descriptions stay in a narrow column.
    const serve = cli(['serve', '--help']).stdout;
    expect(serve).toMatch(/\n {2}--worker <id=1,url=[^\n]*\n {20,44}a worker; repeat for several\n/);
    expect(serve).toMatch(/\n {2}--port <number> {2,30}proxy port/);
    const policy = cli(['replay', '--router', 'kv2']);
    expect(policy.status).toBe(2);
    expect(policy.stderr).toMatch(/unknown policy "kv2": use kv, round-robin, random, or the path of a selector module/);
    const t0 = Date.now();
    const unwritable = cli(['replay', '--report', join(dir, 'missing', 'r.json')]);
    expect(unwritable.status).toBe(2);
    expect(unwritable.stderr).toMatch(/--report .* cannot be written/);
    expect(cli(['replay', '--html', dir]).stderr).toMatch(/is a directory/);
    // Checked up front: the default workload takes seconds to simulate, these fail at once.
    expect(Date.now() - t0).toBeLessThan(5000);
  });

  test('replay reports its backend; onProgress fires once per step and once at the end', async () => {
    const calls: number[] = [];
    const report = await replay({
      trace: generateTrace({ requests: 100, seed: 2 }),
      workers: 2,
      backend: 'js',
      onProgress: (_p, done) => calls.push(done),
    });
    expect(report.config.backend).toBe('js');
    expect(calls.at(-1)).toBe(100);
    expect(calls.filter((d) => d === 100)).toHaveLength(1);
    expect(calls).toEqual([...calls].sort((a, b) => a - b));
  });

  test('usage errors exit 2 with a message; a bad trace names its line', () => {
    requireDist();
    expect(cli(['replay', '--wrkers', '2']).status).toBe(2);
    expect(cli(['replay', '--workers', 'many']).stderr).toMatch(/--workers must be a number/);
    expect(cli(['frobnicate']).status).toBe(2);
    writeFileSync(join(dir, 'bad.jsonl'), '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [0]}\n{"timestamp": "x"}\n');
    const bad = cli(['replay', 'bad.jsonl']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/trace line 2/);
  });
});
