/**
 * Private directories for tests that write files (traces, reports, configs, certificates).
 * Each is removed when the test that made it finishes, or, when asked for while a `describe`
 * block (or the file) is collected, made before that block's tests and removed after them, so a
 * test run leaves nothing behind in the OS temp dir, even when a filter skips every test there
 * (vitest then runs neither hook).
 */

import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, onTestFinished } from 'vitest';

/** A fresh directory named `prefix` + random suffix under the OS temp dir, removed afterwards. */
export function scratchDir(prefix: string): string {
  let made: string | undefined;
  let inTest = true;
  try {
    onTestFinished(() => {
      if (made) rmSync(made, { recursive: true, force: true });
    });
  } catch {
    inTest = false;
  }
  if (inTest) {
    made = mkdtempSync(join(tmpdir(), prefix));
    return made;
  }
  // Not inside a test: the path now, the directory when the block's tests start.
  const dir = join(tmpdir(), `${prefix}${randomUUID()}`);
  beforeAll(() => mkdirSync(dir, { mode: 0o700 }));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
