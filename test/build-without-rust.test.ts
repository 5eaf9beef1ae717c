import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { expect, test } from 'vitest';
import { ROOT } from './helpers/dist.js';

const script = join(ROOT, 'scripts', 'build-native.mjs');
// A PATH with node but without cargo or rustc.
const PATH = [dirname(process.execPath), '/usr/bin', '/bin'].join(':');

test('without Rust, the native build explains what is missing and lets the JS build go on', () => {
  expect(spawnSync('sh', ['-c', 'command -v cargo'], { env: { PATH } }).status).not.toBe(0);
  const run = spawnSync(process.execPath, [script, '--release'], { cwd: ROOT, env: { PATH }, encoding: 'utf8' });
  expect(run.status).toBe(0);
  expect(run.stderr).toMatch(/Rust is not installed \(no `cargo` on PATH\)/);
  expect(run.stderr).toMatch(/pure-JS backend is built instead/);
  expect(run.stderr).toMatch(/npm run build:native/);
  const strict = spawnSync(process.execPath, [script], { cwd: ROOT, env: { PATH, KVROUTE_REQUIRE_NATIVE: '1' }, encoding: 'utf8' });
  expect(strict.status).toBe(1);
  expect(strict.stderr).toMatch(/KVROUTE_REQUIRE_NATIVE=1 is set: failing/);
});
