/**
 * A test engine publisher on 127.0.0.1 with the real wire protocol: a ZeroMQ PUB socket per dp
 * rank sending `[topic, seq, payload]` (an XPUB, so tests can wait until a subscription arrived
 * instead of sleeping), and a ROUTER replay socket per rank answering
 * `["", start]` with the ring's batches from `start` and the end marker, in either framing.
 * Faults are explicit: drop live seqs, stop answering replays, restart (seq back to 0).
 */

import { Router, XPublisher } from 'zeromq';
import { waitFor } from './wait.js';

export type ReplayFraming = 'old' | 'new';

export interface PublisherOptions {
  dpRanks?: number;
  topic?: string;
  framing?: ReplayFraming;
  /** Open replay sockets (default true). */
  replay?: boolean;
  /** Ports to use (base, consecutive per rank); default: found free. */
  basePort?: number;
  replayBasePort?: number;
}

const END = new Uint8Array(8).fill(0xff);

function seqFrame(seq: bigint): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, seq, false);
  return b;
}

/** Binds `count` consecutive ports starting at a random base, retrying on conflicts. */
async function bindConsecutive<T extends { bind(a: string): Promise<void>; close(): void }>(
  make: () => T,
  count: number,
  base?: number,
): Promise<{ sockets: T[]; port: number }> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = base ?? 20000 + Math.floor(Math.random() * 30000);
    const sockets: T[] = [];
    try {
      for (let r = 0; r < count; r++) {
        const s = make();
        sockets.push(s);
        await s.bind(`tcp://127.0.0.1:${port + r}`);
      }
      return { sockets, port };
    } catch (err) {
      for (const s of sockets) s.close();
      if (base !== undefined) throw err;
    }
  }
  throw new Error('no free consecutive ports');
}

export class TestEnginePublisher {
  readonly dpRanks: number;
  readonly topic: string;
  framing: ReplayFraming;
  private pubs: XPublisher[] = [];
  private readonly subscriptions: number[];
  private routers: Router[] = [];
  port = 0;
  replayPort = 0;
  private readonly rings: { seq: bigint; payload: Uint8Array }[][];
  private readonly nextSeq: bigint[];
  /** When false, replay requests get no answer at all (a silent replay socket). */
  answerReplays = true;
  /** Replays skip these seqs (holes). */
  replayHoles = new Set<bigint>();
  /** Batches the ring keeps per rank, oldest dropped first (vLLM's `buffer_steps`). */
  ringSize = Number.POSITIVE_INFINITY;
  replayRequests: bigint[] = [];
  /** While set, replay requests wait for it before they are answered (see {@link holdReplays}). */
  private replayGate: Promise<void> | undefined;
  private closed = false;

  private constructor(opts: PublisherOptions) {
    this.dpRanks = opts.dpRanks ?? 1;
    this.topic = opts.topic ?? '';
    this.framing = opts.framing ?? 'new';
    this.rings = Array.from({ length: this.dpRanks }, () => []);
    this.nextSeq = Array.from({ length: this.dpRanks }, () => 0n);
    this.subscriptions = Array.from({ length: this.dpRanks }, () => 0);
  }

  static async start(opts: PublisherOptions = {}): Promise<TestEnginePublisher> {
    const p = new TestEnginePublisher(opts);
    const pub = await bindConsecutive(
      () => new XPublisher({ linger: 0, sendHighWaterMark: 0, verbosity: 'allSubs' }),
      p.dpRanks,
      opts.basePort,
    );
    p.pubs = pub.sockets;
    p.port = pub.port;
    p.pubs.forEach((x, rank) => void p.countSubscriptions(x, rank));
    if (opts.replay ?? true) {
      const rep = await bindConsecutive(() => new Router({ linger: 0, sendHighWaterMark: 0 }), p.dpRanks, opts.replayBasePort);
      p.routers = rep.sockets;
      p.replayPort = rep.port;
      p.routers.forEach((r, rank) => void p.serveReplay(r, rank));
    }
    return p;
  }

  get endpoint(): string {
    return `tcp://127.0.0.1:${this.port}`;
  }

  get replayEndpoint(): string {
    return `tcp://127.0.0.1:${this.replayPort}`;
  }

  private async countSubscriptions(xpub: XPublisher, rank: number): Promise<void> {
    while (!this.closed) {
      try {
        const [msg] = await xpub.receive();
        if (msg[0] === 1) this.subscriptions[rank]++;
      } catch {
        return;
      }
    }
  }

  /**
   * Resolves once every rank's PUB socket has seen `count` subscriptions (bounded wait); the
   * XPUB is verbose, so a second subscriber to the same topic counts too.
   */
  async waitForSubscribers(count = 1): Promise<void> {
    await waitFor(() => this.subscriptions.every((n) => n >= count), `${count} subscriber(s) on every rank`);
  }

  private async serveReplay(router: Router, rank: number): Promise<void> {
    while (!this.closed) {
      let frames: Buffer[];
      try {
        frames = await router.receive();
      } catch {
        return;
      }
      if (frames.length !== 3 || frames[2].length !== 8) continue;
      const start = new DataView(frames[2].buffer, frames[2].byteOffset, 8).getBigUint64(0, false);
      this.replayRequests.push(start);
      if (!this.answerReplays) continue;
      if (this.replayGate) await this.replayGate;
      const id = frames[0];
      const topic = new TextEncoder().encode(this.topic);
      try {
        for (const b of this.rings[rank]) {
          if (b.seq < start || this.replayHoles.has(b.seq)) continue;
          const msg = this.framing === 'new' ? [id, '', topic, seqFrame(b.seq), b.payload] : [id, '', seqFrame(b.seq), b.payload];
          await router.send(msg);
        }
        await router.send(this.framing === 'new' ? [id, '', '', END, ''] : [id, '', END, '']);
      } catch {
        return;
      }
    }
  }

  /** Publishes one batch on `rank` with the next seq (kept in the ring); `drop` skips the send only. */
  async publish(rank: number, payload: Uint8Array, opts: { drop?: boolean; seq?: bigint } = {}): Promise<bigint> {
    const seq = opts.seq ?? this.nextSeq[rank];
    this.nextSeq[rank] = seq + 1n;
    this.rings[rank].push({ seq, payload });
    if (this.rings[rank].length > this.ringSize) this.rings[rank].shift();
    if (!opts.drop) await this.pubs[rank].send([this.topic, seqFrame(seq), payload]);
    return seq;
  }

  /**
   * Holds replay answers until the returned function is called: they then walk the ring as it is
   * by then (batches published meanwhile included), as a busy engine's replay does.
   */
  holdReplays(): () => void {
    let release = () => {};
    this.replayGate = new Promise<void>((resolve) => {
      release = () => {
        this.replayGate = undefined;
        resolve();
      };
    });
    return release;
  }

  /** A new incarnation: seq back to 0 and an empty ring, as a restarted engine has. */
  restart(rank?: number): void {
    for (let r = 0; r < this.dpRanks; r++) {
      if (rank !== undefined && r !== rank) continue;
      this.nextSeq[r] = 0n;
      this.rings[r] = [];
    }
  }

  /** Closes the replay sockets (a replay endpoint that is gone). */
  closeReplay(): void {
    for (const r of this.routers) r.close();
    this.routers = [];
  }

  close(): void {
    this.closed = true;
    for (const s of [...this.pubs, ...this.routers]) s.close();
  }
}
