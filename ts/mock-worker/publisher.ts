/**
 * The mock worker's KV-event publisher for one dp rank, as vLLM's `ZmqEventPublisher` behaves:
 * a PUB socket sending `[topic, seq (u64 BE), payload]` with a seq that starts at 0 per
 * incarnation, and a ROUTER replay socket that answers `["", start]` with every buffered batch
 * from `start` and an end marker, in the wire format's framing. Both sockets bind (vLLM binds
 * when its endpoint has `*`; give `127.0.0.1` to stay on this machine). A port of 0 binds any free
 * port ({@link RankPublisher.lastEndpoint} tells which).
 * @module
 */

import { loadZeromq, type Zeromq } from '../js/ingest/deps.js';
import { bindable } from './options.js';
import { replayHasTopicFrame, type WireFormat } from './wire.js';

const END = new Uint8Array(8).fill(0xff);

function seqFrame(seq: bigint): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, seq, false);
  return b;
}

export interface PublisherStats {
  /** Batches published (sent live or dropped by a fault). */
  batches: number;
  /** Batches not sent live because of a `drop-events` fault (still in the replay buffer). */
  dropped: number;
  /** Replay requests answered. */
  replayRequests: number;
  /** The next seq. */
  nextSeq: bigint;
}

export class RankPublisher {
  private readonly pub: InstanceType<Zeromq['Publisher']>;
  private readonly router: InstanceType<Zeromq['Router']> | undefined;
  private ring: { seq: bigint; payload: Uint8Array }[] = [];
  private seq = 0n;
  private chain: Promise<void> = Promise.resolve();
  private closed = false;
  /** Live batches still to drop (a `drop-events` fault). */
  dropNext = 0;
  readonly stats: PublisherStats = { batches: 0, dropped: 0, replayRequests: 0, nextSeq: 0n };

  private constructor(
    private readonly wire: WireFormat,
    private readonly topic: string,
    private readonly bufferSteps: number,
    zmq: Zeromq,
    replay: boolean,
  ) {
    this.pub = new zmq.Publisher({ linger: 0, sendHighWaterMark: 100_000 });
    this.router = replay ? new zmq.Router({ linger: 0, sendHighWaterMark: 2 * (bufferSteps + 1) }) : undefined;
  }

  static async open(opts: {
    wire: WireFormat;
    topic: string;
    endpoint: string;
    replayEndpoint?: string;
    bufferSteps: number;
  }): Promise<RankPublisher> {
    const p = new RankPublisher(opts.wire, opts.topic, opts.bufferSteps, loadZeromq(), opts.replayEndpoint !== undefined);
    try {
      await p.pub.bind(bindable(opts.endpoint));
      if (p.router && opts.replayEndpoint) {
        await p.router.bind(bindable(opts.replayEndpoint));
        void p.serveReplays();
      }
    } catch (err) {
      p.close();
      throw err;
    }
    return p;
  }

  /** The endpoint actually bound (with a port chosen when `:0` / `:*` was given). */
  get lastEndpoint(): string | null {
    return this.pub.lastEndpoint;
  }

  get replayLastEndpoint(): string | null {
    return this.router?.lastEndpoint ?? null;
  }

  /** A new incarnation: seq back to 0 and an empty replay buffer, as a restarted engine has. */
  restart(): void {
    this.seq = 0n;
    this.ring = [];
    this.stats.nextSeq = 0n;
  }

  /** Publishes one batch (sends are queued in order; never blocks the caller). */
  publish(payload: Uint8Array): void {
    const seq = this.seq++;
    this.stats.nextSeq = this.seq;
    this.stats.batches++;
    this.ring.push({ seq, payload });
    if (this.ring.length > this.bufferSteps) this.ring.shift();
    if (this.dropNext > 0) {
      this.dropNext--;
      this.stats.dropped++;
      return;
    }
    const frames = [this.topic, seqFrame(seq), payload];
    this.chain = this.chain.then(() => (this.closed ? undefined : this.pub.send(frames))).catch(() => {});
  }

  private async serveReplays(): Promise<void> {
    const router = this.router as InstanceType<Zeromq['Router']>;
    const withTopic = replayHasTopicFrame(this.wire);
    const topic = new TextEncoder().encode(this.topic);
    while (!this.closed) {
      let frames: Buffer[];
      try {
        frames = await router.receive();
      } catch {
        return;
      }
      // vLLM answers only [identity, "", start]; anything else gets no reply.
      if (frames.length !== 3 || frames[1].length !== 0 || frames[2].length !== 8) continue;
      const start = new DataView(frames[2].buffer, frames[2].byteOffset, 8).getBigUint64(0, false);
      this.stats.replayRequests++;
      const id = frames[0];
      try {
        for (const b of this.ring.slice()) {
          if (b.seq < start) continue;
          await router.send(withTopic ? [id, '', topic, seqFrame(b.seq), b.payload] : [id, '', seqFrame(b.seq), b.payload]);
        }
        await router.send(withTopic ? [id, '', '', END, ''] : [id, '', END, '']);
      } catch {
        return;
      }
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.pub.close();
    this.router?.close();
  }
}
