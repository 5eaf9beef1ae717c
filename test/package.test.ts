import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { expect, test } from 'vitest';
import { ROOT, requireDist } from './helpers/dist.js';
import { scratchDir } from './helpers/scratch-dir.js';

/**
 * What a user gets: the tarball `npm pack` makes, installed into an empty project, on a PATH
 * without cargo or rustc, must load the prebuilt native backend from both module systems.
 */
const work = scratchDir('kvroute-pack-');

test('the packed tarball ships the native module, loads it and runs its command without a Rust toolchain', () => {
  requireDist();
  const packed = JSON.parse(
    execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], { cwd: ROOT, encoding: 'utf8' }),
  );
  const files: string[] = packed[0].files.map((f: { path: string }) => f.path);
  expect(files).toContain('native/kvroute.linux-x64-gnu.node');
  expect(files).toContain('dist/index.js');
  expect(files).toContain('dist/index.cjs');
  expect(files).toContain('dist/cli.js');
  expect(files.some((f) => f.startsWith('crates/') || f.startsWith('ts/') || f.startsWith('test/'))).toBe(false);
  // Metadata a registry page needs, and nothing unused: no CJS command, no source maps.
  expect(files).toContain('LICENSE');
  expect(files.some((f) => f.endsWith('.map') || f === 'dist/cli.cjs')).toBe(false);
  const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  expect(manifest.license).toBe('Apache-2.0');
  expect(manifest.keywords.length).toBeGreaterThan(3);
  // Every relative link of the README points at a file the tarball carries.
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  for (const [, target] of readme.matchAll(/\]\((?!https?:|#)([^)#]+)/g)) expect(files).toContain(target);

  const app = join(work, 'app');
  execFileSync('mkdir', ['-p', app]);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }));
  // --prefer-offline: the runtime dependencies (fastify, prom-client, …) come from the npm cache where
  // it has them, else from the registry, as for any user.
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', join(work, packed[0].filename)], {
    cwd: app,
    encoding: 'utf8',
  });

  const path = [dirname(process.execPath), '/usr/bin', '/bin'].join(':');
  const env = { PATH: path, HOME: work };
  expect(() => execFileSync('sh', ['-c', 'command -v cargo || command -v rustc'], { env })).toThrow();
  const cjs = execFileSync(
    process.execPath,
    ['-e', "const k = require('kvroute'); console.log(k.backend, k.blockHashes([1,2,3,4], 4)[0])"],
    {
      cwd: app,
      env,
      encoding: 'utf8',
    },
  );
  expect(cjs.trim()).toBe('native 14643705804678351452n');
  const esm = execFileSync(process.execPath, ['--input-type=module', '-e', "const k = await import('kvroute'); console.log(k.backend)"], {
    cwd: app,
    env,
    encoding: 'utf8',
  });
  expect(esm.trim()).toBe('native');
  const bin = execFileSync(join(app, 'node_modules', '.bin', 'kvroute'), ['gen-trace', '--requests', '3'], {
    cwd: app,
    env,
    encoding: 'utf8',
  });
  expect(bin.trim().split('\n')).toHaveLength(3);
});
