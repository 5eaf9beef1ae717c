import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { ROOT } from './helpers/dist.js';
import { requireTool } from './helpers/tools.js';

const NODE_FILE = join(ROOT, 'native', 'kvroute.linux-x64-gnu.node');

/**
 * The README promises glibc 2.17 and libstdc++ of gcc 4.8 (GLIBCXX 3.4.19) as the baseline. The
 * native module is required, as every native suite requires it (`npm test` builds it).
 */
test('the native module needs at most glibc 2.17 and GLIBCXX 3.4.19', () => {
  expect(existsSync(NODE_FILE), `${NODE_FILE} (npm run build:native)`).toBe(true);
  const objdump = requireTool(['objdump'], 'binutils');
  const symbols = execFileSync(objdump, ['-T', NODE_FILE], { encoding: 'utf8', maxBuffer: 64 << 20 });
  const compare = (a: number[], b: number[]) => {
    for (let i = 0; i < Math.max(a.length, b.length); i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) - (b[i] ?? 0);
    return 0;
  };
  /** The highest `<prefix>_x.y.z` symbol version the module asks for ([] when none). */
  const highest = (prefix: string) =>
    [...symbols.matchAll(new RegExp(`\\b${prefix}_([0-9.]+)`, 'g'))]
      .map((m) => m[1].split('.').map(Number))
      .sort(compare)
      .at(-1) ?? [];
  const glibc = highest('GLIBC');
  expect(glibc.length).toBeGreaterThan(0);
  expect(compare(glibc, [2, 17])).toBeLessThanOrEqual(0);
  const glibcxx = highest('GLIBCXX');
  if (glibcxx.length > 0) expect(compare(glibcxx, [3, 4, 19])).toBeLessThanOrEqual(0);
});
