/**
 * A real `nats-server` (Debian's package, with JetStream) on 127.0.0.1 for the replica tests:
 * a random port picked by the server, a private store directory, stopped by the test. The
 * tests need it (`.ci/run` installs it): without it they fail, naming the package.
 */

import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';

function findBinary(): string | undefined {
  for (const bin of ['nats-server', '/usr/sbin/nats-server', '/usr/bin/nats-server']) {
    try {
      execFileSync(bin, ['--version'], { stdio: 'ignore' });
      return bin;
    } catch {
      // next
    }
  }
  return undefined;
}

export const NATS_BINARY = findBinary();

export class NatsServer {
  private proc: ChildProcess | undefined;
  /** The JetStream store, made at the first start (a server constructed in a describe block whose tests are all filtered out never starts, and its afterAll never runs). */
  private dir: string | undefined;
  port = 0;

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** Starts the server (on its previous port after a stop, so clients reconnect to it). */
  async start(extra: string[] = []): Promise<void> {
    if (!NATS_BINARY) throw new Error('nats-server is not installed (apt-get install nats-server)');
    this.dir ??= mkdtempSync(join(tmpdir(), 'kvroute-nats-'));
    const args = ['-a', '127.0.0.1', '-p', String(this.port || -1), '-js', '-sd', this.dir, '--http_port', '0', ...extra];
    const proc = spawn(NATS_BINARY, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    this.proc = proc;
    let log = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`nats-server did not start: ${log}`)), 10_000);
      proc.stderr?.on('data', (d: Buffer) => {
        log += d.toString();
        const m = /Listening for client connections on 127\.0\.0\.1:(\d+)/.exec(log);
        if (m && /Server is ready/.test(log)) {
          clearTimeout(timer);
          this.port = Number(m[1]);
          resolve();
        }
      });
      proc.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`nats-server exited with ${code}: ${log}`));
      });
    });
    proc.removeAllListeners('exit');
    proc.stderr?.removeAllListeners('data');
    proc.stderr?.resume();
  }

  /** Stops the server (SIGKILL: an outage, not a graceful shutdown). */
  async stop(): Promise<void> {
    const proc = this.proc;
    this.proc = undefined;
    if (!proc || proc.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      proc.once('exit', () => resolve());
      proc.kill('SIGKILL');
    });
  }

  async dispose(): Promise<void> {
    await this.stop();
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
    this.dir = undefined;
  }
}

/**
 * A real nats-server for the enclosing `describe`: started before its tests, disposed after.
 * `subject()` gives each call a subject of its own, so tests do not hear each other's replicas.
 */
export function natsServerSuite(prefix = 'kvroute.test'): { server: NatsServer; subject: () => string } {
  const server = new NatsServer();
  let n = 0;
  beforeAll(() => server.start());
  afterAll(() => server.dispose());
  return { server, subject: () => `${prefix}${++n}` };
}
