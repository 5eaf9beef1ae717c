/**
 * System tools some tests drive (openssl, objdump, Chromium, dnsmasq; nats-server has its own helper).
 * The tests need them, as CI has them (`.ci/run` installs them): a missing one fails the test
 * that needs it with the package to install, rather than skipping it.
 */

import { execFileSync } from 'node:child_process';

/**
 * The first of `names` that runs (`probe` arguments, `--version` by default); throws, naming
 * the Debian package, when none does.
 */
export function requireTool(names: readonly string[], pkg: string, probe: readonly string[] = ['--version']): string {
  for (const name of names) {
    try {
      execFileSync(name, probe, { stdio: 'ignore' });
      return name;
    } catch {
      // next
    }
  }
  throw new Error(`${names[0]} is not installed: this test needs it (apt-get install ${pkg}; .ci/run installs it)`);
}
