/**
 * A real DNS server (dnsmasq, Debian's `dnsmasq-base`) on 127.0.0.1 for the discovery tests,
 * serving the SRV and address records a test gives it; `serve()` again restarts it on the same
 * port with other records (dnsmasq reads them at start). The tests need it (`.ci/run` installs
 * it): without it they fail, naming the package.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { Resolver } from 'node:dns/promises';
import { type AddressInfo, createServer } from 'node:net';
import { requireTool } from './tools.js';

/** An SRV record: name, target, port. */
export type SrvRecord = [name: string, target: string, port: number];

/**
 * A port free now on 127.0.0.1 for both UDP and TCP (dnsmasq cannot pick one itself, and listens
 * on both): a TCP port the system gave, kept only if UDP's is free too.
 */
async function freeDnsPort(): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    const tcp = createServer();
    await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
    const { port } = tcp.address() as AddressInfo;
    const udp = createSocket('udp4');
    const free = await new Promise<boolean>((resolve) => {
      udp.once('error', () => resolve(false));
      udp.bind(port, '127.0.0.1', () => resolve(true));
    });
    await new Promise<void>((resolve) => (free ? udp.close(() => resolve()) : resolve()));
    await new Promise<void>((resolve) => tcp.close(() => resolve()));
    if (free || attempt >= 20) return port;
  }
}

export class DnsServer {
  private proc: ChildProcess | undefined;
  port = 0;

  get server(): string {
    return `127.0.0.1:${this.port}`;
  }

  /**
   * (Re)starts the server with these records: a `hosts` name alone resolves to 127.0.0.1, a
   * `[name, address]` pair to that address (A or AAAA; a name may be given several). Names under
   * `test.` that it does not hold answer NXDOMAIN.
   */
  async serve(srv: SrvRecord[], hosts: (string | [name: string, address: string])[]): Promise<void> {
    const dnsmasq = requireTool(['dnsmasq', '/usr/sbin/dnsmasq'], 'dnsmasq-base');
    await this.stop();
    this.port ||= await freeDnsPort();
    const args = [
      '--keep-in-foreground',
      '--conf-file=/dev/null',
      '--pid-file=',
      `--port=${this.port}`,
      '--listen-address=127.0.0.1',
      '--bind-interfaces',
      '--no-resolv',
      '--no-hosts',
      '--local=/test/',
      '--host-record=ready.test,127.0.0.1',
      ...hosts.map((h) => (typeof h === 'string' ? `--host-record=${h},127.0.0.1` : `--host-record=${h[0]},${h[1]}`)),
      ...srv.map(([name, target, port]) => `--srv-host=${name},${target},${port}`),
    ];
    const proc = spawn(dnsmasq, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    proc.stderr?.on('data', (d) => {
      stderr += d;
    });
    this.proc = proc;
    const resolver = new Resolver({ timeout: 200, tries: 1 });
    resolver.setServers([this.server]);
    for (let i = 0; i < 50; i++) {
      if (proc.exitCode !== null) throw new Error(`dnsmasq exited ${proc.exitCode}: ${stderr}`);
      if ((await resolver.resolve4('ready.test').catch(() => [])).length > 0) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`dnsmasq did not answer on ${this.server}: ${stderr}`);
  }

  /** Stops the server (queries then time out). */
  async stop(): Promise<void> {
    const proc = this.proc;
    this.proc = undefined;
    if (!proc || proc.exitCode !== null) return;
    const exited = new Promise((resolve) => proc.once('exit', resolve));
    proc.kill('SIGTERM');
    await exited;
  }
}
