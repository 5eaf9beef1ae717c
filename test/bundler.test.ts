import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { ROOT, requireDist } from './helpers/dist.js';

// A project dir whose node_modules/kvroute is this package (as after `npm install kvroute`).
const project = mkdtempSync(join(ROOT, 'node_modules', '.kvroute-esbuild-'));
afterAll(() => rmSync(project, { recursive: true, force: true }));

test('the esbuild example: a bundle with kvroute external loads the native backend', () => {
  requireDist();
  mkdirSync(join(project, 'node_modules'));
  symlinkSync(ROOT, join(project, 'node_modules', 'kvroute'), 'dir');
  const out = join(project, 'dist', 'app.mjs');
  execFileSync(process.execPath, [join(ROOT, 'examples', 'esbuild', 'build.mjs'), out], { cwd: project, encoding: 'utf8' });
  const run = execFileSync(process.execPath, [out], { cwd: project, encoding: 'utf8' });
  expect(run.trim()).toBe('native 14643705804678351452n');
});
