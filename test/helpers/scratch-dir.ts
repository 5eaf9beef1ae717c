/**
 * Private directories for tests that write files (traces, reports, configs, certificates).
 * Each is removed when the test that made it finishes, or, when made while a `describe` block
 * is collected, after that block's tests, so a test run leaves nothing behind in the OS temp dir.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, onTestFinished } from 'vitest';

/** A fresh directory named `prefix` + random suffix under the OS temp dir, removed afterwards. */
export function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const remove = () => rmSync(dir, { recursive: true, force: true });
  try {
    onTestFinished(remove);
  } catch {
    // Not inside a test: made while a describe block or the file is collected.
    afterAll(remove);
  }
  return dir;
}
