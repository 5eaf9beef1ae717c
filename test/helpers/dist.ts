import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const DIST_ESM = join(ROOT, 'dist', 'index.js');
export const DIST_CJS = join(ROOT, 'dist', 'index.cjs');

/** Tests of the built package need `npm run build` (which `npm install` runs) first. */
export function requireDist(): void {
  if (!existsSync(DIST_ESM) || !existsSync(DIST_CJS)) {
    throw new Error(`dist/ is missing: run "npm run build" (npm install does it) before these tests`);
  }
}
