/**
 * A TCP proxy on 127.0.0.1 that a test can cut and restore: a network partition between one
 * client and a server, with real sockets, for the replica tests. It also keeps what clients sent
 * (`sent`), so a test can read the requests on the wire.
 */

import { createConnection, createServer, type Server, type Socket } from 'node:net';

export class TcpProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  port = 0;
  /** Every byte clients sent through it, in order, as latin1 text. */
  sent = '';
  /**
   * How long a server's closed connection stays open to its client: a slow network's late news
   * of a worker's death, so that what the worker's peers answered meanwhile arrives first.
   */
  closeLagMs = 0;
  /** Whether it forwards nothing (see {@link stall}). */
  private stalled = false;
  /** Each connection's two sockets, to unpipe when it stalls. */
  private readonly pairs = new Set<[Socket, Socket]>();

  /** `keepSent`: whether to keep what clients send in {@link sent} (a soak of minutes must not). */
  constructor(
    private readonly targetPort: number,
    private readonly keepSent = true,
  ) {}

  /** Starts forwarding (on its previous port after a cut, so clients reconnect to it). */
  async open(): Promise<void> {
    const server = createServer((client) => {
      if (this.stalled) {
        // Accepted, then silence, as behind a partition.
        this.sockets.add(client);
        client.on('close', () => this.sockets.delete(client));
        client.on('error', () => client.destroy());
        return;
      }
      const upstream = createConnection({ host: '127.0.0.1', port: this.targetPort });
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => s.destroy());
      }
      if (this.keepSent)
        client.on('data', (d: Buffer) => {
          this.sent += d.toString('latin1');
        });
      client.pipe(upstream);
      // The server's end and close reach the client `closeLagMs` late.
      upstream.pipe(client, { end: false });
      const later = (act: () => void) => (this.closeLagMs === 0 ? act() : setTimeout(act, this.closeLagMs));
      upstream.on('end', () => later(() => client.end()));
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => later(() => client.destroy()));
      const pair: [Socket, Socket] = [client, upstream];
      this.pairs.add(pair);
      client.on('close', () => this.pairs.delete(pair));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.server = server;
    this.port = (server.address() as { port: number }).port;
  }

  /**
   * Forwards nothing more, closing nothing: a network partition that drops packets, where every
   * connection, old or new, hangs (no reset tells either side). Until {@link cut}.
   */
  stall(): void {
    this.stalled = true;
    for (const [client, upstream] of this.pairs) {
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.pause();
      upstream.pause();
    }
  }

  /**
   * Ends a {@link stall}: the connections that hung through it are reset (as their peers' timeouts
   * would end them), and new ones are forwarded again.
   */
  heal(): void {
    this.stalled = false;
    for (const s of this.sockets) s.destroy();
  }

  /** Cuts every connection and refuses new ones. */
  async cut(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.sockets) s.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** The requests on the wire, in order: each one's request line, head (header names in lower case) and body (by its Content-Length, as UTF-8). */
export function headsOn(wire: string): { line: string; head: Record<string, string>; body: string }[] {
  return [...wire.matchAll(/((?:POST|GET) [^\r\n]+) HTTP\/1\.1\r\n([\s\S]*?)\r\n\r\n/g)].map((m) => {
    const head = Object.fromEntries(
      m[2].split('\r\n').map((field) => [field.slice(0, field.indexOf(':')).toLowerCase(), field.slice(field.indexOf(':') + 1).trim()]),
    );
    const start = (m.index as number) + m[0].length;
    const body = Buffer.from(wire.slice(start, start + Number(head['content-length'] ?? 0)), 'latin1').toString('utf8');
    return { line: m[1], head, body };
  });
}

/** The head of the request on the wire that carried `X-Request-Id: id` (header names in lower case). */
export function headOf(wire: string, id: string): Record<string, string> {
  const found = headsOn(wire).find((r) => r.head['x-request-id'] === id);
  if (!found) throw new Error(`no request with X-Request-Id ${id} on the wire`);
  return found.head;
}
