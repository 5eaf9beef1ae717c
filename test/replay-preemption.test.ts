/**
 * Which running request a replay engine preempts when its KV blocks run out (`preemptionMode`,
 * Dynamo's mocker `preemption_mode`), on both backends. The fleet tests follow two requests
 * through a pool too small for both, with pass timings computed by hand from Dynamo's
 * polynomials; the whole-replay tests compare the backends and check the option and the flag.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { resolveBackend } from '../ts/backend.js';
import type { ReplayFleetSpec } from '../ts/backend-types.js';
import { generateTrace, replay } from '../ts/index.js';
import { decodeMs, prefillMs } from '../ts/replay/timing.js';
import { BACKENDS } from './helpers/backends.js';
import { ROOT, requireDist } from './helpers/dist.js';
import { Rng } from './helpers/random.js';
import { drive, fleetSpec } from './helpers/replay-fleet.js';
import { simulatedPolicies } from './helpers/replay-report.js';

describe.each(BACKENDS)('preemption order in the replay fleet (%s)', (backend) => {
  const make = (over: Partial<ReplayFleetSpec>) => resolveBackend(backend).createReplayFleet(fleetSpec(over));
  /** Both start together in one prefill; each first token comes from it. */
  const p1 = prefillMs(16);

  test('FIFO preempts the oldest running request, taking back the token it made earlier in the pass', () => {
    // Five blocks of 4 tokens. A and B (2 blocks each) prefill together; in pass 2 each needs a
    // third block for its ninth token: A, served first, takes the last free one; B finds none.
    const reqs = [
      { at: 0, blocks: [1, 2], input: 8, output: 4 },
      { at: 0, blocks: [3, 4], input: 8, output: 4 },
    ];
    const [a, b] = drive(make({ numGpuBlocks: 5, preemptionMode: 'fifo' }), reqs).outcomes;
    // Pass 2 (both decoding, 3 blocks each): B preempts A, the oldest; A's token of this pass is
    // taken back (its context is 9 again), and B takes A's third block.
    expect([a.preemptions, b.preemptions]).toEqual([1, 0]);
    expect([a.firstToken, b.firstToken]).toEqual([p1, p1]);
    // B decodes alone (3 blocks) to its fourth token while A waits: its 9 tokens need 3 of the 2
    // blocks B leaves (A's own 2 cached blocks are free ones: they count).
    const bEnd = p1 + decodeMs(6 / 5) + 2 * decodeMs(3 / 5);
    expect(b.lastToken).toBeCloseTo(bEnd, 9);
    // Then A comes back to its 2 cached blocks: it computes its ninth token only, and makes its
    // second, third and fourth tokens in 3 passes at 9-11 tokens (3 blocks each).
    expect(a.reused).toBe(8);
    // Its first admission found nothing cached (Dynamo's first-admission reuse counts that).
    expect([a.firstReused, b.firstReused]).toEqual([0, 0]);
    expect(a.lastToken).toBeCloseTo(bEnd + prefillMs(1) + 3 * decodeMs(3 / 5), 9);

    // LIFO (the default): B, the newest, finds nothing newer to preempt and yields itself.
    const lifo = drive(make({ numGpuBlocks: 5 }), reqs).outcomes;
    expect(lifo.map((r) => r.preemptions)).toEqual([0, 1]);
  });

  test('FIFO: the oldest request that needs a block preempts itself; LIFO preempts the newer one', () => {
    // Four blocks: A (8 tokens, 2 blocks) and B (6 tokens, 2 blocks) fill the pool; only A needs
    // a third block (for its ninth token), in pass 2.
    const reqs = [
      { at: 0, blocks: [1, 2], input: 8, output: 3 },
      { at: 0, blocks: [3], input: 6, output: 3 },
    ];
    const [a, b] = drive(make({ numGpuBlocks: 4, preemptionMode: 'fifo' }), reqs).outcomes;
    expect([a.preemptions, b.preemptions]).toEqual([1, 0]);
    const shared = prefillMs(14);
    // Pass 2 (A at 3 blocks, B at 2, decoding): A yields, B makes its second token; pass 3 B its
    // third (its context 8: 2 blocks), and it is done.
    const bEnd = shared + decodeMs(5 / 4) + decodeMs(2 / 4);
    expect(b.lastToken).toBeCloseTo(bEnd, 9);
    // A comes back to its 2 cached blocks, computes its ninth token, then its 2 tokens (9 and 10
    // tokens: 3 blocks).
    expect(a.reused).toBe(8);
    expect(a.lastToken).toBeCloseTo(bEnd + prefillMs(1) + 2 * decodeMs(3 / 4), 9);

    const [la, lb] = drive(make({ numGpuBlocks: 4 }), reqs).outcomes;
    expect([la.preemptions, lb.preemptions]).toEqual([0, 1]);
    expect(la.lastToken).toBeCloseTo(shared + decodeMs(5 / 4) + decodeMs(3 / 4), 9);
  });

  test.each(['lifo', 'fifo'] as const)(
    'seeded crowded fleets (%s): every token after a first is one inter-token gap, however often requests are preempted',
    (preemptionMode) => {
      // The reference: a request of N tokens emits N - 1 after its first, each one gap (a token
      // taken back from a preempted request is made again later, and counted then).
      const rng = new Rng(preemptionMode === 'fifo' ? 11 : 12);
      let preempted = 0;
      for (let round = 0; round < 40; round++) {
        const reqs = Array.from({ length: 2 + rng.int(5) }, (_, i) => {
          const input = 3 + rng.int(14);
          const shared = rng.int(2) === 0; // half share their first block with the others
          const blocks = Array.from({ length: Math.floor(input / 4) }, (_, b) => (b === 0 && shared ? 1 : 100 * (i + 1) + b));
          return { at: rng.int(3) * 5 * i, blocks, input, output: 1 + rng.int(24) };
        });
        const spec = { numGpuBlocks: 11 + rng.int(5), maxNumBatchedTokens: 4 + rng.int(12), requests: reqs.length, preemptionMode };
        const fleet = make(spec);
        const { outcomes } = drive(fleet, reqs);
        const what = JSON.stringify({ spec, reqs });
        expect(fleet.tokenGaps().length, what).toBe(reqs.reduce((n, r) => n + r.output - 1, 0));
        for (const o of outcomes) expect(o.lastToken, what).toBeGreaterThanOrEqual(o.firstToken);
        preempted += outcomes.reduce((n, o) => n + o.preemptions, 0);
      }
      expect(preempted).toBeGreaterThan(20);
    },
  );

  test('the fleet refuses an unknown mode', () => {
    expect(() => make({ preemptionMode: 'newest' as never })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG' }));
  });
});

const trace = () => generateTrace({ requests: 300, rate: 8, prefixGroups: 6, sharedPrefixBlocks: 6, turns: 4, seed: 7 });
/** A crowded fleet: 300 blocks of 64 tokens per worker preempt often. */
const CROWDED = { workers: 4, numGpuBlocks: 300, maxNumSeqs: 64, policies: ['kv' as const, 'round-robin' as const] };

describe.each(['dynamo', 'classic'] as const)('replay with FIFO preemption (%s timing)', (timing) => {
  test('both backends simulate identically, with speculative decoding and host memory too', async () => {
    for (const extra of [{}, { speculative: { draftTokens: 2 } }, { cpuOffloadBlocks: 600 }]) {
      const opts = { trace: trace(), timing, ...CROWDED, ...extra, preemptionMode: 'fifo' as const };
      const native = await replay({ ...opts, backend: 'native' });
      const js = await replay({ ...opts, backend: 'js' });
      expect(simulatedPolicies(native), JSON.stringify(extra)).toEqual(simulatedPolicies(js));
      expect(native.policies[0].preemptions, JSON.stringify(extra)).toBeGreaterThan(0);
      expect(native.config.preemptionMode).toBe('fifo');
    }
  });

  test('FIFO and LIFO choose other victims; preempted requests come back to their blocks, which the first-admission hit ratio leaves out', async () => {
    const fifo = await replay({ trace: trace(), timing, ...CROWDED, preemptionMode: 'fifo' });
    const lifo = await replay({ trace: trace(), timing, ...CROWDED });
    expect(lifo.config.preemptionMode).toBe('lifo');
    expect(simulatedPolicies(fifo)).not.toEqual(simulatedPolicies(lifo));
    for (const p of fifo.policies) {
      expect(p.preemptions, p.name).toBeGreaterThan(0);
      expect(p.firstAdmissionHitRatio, p.name).toBeGreaterThan(0);
      expect(p.firstAdmissionHitRatio, p.name).toBeLessThan(p.hitRatio);
    }
    // Nothing preempted: the two ratios are one.
    const roomy = await replay({ trace: trace(), timing, policies: ['kv'], preemptionMode: 'fifo' });
    expect(roomy.policies[0].preemptions).toBe(0);
    expect(roomy.policies[0].firstAdmissionHitRatio).toBe(roomy.policies[0].hitRatio);
  });
});

describe('the preemptionMode option', () => {
  test.each(BACKENDS)('an unknown mode is refused before anything runs (%s)', async (backend) => {
    for (const bad of ['newest', 'LIFO', 1, null])
      await expect(replay({ trace: trace(), limit: 5, backend, preemptionMode: bad as never })).rejects.toMatchObject({
        code: 'ERR_INVALID_ARG',
        message: expect.stringContaining("preemptionMode must be 'lifo' or 'fifo'"),
      });
  });

  test('kvroute replay --preemption-mode: the table says FIFO; a bad value is a usage error named as the flag', () => {
    requireDist();
    const cli = (args: string[]) =>
      spawnSync(process.execPath, [join(ROOT, 'dist', 'cli.js'), 'replay', ...args], { cwd: ROOT, encoding: 'utf8' });
    const ok = cli(['--limit', '200', '--workers', '2', '--num-gpu-blocks', '300', '--preemption-mode', 'fifo']);
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stdout).toContain('FIFO preemption');
    // Requests were preempted: the first-admission hit ratio has a row, below the hit ratio's.
    const percent = (label: string) => Number(new RegExp(`^${label}\\s+([\\d.]+)%$`, 'm').exec(ok.stdout)?.[1]);
    expect(percent('hit ratio, first admission')).toBeLessThan(percent('hit ratio'));
    const plain = cli(['--limit', '40']).stdout;
    expect(plain).not.toContain('FIFO preemption');
    expect(plain).not.toContain('first admission');
    const bad = cli(['--preemption-mode', 'oldest']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('--preemption-mode must be lifo or fifo, got oldest');
  });
});
