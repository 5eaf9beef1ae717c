/**
 * Loads the napi-rs binding. The generated loader (`native/binding.cjs`) throws when no binary
 * fits this platform, so the load is wrapped and the failure kept as a reason string: `auto`
 * falls back to the pure-JS backend and reports why.
 * @internal
 * @module
 */

import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export type NativeBinding = typeof import('../../native/binding.cjs');

export type NativeLoad = { binding: NativeBinding; error?: undefined } | { binding?: undefined; error: string };

/**
 * Where the generated loader sits: `native/` at the package root, which is one level above the
 * bundled `dist/` and two above this source file. `KVROUTE_NATIVE_PATH` overrides it with a
 * `.node` file or a loader.
 */
function candidatePaths(): string[] {
  const override = process.env.KVROUTE_NATIVE_PATH;
  if (override) return [override];
  const here = dirname(fileURLToPath(import.meta.url));
  return [join(here, '..', 'native', 'binding.cjs'), join(here, '..', '..', 'native', 'binding.cjs')];
}

export function loadNativeBinding(): NativeLoad {
  const require = createRequire(import.meta.url);
  const candidates = candidatePaths();
  const path = candidates.find((p) => existsSync(p));
  if (!path) return { error: `native binding not found (looked for ${candidates.join(', ')})` };
  try {
    return { binding: require(path) as NativeBinding };
  } catch (err) {
    const cause = (err as { cause?: unknown }).cause;
    const detail = cause instanceof Error ? `: ${cause.message}` : '';
    return { error: `${err instanceof Error ? err.message : String(err)}${detail}` };
  }
}
