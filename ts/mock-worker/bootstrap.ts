/**
 * SGLang's disaggregated serving as the mock worker takes part in it (`disaggregationMode`, as
 * SGLang's `--disaggregation-mode`): a request's two legs arrive at once, at a prefill and a
 * decode worker, each with the prefill worker's `bootstrap_host` and `bootstrap_port` and one
 * `bootstrap_room`. As in SGLang, neither leg finishes alone:
 *
 * - a prefill worker runs a bootstrap server; a prefill leg waits there for its decode worker to
 *   join the room before it runs (SGLang's prefill holds a request until the decode side has
 *   answered its handshake), then computes the prompt, hands its KV over at its first token and
 *   answers with that one token;
 * - a decode leg joins the room at the prefill worker's bootstrap server and waits for the KV,
 *   then runs with its prompt filled without compute (as a vLLM decode leg that pulled it).
 *
 * A leg whose peer does not come within `bootstrapTimeoutMs` fails with 500, as SGLang aborts a
 * request whose transfer fails; so does an unstreamed prefill leg whose decode worker left the
 * room (died) before the KV was handed over. What crosses between mock workers is the room's meeting and the
 * prompt's length, over HTTP (not SGLang's own bootstrap routes or its KV transfer engines).
 * @internal
 * @module
 */

import type { ServerResponse } from 'node:http';
import Fastify, { type FastifyInstance } from 'fastify';
import { request } from 'undici';
import { TIMED_OUT, within } from '../within.js';
import { BadRequest } from './bad-request.js';

/** What a worker serves in an SGLang-style disaggregated fleet. @group Mock worker */
export type DisaggregationMode = 'prefill' | 'decode';

/** The room a request's legs meet in. */
export interface BootstrapRoom {
  host: string;
  port: number;
  room: number;
}

/**
 * A request's bootstrap fields: all three, or undefined for none.
 * @throws {BadRequest} for some but not all, or a bad value (`param` names it).
 */
export function readBootstrap(b: Record<string, unknown>): BootstrapRoom | undefined {
  const { bootstrap_host: host, bootstrap_port: port, bootstrap_room: room } = b;
  const given = [host, port, room].filter((v) => v !== undefined && v !== null).length;
  if (given === 0) return undefined;
  if (typeof host !== 'string' || host === '') throw new BadRequest('bootstrap_host must name the prefill worker’s host', 'bootstrap_host');
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535)
    throw new BadRequest('bootstrap_port must be a TCP port', 'bootstrap_port');
  if (typeof room !== 'number' || !Number.isInteger(room) || room < 0)
    throw new BadRequest('bootstrap_room must be a non-negative integer', 'bootstrap_room');
  return { host, port, room };
}

/** A promise and its settlers. */
interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/**
 * One room of a prefill worker: its decode worker's arrival, the KV handed over (the prompt's
 * tokens), and whether the decode worker that joined last left before it came (its connection
 * closed: it died); `joins` counts the decode workers that joined.
 */
interface Room {
  joined: Deferred<void>;
  handed: Deferred<number | undefined>;
  joins: number;
  left: boolean;
}

/** A failure of a leg, answered with its status (500 as SGLang's failed transfers are). */
export function legFailure(message: string): Error {
  return Object.assign(new Error(message), { statusCode: 500 });
}

/** What a leg does once admitted: a decode leg's prompt is pulled; a prefill leg hands its KV over at its first token. */
export interface AdmittedLeg {
  pull: boolean;
  /**
   * A prefill leg's: its KV is ready (call once its first token is out). False when the decode
   * worker that joined the room has left (it died): the transfer failed, and the prefill leg
   * fails with 500, as SGLang's prefill worker aborts a request whose KV it could not send.
   */
  handOver?: (promptTokens: number) => boolean;
  /** A prefill leg's: it ended without handing over (its decode worker then fails at once). */
  drop?: () => void;
}

/** A mock worker's part in SGLang-style disaggregation: a prefill worker's bootstrap server, or a decode worker's joining. */
export class BootstrapLegs {
  private readonly rooms = new Map<number, Room>();
  /** A decode worker's joins in progress: closing the worker leaves its rooms, as a dead process's connections close. */
  private readonly joins = new Set<AbortController>();

  private constructor(
    readonly mode: DisaggregationMode,
    private readonly timeoutMs: number,
    private readonly server: FastifyInstance | undefined,
    /** The prefill worker's bootstrap port as bound. */
    readonly port: number | undefined,
  ) {}

  /** A decode worker's, or a prefill worker's with its bootstrap server listening on `host:port` (0: any free port). */
  static async open(mode: DisaggregationMode, host: string, port: number, timeoutMs: number): Promise<BootstrapLegs> {
    if (mode === 'decode') return new BootstrapLegs(mode, timeoutMs, undefined, undefined);
    const server = Fastify({ logger: false, forceCloseConnections: true });
    let legs: BootstrapLegs | undefined;
    server.get<{ Params: { room: string } }>('/kvroute-mock/bootstrap/rooms/:room', async (req, reply) => {
      const room = Number(req.params.room);
      if (!legs || !Number.isInteger(room) || room < 0) return reply.code(400).send({ error: 'bad room' });
      const tokens = await legs.join(room, reply.raw);
      if (tokens === TIMED_OUT) return reply.code(504).send({ error: `no prefill leg handed room ${room} over in time` });
      if (tokens === undefined) return reply.code(410).send({ error: `the prefill leg of room ${room} failed` });
      return { tokens };
    });
    const address = await server.listen({ host, port });
    legs = new BootstrapLegs(mode, timeoutMs, server, Number(new URL(address).port));
    return legs;
  }

  private room(id: number): Room {
    let room = this.rooms.get(id);
    if (!room) {
      room = { joined: deferred(), handed: deferred(), joins: 0, left: false };
      this.rooms.set(id, room);
    }
    return room;
  }

  /**
   * A decode worker joins a room: the KV handed over (its prompt tokens), undefined if its prefill
   * failed, or a timeout. Its answer's connection closing before then is the decode worker leaving.
   */
  private async join(id: number, answer: ServerResponse): Promise<number | undefined | typeof TIMED_OUT> {
    const room = this.room(id);
    const join = ++room.joins;
    room.left = false;
    answer.on('close', () => {
      if (!answer.writableFinished && room.joins === join) room.left = true;
    });
    room.joined.resolve();
    const tokens = await within(room.handed.promise, this.timeoutMs);
    this.rooms.delete(id);
    return tokens;
  }

  /**
   * Admits a request's leg (see the module's description), waiting for its peer.
   * @throws {BadRequest} without bootstrap fields (a disaggregated worker serves legs only);
   * an error with status 500 when its peer did not come in time.
   */
  async admit(body: Record<string, unknown>): Promise<AdmittedLeg> {
    const at = readBootstrap(body);
    if (!at)
      throw new BadRequest(
        `a ${this.mode} worker serves one leg of a disaggregated request: send bootstrap_host, bootstrap_port and bootstrap_room`,
        'bootstrap_room',
      );
    if (this.mode === 'decode') {
      await this.receive(at);
      return { pull: true };
    }
    const room = this.room(at.room);
    if ((await within(room.joined.promise, this.timeoutMs)) === TIMED_OUT) {
      this.rooms.delete(at.room);
      throw legFailure(`no decode worker joined bootstrap room ${at.room} within ${this.timeoutMs} ms`);
    }
    const handOver = (tokens: number) => {
      room.handed.resolve(tokens);
      return !room.left;
    };
    return { pull: false, handOver, drop: () => room.handed.resolve(undefined) };
  }

  /** A decode leg waits at the prefill worker's bootstrap server until the room's KV is handed over. */
  private async receive(at: BootstrapRoom): Promise<void> {
    const host = at.host.includes(':') ? `[${at.host}]` : at.host;
    const where = `${host}:${at.port}`;
    const leave = new AbortController();
    this.joins.add(leave);
    try {
      const res = await request(`http://${where}/kvroute-mock/bootstrap/rooms/${at.room}`, {
        headersTimeout: this.timeoutMs + 1000,
        bodyTimeout: this.timeoutMs + 1000,
        signal: leave.signal,
      });
      const text = await res.body.text();
      if (res.statusCode !== 200) throw new Error(`answered ${res.statusCode}: ${text}`);
    } catch (err) {
      throw legFailure(`bootstrap room ${at.room} at ${where} gave no KV: ${(err as Error).message}`);
    } finally {
      this.joins.delete(leave);
    }
  }

  async close(): Promise<void> {
    for (const leave of this.joins) leave.abort();
    for (const room of this.rooms.values()) room.handed.resolve(undefined);
    await this.server?.close();
  }
}
