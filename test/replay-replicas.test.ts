import { describe, expect, test } from 'vitest';
import { generateTrace, KvRouteError, parseTrace, replay } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { simulatedPolicies } from './helpers/replay-report.js';

/** `n` cold requests with distinct prompts, all arriving at once: the herd case. */
const burst = (n: number) =>
  parseTrace(
    Array.from({ length: n }, (_, i) => JSON.stringify({ timestamp: 0, input_length: 512, output_length: 8, hash_ids: [1000 + i] })).join(
      '\n',
    ),
  );

const small = () => generateTrace({ requests: 200, rate: 8, prefixGroups: 5, sharedPrefixBlocks: 6, turns: 3, seed: 3 });
const fleet = { workers: 4, numGpuBlocks: 4096 };

describe.each(BACKENDS)('replay with router replicas (%s)', (backend) => {
  test('a burst of cold requests: synced replicas spread it over every worker, unsynced ones herd', async () => {
    const opts = { trace: burst(8), workers: 8, replicas: 8, replicaBalancer: 'round-robin' as const, backend };
    const synced = await replay({ ...opts, replicaSync: true });
    expect(synced.policies[0].workers.map((w) => w.requests)).toEqual([1, 1, 1, 1, 1, 1, 1, 1]);
    const unsynced = await replay({ ...opts, replicaSync: false });
    // Each replica sees an idle fleet and breaks the tie on its own: some workers get two or more.
    expect(Math.max(...unsynced.policies[0].workers.map((w) => w.requests))).toBeGreaterThan(1);
    expect(unsynced.policies[0].ttftMs.max).toBeGreaterThan(synced.policies[0].ttftMs.max);
  });

  test('one replica is the single router; replicas are deterministic and reported', async () => {
    const single = await replay({ trace: small(), ...fleet, backend });
    const one = await replay({ trace: small(), ...fleet, backend, replicas: 1, replicaSync: false });
    expect(simulatedPolicies(one)).toEqual(simulatedPolicies(single));
    const a = await replay({ trace: small(), ...fleet, backend, replicas: 4 });
    const b = await replay({ trace: small(), ...fleet, backend, replicas: 4 });
    expect(simulatedPolicies(b)).toEqual(simulatedPolicies(a));
    expect(a.config).toMatchObject({ replicas: 4, replicaSync: true, replicaBalancer: 'random' });
    expect(a.policies[0].requests).toBe(200);
  });
});

test('native and pure-JS replicas simulate identically', async () => {
  const opts = { trace: small(), ...fleet, replicas: 3, replicaBalancer: 'round-robin' as const };
  const native = await replay({ ...opts, backend: 'native' });
  const js = await replay({ ...opts, backend: 'js' });
  expect(simulatedPolicies(js)).toEqual(simulatedPolicies(native));
});

test('bad replica options are rejected before simulating', async () => {
  for (const bad of [{ replicas: 0 }, { replicas: 65 }, { replicaSync: 'yes' }, { replicaBalancer: 'hash' }]) {
    await expect(replay({ trace: burst(2), ...(bad as object) })).rejects.toBeInstanceOf(KvRouteError);
  }
});
