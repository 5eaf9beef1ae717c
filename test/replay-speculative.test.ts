/**
 * Speculative decoding (MTP, EAGLE) in the replay engines, on both backends: multi-token decode
 * steps as Dynamo's mocker samples them (`aic_nextn`, `aic_nextn_accept_rates`). The fleet tests
 * use acceptance rates of 0 and 1, whose bursts are certain, with pass timings computed by hand
 * from Dynamo's polynomials; the whole-replay tests compare the backends and check the options.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { resolveBackend } from '../ts/backend.js';
import type { ReplayFleetSpec } from '../ts/backend-types.js';
import { generateTrace, type ReplayReport, replay, traceToJsonl } from '../ts/index.js';
import { decodeMs, prefillMs } from '../ts/replay/timing.js';
import { BACKENDS } from './helpers/backends.js';
import { ROOT, requireDist } from './helpers/dist.js';
import { drive as driveFleet, fleetSpec } from './helpers/replay-fleet.js';
import { simulatedPolicies } from './helpers/replay-report.js';
import { scratchDir } from './helpers/scratch-dir.js';

/** Two drafts, both always accepted: every step emits 3 tokens (fewer only at the end). */
const ALL_ACCEPTED = { draftTokens: 2, acceptRates: [1, 1], seed: 42 };
/** One draft, never accepted: a token a step, but the engine runs speculatively. */
const NONE_ACCEPTED = { draftTokens: 1, acceptRates: [0], seed: 42 };

describe.each(BACKENDS)('speculative decoding in the replay fleet (%s)', (backend) => {
  const make = (over: Partial<ReplayFleetSpec> = {}) => resolveBackend(backend).createReplayFleet(fleetSpec(over));

  test('each decode step emits the sampled token and the drafts accepted; the first token takes a decode step too', () => {
    const fleet = make({ speculative: ALL_ACCEPTED, requests: 1 });
    const [r] = driveFleet(fleet, [{ at: 5, blocks: [1, 2], input: 8, output: 7 }]).outcomes;
    // Past the first token: two steps, each drawing 3 tokens (the second cut to 1 by the request's end).
    expect(fleet.speculativeSteps()).toEqual([2, 6]);
    // Pass 1: the prefill, then a decode forward over the 8-token context (2 blocks of 64): tokens 1-3.
    const first = 5 + prefillMs(8) + decodeMs(2 / 64);
    expect(r.firstToken).toBe(first);
    // Pass 2 at 11 tokens (3 blocks): tokens 4-6. Pass 3 at 14 (4 blocks): the last token alone.
    expect(r.lastToken).toBeCloseTo(first + decodeMs(3 / 64) + decodeMs(4 / 64), 9);
    // Without speculation: the first token from the prefill, then six one-token passes at 9 to 14 tokens.
    const [plain] = driveFleet(make({ requests: 1 }), [{ at: 5, blocks: [1, 2], input: 8, output: 7 }]).outcomes;
    expect(plain.firstToken).toBe(5 + prefillMs(8));
    expect(plain.lastToken).toBeCloseTo(5 + prefillMs(8) + 4 * decodeMs(3 / 64) + 2 * decodeMs(4 / 64), 9);
  });

  test("a cached prefix's last block is recomputed (vLLM's drafter needs its hidden states)", () => {
    const reqs = [
      { at: 0, blocks: [1, 2], input: 8, output: 1 },
      { at: 100, blocks: [1, 2], input: 9, output: 1 },
    ];
    expect(driveFleet(make(), reqs).outcomes[1].reused).toBe(8);
    const [a, b] = driveFleet(make({ speculative: NONE_ACCEPTED }), reqs).outcomes;
    expect(a.firstToken).toBe(prefillMs(8) + decodeMs(2 / 64));
    // One cached block of two: 5 tokens computed, then the decode step over 9 tokens (3 blocks).
    expect(b.reused).toBe(4);
    expect(b.firstToken).toBeCloseTo(100 + prefillMs(5) + decodeMs(3 / 64), 9);
  });

  test("room for every decoding request's longest burst is made before the step: the newest running request is preempted", () => {
    // Five blocks: A and B (2 blocks each) both start; their first steps need a block each for
    // bursts of 3 tokens, and only one is free.
    const reqs = [
      { at: 0, blocks: [1, 2], input: 8, output: 4 },
      { at: 0, blocks: [3, 4], input: 8, output: 4 },
    ];
    const [a, b] = driveFleet(make({ numGpuBlocks: 5, speculative: ALL_ACCEPTED }), reqs).outcomes;
    // Pass 1: both prefill (16 tokens); B yields, A decodes alone (2 of 5 blocks): tokens 1-3.
    const p1 = prefillMs(16) + decodeMs(2 / 5);
    expect(a.firstToken).toBe(p1);
    // Pass 2: B prefills again (its cached prompt is no use: a one-block hit, recomputed), then
    // yields again to A's step (3 blocks), which ends A.
    const p2 = prefillMs(8) + decodeMs(3 / 5);
    expect(a.lastToken).toBeCloseTo(p1 + p2, 9);
    expect(b.preemptions).toBe(2);
    // Pass 3: B's prefill and first step (tokens 1-3); pass 4: its last token.
    expect(b.firstToken).toBeCloseTo(p1 + p2 + prefillMs(8) + decodeMs(2 / 5), 9);
    expect(b.lastToken).toBeCloseTo(p1 + p2 + prefillMs(8) + decodeMs(2 / 5) + decodeMs(3 / 5), 9);
    // Without speculation both first tokens come from the shared prefill (B yields later, once).
    const plain = driveFleet(make({ numGpuBlocks: 5 }), reqs).outcomes;
    expect(plain.map((r) => [r.firstToken, r.preemptions])).toEqual([
      [prefillMs(16), 0],
      [prefillMs(16), 1],
    ]);
  });

  test('the fleet refuses speculative knobs out of range', () => {
    for (const bad of [
      { draftTokens: 6, acceptRates: [1, 1, 1, 1, 1, 1], seed: 1 },
      { draftTokens: 2, acceptRates: [1], seed: 1 },
      { draftTokens: 1, acceptRates: [1.5], seed: 1 },
      { draftTokens: 1, acceptRates: [Number.NaN], seed: 1 },
      { draftTokens: 1, acceptRates: [0.5], seed: 2 ** 32 },
    ])
      expect(() => make({ speculative: bad }), JSON.stringify(bad)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG' }));
  });
});

const trace = () => generateTrace({ requests: 300, rate: 8, prefixGroups: 6, sharedPrefixBlocks: 6, turns: 4, seed: 7 });

describe.each(['dynamo', 'classic'] as const)('replay with speculative decoding (%s timing)', (timing) => {
  test('both backends simulate identically: a roomy fleet, a crowded one that preempts, and one with host memory', async () => {
    const fleets = [
      { workers: 4, numGpuBlocks: 4096 },
      { workers: 2, numGpuBlocks: 300 },
      { workers: 2, numGpuBlocks: 300, cpuOffloadBlocks: 600 },
    ];
    for (const fleet of fleets) {
      const opts = { timing, trace: trace(), policies: ['kv', 'round-robin'] as const, ...fleet, speculative: { draftTokens: 3 } };
      const native = await replay({ ...opts, policies: [...opts.policies], backend: 'native' });
      const js = await replay({ ...opts, policies: [...opts.policies], backend: 'js' });
      expect(simulatedPolicies(js), JSON.stringify(fleet)).toEqual(simulatedPolicies(native));
      if (fleet.numGpuBlocks === 300 && !('cpuOffloadBlocks' in fleet)) expect(native.policies[0].preemptions).toBeGreaterThan(0);
      if ('cpuOffloadBlocks' in fleet) expect(native.policies[0].hostLoadedBlocks).toBeGreaterThan(0);
      expect(native.config.speculative).toEqual({ draftTokens: 3, acceptRates: [0.85, 0.3, 0], seed: 42 });
    }
  });

  test.each(BACKENDS)(
    'bursts show as gaps of 0 between tokens; the more drafts accepted, the sooner requests end (%s)',
    async (backend) => {
      // Round robin: the same routing in every run, so the hit ratios compare.
      const fleet = { timing, trace: trace(), workers: 4, numGpuBlocks: 4096, policies: ['round-robin' as const], backend };
      const run = (acceptRates: number[]) => replay({ ...fleet, speculative: { draftTokens: 3, acceptRates } });
      const [all, none, plain] = [await run([1, 1, 1]), await run([0]), await replay(fleet)];
      // Four tokens a step: three gaps in four are 0.
      expect(all.policies[0].itlMs.p50).toBe(0);
      // Dynamo's accept length: 4 when every draft is accepted (drawn before the end cuts a burst), 1 when none is.
      expect([all.policies[0].acceptLength, none.policies[0].acceptLength, plain.policies[0].acceptLength]).toEqual([4, 1, undefined]);
      expect(none.policies[0].itlMs.p50).toBeGreaterThan(0);
      expect(all.policies[0].e2eMs.mean).toBeLessThan(0.5 * none.policies[0].e2eMs.mean);
      // No draft accepted: as slow as without speculation, give or take the decode step each first token takes.
      expect(none.policies[0].e2eMs.mean).toBeGreaterThan(0.9 * plain.policies[0].e2eMs.mean);
      // Every cached prefix gives up a block.
      expect(none.policies[0].hitRatio).toBeLessThan(plain.policies[0].hitRatio);
    },
  );

  test.each(BACKENDS)('a different seed draws different bursts; the same seed the same (%s)', async (backend) => {
    const run = (seed: number) => replay({ timing, trace: trace(), workers: 4, speculative: { draftTokens: 2, seed }, backend });
    const [a, b, c] = [await run(1), await run(1), await run(2)];
    expect(simulatedPolicies(b)).toEqual(simulatedPolicies(a));
    expect(c.policies[0].e2eMs.mean).not.toBe(a.policies[0].e2eMs.mean);
    // Dynamo's default rates, 0.85 then 0.3: 1 + 0.85 + 0.85 × 0.3 = 2.105 tokens a step, whatever the seed.
    for (const r of [a, c]) expect(r.policies[0].acceptLength).toBeCloseTo(2.105, 1);
  });
});

describe('speculative decoding options', () => {
  test.each([
    [{ draftTokens: 0 }, /speculative\.draftTokens must be an integer in \[1, 5\], got 0/],
    [{ draftTokens: 6 }, /speculative\.draftTokens must be an integer in \[1, 5\], got 6/],
    [{ draftTokens: 1.5 }, /speculative\.draftTokens must be an integer/],
    [{}, /speculative\.draftTokens must be an integer/],
    [{ draftTokens: 1, acceptRates: [0.5, 0.5] }, /speculative\.acceptRates has 2 rates for 1 draft tokens/],
    [{ draftTokens: 2, acceptRates: [0.5, 1.5] }, /speculative\.acceptRates\[1\] must be a number in \[0, 1\], got 1\.5/],
    [{ draftTokens: 2, acceptRates: [Number.NaN] }, /speculative\.acceptRates\[0\] must be a number in \[0, 1\], got NaN/],
    [{ draftTokens: 2, acceptRates: 0.5 }, /speculative\.acceptRates must be an array/],
    [{ draftTokens: 2, seed: -1 }, /speculative\.seed must be a non-negative integer/],
    [{ draftTokens: 2, seed: 2 ** 32 }, /speculative\.seed must be below 2\^32/],
    [{ draftTokens: 2, nextn: 2 }, /speculative has an unknown option "nextn"/],
    [[2], /speculative must be an object/],
  ])('%j is refused', async (speculative, message) => {
    await expect(replay({ trace: trace(), speculative: speculative as never })).rejects.toMatchObject({ code: 'ERR_INVALID_ARG', message });
  });

  test('not with decodeSpeedup, which models the same speed-up', async () => {
    await expect(replay({ trace: trace(), speculative: { draftTokens: 2 }, decodeSpeedup: 2 })).rejects.toMatchObject({
      code: 'ERR_INVALID_ARG',
      message: expect.stringMatching(/speculative and decodeSpeedup both model/),
    });
  });
});

describe('kvroute replay --num-speculative-tokens', () => {
  const dir = scratchDir('kvroute-spec-');
  const cli = (args: string[]) => spawnSync(process.execPath, [join(ROOT, 'dist', 'cli.js'), ...args], { encoding: 'utf8', cwd: dir });

  test('the flags set the option, and the table says so', () => {
    requireDist();
    writeFileSync(join(dir, 't.jsonl'), traceToJsonl(generateTrace({ requests: 80, seed: 3 })));
    const run = cli([
      'replay',
      't.jsonl',
      '--workers',
      '2',
      '--num-speculative-tokens',
      '2',
      '--spec-accept-rates',
      '0.9,0.5',
      '--spec-seed',
      '7',
      '--report',
      's.json',
    ]);
    expect(run.stderr).not.toMatch(/error/i);
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/speculative decoding: 2 drafts, acceptance 0\.9,0\.5 \(2\.35 tokens a step\)/);
    expect(run.stdout).toMatch(/accept length +2\.[23]\d\n/);
    const report = JSON.parse(readFileSync(join(dir, 's.json'), 'utf8')) as ReplayReport;
    expect(report.config.speculative).toEqual({ draftTokens: 2, acceptRates: [0.9, 0.5], seed: 7 });
    const plain = cli(['replay', 't.jsonl', '--workers', '2']);
    expect(plain.stdout).not.toMatch(/speculative|accept length/);
  });

  test('bad flags are usage errors named as flags', () => {
    requireDist();
    const orphan = cli(['replay', '--spec-accept-rates', '0.5']);
    expect(orphan.status).toBe(2);
    expect(orphan.stderr).toMatch(/--spec-accept-rates and --spec-seed need --num-speculative-tokens/);
    const bad = cli(['replay', '--num-speculative-tokens', '2', '--spec-accept-rates', '0.5,x']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/--spec-accept-rates\[1\] must be a number in \[0, 1\], got NaN/);
    const both = cli(['replay', '--num-speculative-tokens', '2', '--decode-speedup', '2']);
    expect(both.status).toBe(2);
    expect(both.stderr).toMatch(/--num-speculative-tokens and --decode-speedup both model/);
    const many = cli(['replay', '--num-speculative-tokens', '9']);
    expect(many.status).toBe(2);
    expect(many.stderr).toMatch(/--num-speculative-tokens must be an integer in \[1, 5\], got 9/);
  });
});
