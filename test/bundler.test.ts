import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { expect, onTestFinished, test } from 'vitest';
import { ROOT, requireDist } from './helpers/dist.js';

test('the esbuild example: a bundle with kvroute external loads the native backend', () => {
  requireDist();
  // A project dir whose node_modules/kvroute is this package (as after `npm install kvroute`),
  // under node_modules so that the bundle's own imports resolve; made here, so a filtered run makes none.
  const project = mkdtempSync(join(ROOT, 'node_modules', '.kvroute-esbuild-'));
  onTestFinished(() => rmSync(project, { recursive: true, force: true }));
  mkdirSync(join(project, 'node_modules'));
  symlinkSync(ROOT, join(project, 'node_modules', 'kvroute'), 'dir');
  const out = join(project, 'dist', 'app.mjs');
  execFileSync(process.execPath, [join(ROOT, 'examples', 'esbuild', 'build.mjs'), out], { cwd: project, encoding: 'utf8' });
  const run = execFileSync(process.execPath, [out], { cwd: project, encoding: 'utf8' });
  expect(run.trim()).toBe('native 14643705804678351452n');
});
