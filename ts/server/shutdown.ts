/**
 * The gateway's end in steps (`shutdown` in the options): first, for `delayMs`, it keeps serving
 * while `/ready` answers 503 and every answer closes its connection, so that load balancers and
 * keep-alive clients move to other replicas before the listener goes; then it stops accepting and
 * lets requests in flight finish, ending each connection once it carries none, and cutting the
 * connections still open after `drainTimeoutMs`.
 * A second `close({ now: true })` (a second SIGTERM or SIGINT) ends the delay at once.
 * @internal
 * @module
 */

import type { Server } from 'node:http';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { IdleConnections } from './idle-connections.js';
import type { ResolvedGatewayOptions } from './options.js';

export class Shutdown {
  /** True from the start of `close()`: `/ready` answers 503 and answers close their connections. */
  draining = false;
  private hurryUp: (() => void) | undefined;
  private hurried = false;
  private readonly connections = new Map<Server, IdleConnections>();

  constructor(
    private readonly opts: ResolvedGatewayOptions['shutdown'],
    private readonly log: FastifyBaseLogger,
  ) {}

  /**
   * Makes every answer of `server` close its connection once draining (streams included: set
   * before any header is sent), and its connections end as soon as they carry no request once
   * it stops accepting.
   */
  attach(server: Server): void {
    server.on('request', (_req, res) => {
      if (this.draining && !res.headersSent) res.setHeader('connection', 'close');
    });
    this.connections.set(server, new IdleConnections(server));
  }

  /** Ends the delay now (or makes it none, if it has not begun). */
  hurry(): void {
    this.hurried = true;
    this.hurryUp?.();
  }

  /** Marks the gateway draining and waits out `delayMs` while it still serves (none when it is not listening). */
  async delay(serving: boolean): Promise<void> {
    this.draining = true;
    if (!serving || this.opts.delayMs === 0 || this.hurried) return;
    this.log.info({ delayMs: this.opts.delayMs }, 'shutting down: not ready, still serving until the delay ends');
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, this.opts.delayMs);
      this.hurryUp = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  /** Stops accepting on `app` and waits for its requests in flight, cutting them after `drainTimeoutMs`. */
  async close(app: FastifyInstance): Promise<void> {
    const closing = app.close();
    this.connections.get(app.server)?.endWhenIdle();
    if (this.opts.drainTimeoutMs === 0) return closing;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(true), this.opts.drainTimeoutMs);
    });
    if (await Promise.race([closing.then(() => false), timedOut])) {
      this.log.warn(
        { drainTimeoutMs: this.opts.drainTimeoutMs },
        'shutting down: requests still in flight after the drain timeout are cut',
      );
      app.server.closeAllConnections();
      await closing;
    }
    clearTimeout(timer);
  }
}
