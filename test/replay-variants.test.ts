/**
 * Replay policies with router options of their own: several settings of the KV router side by
 * side in one report, through the API and `kvroute replay --variant`.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { type CandidateScore, generateTrace, type ReplayReport, type RouteRequest, replay, traceToJsonl } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { ROOT, requireDist } from './helpers/dist.js';
import { withoutWallClock } from './helpers/replay-report.js';
import { scratchDir } from './helpers/scratch-dir.js';

const trace = () => generateTrace({ requests: 200, rate: 10, prefixGroups: 4, sharedPrefixBlocks: 6, turns: 3, seed: 5 });
const fleet = { workers: 4, numGpuBlocks: 4096, maxNumBatchedTokens: 2048 };
/** A policy's figures without its name and the wall-clock fields. */
const figures = (r: ReplayReport, i: number) => withoutWallClock({ ...r.policies[i], name: undefined });

describe.each(BACKENDS)('replay variants on the %s backend', (backend) => {
  test("a variant is the KV run with its options: the same as a whole replay with them, and not the default's", async () => {
    const knobs = { overlapScoreCredit: 0.25, decodeActiveRequestWeight: 8 };
    const side = await replay({ trace: trace(), backend, ...fleet, policies: ['kv', { name: 'balanced', routerConfig: knobs }] });
    expect(side.policies.map((p) => p.name)).toEqual(['kv', 'balanced']);
    expect(side.config.policyRouterConfigs).toEqual({ balanced: knobs });
    const alone = await replay({ trace: trace(), backend, ...fleet, routerConfig: knobs });
    const plain = await replay({ trace: trace(), backend, ...fleet });
    expect(figures(side, 1)).toEqual(figures(alone, 0));
    expect(figures(side, 0)).toEqual(figures(plain, 0));
    // Less credit for the cache and a cost per running request: fewer hits, a flatter spread.
    expect(side.policies[1].hitRatio).toBeLessThan(side.policies[0].hitRatio);
    const spread = (i: number) => {
      const n = side.policies[i].workers.map((w) => w.requests);
      return Math.max(...n) - Math.min(...n);
    };
    expect(spread(1)).toBeLessThan(spread(0));
  });

  test("a variant's options go over the replay's routerConfig, and may bring a selector", async () => {
    const report = await replay({
      trace: trace(),
      backend,
      ...fleet,
      routerConfig: { overlapScoreCredit: 0 },
      policies: [
        { name: 'credit-1', routerConfig: { overlapScoreCredit: 1 } },
        { name: 'first', selector: () => 0, routerConfig: { routerTemperature: 0.5 } },
      ],
    });
    const reference = await replay({ trace: trace(), backend, ...fleet });
    expect(figures(report, 0)).toEqual(figures(reference, 0));
    expect(report.policies[1].workers.map((w) => w.requests)).toEqual([200, 0, 0, 0]);
  });

  test("a session's turns carry its id: with sessionAffinityTtlSecs every turn goes to its first turn's worker", async () => {
    const seen = new Map<string, Set<bigint>>();
    const recording = (candidates: readonly CandidateScore[], req: RouteRequest) => {
      // The default choice would do; the first cheapest keeps this selector simple.
      const i = candidates.reduce((best, c, j) => (c.cost < candidates[best].cost ? j : best), 0);
      if (req.sessionId !== undefined) seen.set(req.sessionId, (seen.get(req.sessionId) ?? new Set()).add(candidates[i].workerId));
      return i;
    };
    const workersPerSession = async (routerConfig: Record<string, unknown>) => {
      seen.clear();
      await replay({ trace: trace(), backend, ...fleet, policies: [{ name: 'recorded', selector: recording, routerConfig }] });
      return [...seen.values()].map((w) => w.size);
    };
    const sticky = await workersPerSession({ sessionAffinityTtlSecs: 600 });
    expect(sticky.length).toBeGreaterThan(20);
    expect(sticky.every((n) => n === 1)).toBe(true);
    // By cost alone some sessions' turns move between workers.
    expect((await workersPerSession({})).some((n) => n > 1)).toBe(true);
  });

  test('the report counts session affinity: turns sent to their bound worker, sessions bound', async () => {
    const t = trace();
    const sessions = new Set(t.requests.map((r) => r.sessionId)).size;
    const report = await replay({
      trace: t,
      backend,
      ...fleet,
      policies: ['kv', { name: 'affinity', routerConfig: { sessionAffinityTtlSecs: 600 } }],
    });
    expect(report.policies[0].sessions).toBeUndefined();
    // Every session is bound once, by its first turn; every later turn is a hit.
    expect(report.policies[1].sessions).toEqual({
      hits: t.requests.length - sessions,
      bindings: sessions,
      invalidated: 0,
      expired: 0,
    });
  });

  test('bad policies are refused before any simulation, naming the policy', async () => {
    const cases: [unknown, RegExp][] = [
      [[{ name: 'a', routerConfig: { overlapScoreCredit: -1 } }], /^policies\[0\]\.routerConfig\.overlapScoreCredit must be/],
      [['kv', { name: 'b', routerConfig: { blockSize: 8 } }], /^policies\[1\]\.routerConfig\.blockSize is set by the replay/],
      [[{ name: 'c', routerConfig: { bogus: 1 } }], /policies\[0\]\.routerConfig has an unknown option "bogus"/],
      [
        [{ name: 'o', routerConfig: { routerTrackOutputBlocks: true } }],
        /policies\[0\]\.routerConfig\.routerTrackOutputBlocks is not modelled/,
      ],
      [[{ name: 'd', routerConfig: 'x' }], /policies\[0\]\.routerConfig must be an object/],
      [[{ name: 'e', selector: 3 }], /policies\[0\]\.selector must be a function/],
      [[{ name: 'f' }], /unknown policy/],
      [[{ name: '', routerConfig: {} }], /unknown policy/],
      [['kv', { name: 'kv', routerConfig: {} }], /two policies are named "kv"/],
      [[], /policies must be a non-empty array/],
    ];
    for (const [policies, message] of cases) {
      await expect(replay({ trace: trace(), backend, ...fleet, policies: policies as never })).rejects.toMatchObject({
        code: 'ERR_INVALID_ARG',
        message: expect.stringMatching(message),
      });
    }
    // Checked together with the replay's routerConfig: the alias beside the new name.
    await expect(
      replay({
        trace: trace(),
        backend,
        ...fleet,
        routerConfig: { overlapScoreWeight: 1 },
        policies: [{ name: 'g', routerConfig: { prefillLoadScale: 2 } }],
      }),
    ).rejects.toMatchObject({ message: expect.stringMatching(/^policies\[0\]\.routerConfig\.overlapScoreWeight is the older name/) });
  });
});

describe('kvroute replay --variant', () => {
  const dir = scratchDir('kvroute-variant-');
  const cli = (args: string[]) => spawnSync(process.execPath, [join(ROOT, 'dist', 'cli.js'), ...args], { encoding: 'utf8', cwd: dir });

  test('variants run after the --compare policies, each in the table and the report', () => {
    requireDist();
    writeFileSync(join(dir, 't.jsonl'), traceToJsonl(trace()));
    const run = cli([
      'replay',
      't.jsonl',
      '--compare',
      'kv,round-robin',
      '--variant',
      'decay={"overlapScoreCreditDecay":1}',
      '--variant',
      'no-cache={"overlapScoreCredit":0}',
      '--workers',
      '4',
      '--report',
      'r.json',
    ]);
    expect(run.stderr).not.toMatch(/error/i);
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/kv\s+round-robin\s+decay\s+no-cache/);
    const report = JSON.parse(readFileSync(join(dir, 'r.json'), 'utf8')) as ReplayReport;
    expect(report.policies.map((p) => p.name)).toEqual(['kv', 'round-robin', 'decay', 'no-cache']);
    expect(report.config.policyRouterConfigs).toEqual({ decay: { overlapScoreCreditDecay: 1 }, 'no-cache': { overlapScoreCredit: 0 } });
  });

  test('--sweep runs the KV policy once per value of one option', () => {
    requireDist();
    writeFileSync(join(dir, 'sweep.jsonl'), traceToJsonl(trace()));
    const run = cli(['replay', 'sweep.jsonl', '--sweep', 'decodeActiveRequestWeight=0,2', '--workers', '4', '--report', 's.json']);
    expect(run.status).toBe(0);
    const report = JSON.parse(readFileSync(join(dir, 's.json'), 'utf8')) as ReplayReport;
    expect(report.policies.map((p) => p.name)).toEqual(['kv', 'decodeActiveRequestWeight=0', 'decodeActiveRequestWeight=2']);
    expect(report.config.policyRouterConfigs).toEqual({
      'decodeActiveRequestWeight=0': { decodeActiveRequestWeight: 0 },
      'decodeActiveRequestWeight=2': { decodeActiveRequestWeight: 2 },
    });
    // The default value's run is the plain KV run.
    const { name: _a, wallSeconds: _w1, simSecondsPerWallSecond: _s1, decisionsPerWallSecond: _d1, ...kv } = report.policies[0];
    const { name: _b, wallSeconds: _w2, simSecondsPerWallSecond: _s2, decisionsPerWallSecond: _d2, ...zero } = report.policies[1];
    expect(zero).toEqual(kv);
    for (const [spec, message] of [
      ['decodeActiveRequestWeight', /--sweep must be option=v1,v2/],
      ['decodeActiveRequestWeight=', /--sweep must be option=v1,v2/],
      ['decodeActiveRequestWeight=1,x', /--sweep decodeActiveRequestWeight: "x" is not a JSON value/],
    ] as const) {
      const bad = cli(['replay', '--sweep', spec]);
      expect(bad.status).toBe(2);
      expect(bad.stderr).toMatch(message);
    }
    const unknown = cli(['replay', '--limit', '10', '--sweep', 'overlap_score_credit=0,1']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toMatch(/unknown option "overlap_score_credit": did you mean "overlapScoreCredit"\?/);
  });

  test('a malformed --variant is a usage error', () => {
    requireDist();
    const cases: [string, RegExp][] = [
      ['decay', /--variant must be name=json/],
      ['={"overlapScoreCredit":0}', /--variant must be name=json/],
      ['decay={overlapScoreCreditDecay:1}', /--variant decay: its options are not valid JSON/],
    ];
    for (const [spec, message] of cases) {
      const run = cli(['replay', '--variant', spec]);
      expect(run.status).toBe(2);
      expect(run.stderr).toMatch(message);
    }
    const bad = cli(['replay', '--limit', '10', '--variant', 'x={"overlapScoreCredit":-1}']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/policies\[1\]\.routerConfig\.overlapScoreCredit must be a finite number >= 0/);
  });
});
