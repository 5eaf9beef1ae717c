/**
 * The package's version, from its package.json (one level above `dist/` and `ts/`): for
 * `kvroute --version` and the gateway's `kvroute_gateway_build_info`.
 * @internal
 * @module
 */

import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let cached: string | undefined;

/** The version, or `unknown` when package.json cannot be read (a bundler that moved the file). */
export function packageVersion(): string {
  if (cached !== undefined) return cached;
  try {
    const path = join(dirname(fileURLToPath(import.meta.url)), '..', 'package.json');
    cached = String((JSON.parse(readFileSync(path, 'utf8')) as { version?: unknown }).version ?? 'unknown');
  } catch {
    cached = 'unknown';
  }
  return cached;
}
