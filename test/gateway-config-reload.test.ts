import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import type { MockWorker } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { killCommandsAfterEach, runCommand } from './helpers/cli-process.js';
import { requireDist } from './helpers/dist.js';
import { closeFleetsAfterEach, startWorker } from './helpers/gateway.js';
import { scrape } from './helpers/prometheus.js';
import { scratchDir } from './helpers/scratch-dir.js';
import { sleep, waitFor } from './helpers/wait.js';

killCommandsAfterEach();
closeFleetsAfterEach();

/** A fleet file: in-process mock workers by id, and any other lines. */
function fleetYaml(workers: [number, MockWorker][], extra: string[] = []): string {
  return [
    'blockSize: 16',
    'health: { intervalMs: 200 }',
    ...extra,
    'workers:',
    ...workers.map(
      ([id, w]) => `  - { id: ${id}, url: "${w.url}", kvEvents: "${w.kvEventsEndpoints[0]}", replay: "${w.replayEndpoints[0]}" }`,
    ),
    '',
  ].join('\n');
}

async function listedIds(admin: string): Promise<number[]> {
  const workers = (await (await fetch(`${admin}/admin/workers`)).json()) as { id: number }[];
  return workers.map((w) => w.id).sort();
}

const sameIds = (admin: string, want: number[]) => async () => JSON.stringify(await listedIds(admin)) === JSON.stringify(want);

describe.each(BACKENDS)('kvroute serve: the config reloaded at run time (%s)', (backend) => {
  test("SIGHUP applies the file's workers; a broken file changes nothing; other options wait for a restart", async () => {
    requireDist();
    const [a, b] = await Promise.all([startWorker(), startWorker()]);
    const config = join(scratchDir('kvroute-reload-'), 'fleet.yaml');
    writeFileSync(config, fleetYaml([[1, a]]));
    const serve = runCommand(
      ['serve', '--config', config, '--port', '0', '--backend', backend, '--log-level', 'info'],
      /admin (http:\/\/127\.0\.0\.1:\d+)/,
    );
    const admin = (await serve.match)[1];
    expect(await listedIds(admin)).toEqual([1]);

    writeFileSync(
      config,
      fleetYaml([
        [1, a],
        [2, b],
      ]),
    );
    serve.child.kill('SIGHUP');
    await waitFor(sameIds(admin, [1, 2]), 'worker 2 to join on SIGHUP');
    expect((await scrape(`${admin}/metrics`)).sum('kvroute_gateway_config_reloads_total', { result: 'applied' })).toBe(1);

    writeFileSync(config, 'blockSize: 16\nworkers: [ {');
    serve.child.kill('SIGHUP');
    await waitFor(
      async () => (await scrape(`${admin}/metrics`)).sum('kvroute_gateway_config_reloads_total', { result: 'rejected' }) === 1,
      'the rejection',
    );
    expect(await listedIds(admin)).toEqual([1, 2]);
    await waitFor(() => serve.output().includes('config reload rejected, nothing changed'), 'the rejection logged');

    // A router option changed too: the workers apply now, the router option at the next restart.
    writeFileSync(config, fleetYaml([[2, b]], ['router: { routerQueueThreshold: 2 }']));
    serve.child.kill('SIGHUP');
    await waitFor(sameIds(admin, [2]), 'worker 1 to leave on SIGHUP');
    const m = await scrape(`${admin}/metrics`);
    expect(m.sum('kvroute_gateway_config_restart_needed')).toBe(1);
    expect(m.sum('kvroute_gateway_worker_health', { worker: '1' })).toBe(0);
    await waitFor(() => /config reload: router changed; they apply at the next restart/.test(serve.output()), 'the warning');

    // Reordered keys are no change; the file back as the gateway runs clears the flag.
    const [head, health, ...workers] = fleetYaml([[2, b]]).split('\n');
    writeFileSync(config, [...workers, health, head, ''].join('\n'));
    serve.child.kill('SIGHUP');
    await waitFor(
      async () => (await scrape(`${admin}/metrics`)).sum('kvroute_gateway_config_reloads_total', { result: 'unchanged' }) === 1,
      'the unchanged reload',
    );
    expect((await scrape(`${admin}/metrics`)).sum('kvroute_gateway_config_restart_needed')).toBe(0);
    // A config that lists no workers at all leaves them be (they may have come through the admin API).
    writeFileSync(config, 'blockSize: 16\nhealth: { intervalMs: 200 }\n');
    serve.child.kill('SIGHUP');
    await waitFor(
      async () => (await scrape(`${admin}/metrics`)).sum('kvroute_gateway_config_reloads_total', { result: 'unchanged' }) === 2,
      'the second unchanged reload',
    );
    expect(await listedIds(admin)).toEqual([2]);
    serve.child.kill('SIGTERM');
    expect(await serve.exited).toBe(0);
  });

  test('--watch-config applies an edited file without a signal; it needs --config', async () => {
    requireDist();
    const [a, b] = await Promise.all([startWorker(), startWorker()]);
    const config = join(scratchDir('kvroute-reload-'), 'fleet.yaml');
    writeFileSync(config, fleetYaml([[1, a]]));
    const serve = runCommand(
      ['serve', '--config', config, '--watch-config', '--port', '0', '--backend', backend, '--log-level', 'warn'],
      /admin (http:\/\/127\.0\.0\.1:\d+)/,
    );
    const admin = (await serve.match)[1];
    writeFileSync(
      config,
      fleetYaml([
        [1, a],
        [7, b],
      ]),
    );
    await waitFor(sameIds(admin, [1, 7]), 'the edited file to be applied', 5000);
    // A file still being written (here: cut short, rewritten every 50 ms for 2.5 s) is not read
    // until it has stayed the same a while, so worker 7 is never taken out meanwhile.
    const reloads = async () => (await scrape(`${admin}/metrics`)).sum('kvroute_gateway_config_reloads_total', { result: 'applied' });
    expect(await reloads()).toBe(1);
    for (let i = 0; i < 50; i++) {
      writeFileSync(config, fleetYaml([[1, a]]));
      await sleep(50);
    }
    writeFileSync(
      config,
      fleetYaml([
        [1, a],
        [7, b],
        [8, b],
      ]),
    );
    await waitFor(sameIds(admin, [1, 7, 8]), 'the finished file to be applied', 5000);
    expect(await reloads()).toBe(2);
    serve.child.kill('SIGTERM');
    expect(await serve.exited).toBe(0);

    const bare = runCommand(['serve', '--block-size', '16', '--watch-config'], /never/);
    bare.match.catch(() => undefined);
    expect(await bare.exited).toBe(2);
    expect(bare.errors()).toMatch(/--watch-config needs --config/);
  });
});
