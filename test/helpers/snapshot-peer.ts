/**
 * A peer that serves one warm-start snapshot document at `/dump` over real HTTP, as a replica's
 * gateway does, and the outcome of warm-starting a fresh index of either backend from it.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'vitest';
import { type BackendName, KvIndex, KvRouteError, warmStart } from '../../ts/index.js';

export type Outcome = { ok: true; events: number; blocks: number; resumable: number } | { ok: false; code: string; message: string };

export class SnapshotPeer {
  private served = '';
  private readonly server: Server = createServer((req, res) => {
    res.writeHead(req.url === '/dump' ? 200 : 404, { 'content-type': 'application/json' });
    res.end(this.served);
  });

  /** The peer's base URL, once started. */
  url = '';

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  close(): Promise<void> {
    return new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** Serves `text` from now on. */
  serve(text: string): void {
    this.served = text;
  }

  /** Warm-starts a fresh index of `backend` from `text`; a refusal must leave it empty. */
  async outcome(backend: BackendName, text: string, blockSize: number, model?: string): Promise<Outcome> {
    this.serve(text);
    const index = new KvIndex({ blockSize, backend });
    try {
      const r = await warmStart(index, { peer: this.url, ...(model === undefined ? {} : { model }) });
      return { ok: true, events: r.events, blocks: r.blocks, resumable: r.resumableRanks };
    } catch (err) {
      expect(err).toBeInstanceOf(KvRouteError);
      const e = err as KvRouteError;
      // Nothing of a refused document is applied.
      expect(index.stats().blocks).toBe(0);
      return { ok: false, code: e.code, message: e.message };
    } finally {
      index.close();
    }
  }
}

/** A refusal for one of JSON's open rules, which both backends word alike. */
const RULE = /invalid JSON: (number out of range|lone surrogate|nested deeper|duplicate key)/;

/**
 * Equal outcomes: the same figures, or the same code and message, except that two refusals as
 * "not JSON" for a syntax error may word it differently (serde and the JavaScript parser each
 * word their own; README, Limitations).
 */
export function sameOutcome(a: Outcome, b: Outcome): boolean {
  if (a.ok || b.ok) return JSON.stringify(a) === JSON.stringify(b);
  if (a.code !== b.code) return false;
  const syntax = (m: string) => m.startsWith('warm start: the snapshot is not JSON') && !RULE.test(m);
  return (syntax(a.message) && syntax(b.message)) || a.message === b.message;
}
