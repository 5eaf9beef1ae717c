/** `kvroute <command>` as a child process (the built `dist/cli.js`), killed after each test. */

import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { ROOT } from './dist.js';

const children: ChildProcess[] = [];

/** Kills every command a test left running. */
export function killCommandsAfterEach(): void {
  afterEach(() => {
    for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
  });
}

/** Runs `kvroute <args>`; `match` resolves the first stdout match of `pattern`. */
export function runCommand(args: string[], pattern: RegExp, env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [join(ROOT, 'dist', 'cli.js'), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  children.push(child);
  let out = '';
  let err = '';
  child.stderr.on('data', (d) => {
    err += d;
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const match = new Promise<RegExpExecArray>((resolve, reject) => {
    child.stdout.on('data', (d) => {
      out += d;
      const m = pattern.exec(out);
      if (m) resolve(m);
    });
    child.on('exit', (code) => reject(new Error(`exited ${code} before printing ${pattern}: ${out} ${err}`)));
  });
  return { child, exited, match, output: () => out, errors: () => err };
}
