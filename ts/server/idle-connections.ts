/**
 * Ends a closing listener's connections as soon as they carry no request. Node's `server.close()`
 * closes the connections idle at that moment, but not those whose last request ends after it
 * (they stay open for as long as the client keeps them: undici, Node's fetch, keeps one for the
 * 72 s of the keep-alive timeout Fastify advertises), nor those that have not sent a request yet
 * (Node holds them active for its headers timeout, whose checks `close()` stops): either held the
 * gateway's `close()`, and so `kvroute serve`'s shutdown, for over a minute after the last answer.
 * @internal
 * @module
 */

import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { Server as TlsServer } from 'node:tls';

export class IdleConnections {
  /** Requests in flight on each open connection. */
  private readonly requests = new Map<Socket, number>();
  private closing = false;

  constructor(server: Server) {
    // An HTTPS server's requests arrive on its TLS sockets, which 'secureConnection' gives (a
    // connection still in its handshake is left to the TLS handshake timeout).
    const event = server instanceof TlsServer ? 'secureConnection' : 'connection';
    server.on(event, (socket: Socket) => {
      // Accepted while the listener closes: it would carry a request only to be told 503.
      if (this.closing) return socket.destroySoon();
      this.requests.set(socket, 0);
      socket.once('close', () => this.requests.delete(socket));
    });
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      const socket = req.socket;
      const before = this.requests.get(socket);
      if (before === undefined) return;
      this.requests.set(socket, before + 1);
      res.once('close', () => {
        const inFlight = this.requests.get(socket);
        // Undefined: the connection closed first.
        if (inFlight === undefined) return;
        this.requests.set(socket, inFlight - 1);
        if (inFlight === 1 && this.closing) socket.destroySoon();
      });
    });
  }

  /**
   * From now on every connection ends as soon as it carries no request (its last answer written
   * first); those that carry none now end at once. Called as the listener stops accepting.
   */
  endWhenIdle(): void {
    this.closing = true;
    for (const [socket, inFlight] of this.requests) if (inFlight === 0) socket.destroySoon();
  }
}
