/**
 * One engine worker's KV-event stream on the pure-JS backend: a `zeromq` SUB socket per dp rank
 * and, while a gap is repaired, a DEALER on its replay socket, each with an async receive loop
 * on the JavaScript thread, driving the same {@link Cursor} as the native thread does.
 * @internal
 * @module
 */

import type { RawRankStatus, RawSourceConfig, RawStateChange, SourceBackend } from '../../backend-types.js';
import { KvRouteError } from '../../errors.js';
import { Cursor, emptyStreamCounters, type Step } from './cursor.js';
import { loadZeromq, type Zeromq } from './deps.js';
import type { JsIngest } from './engine.js';

/** How often replay deadlines are checked (ms), as the native thread's poll interval. */
const TICK_MS = 20;
const END = 0xffffffffffffffffn;

type Socket = InstanceType<Zeromq['Subscriber']> | InstanceType<Zeromq['Dealer']>;

interface RankIo {
  dpRank: number;
  status: RawRankStatus;
  sub: InstanceType<Zeromq['Subscriber']>;
  replayEndpoint?: string;
  dealer?: InstanceType<Zeromq['Dealer']>;
  cursor: Cursor;
}

function seqOf(frame: Uint8Array): bigint | undefined {
  if (frame.length !== 8) return undefined;
  return new DataView(frame.buffer, frame.byteOffset, 8).getBigUint64(0, false);
}

export class JsEngineSource implements SourceBackend {
  private readonly io: RankIo[] = [];
  private readonly changes: RawStateChange[] = [];
  private readonly ticker: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly ingest: JsIngest,
    private readonly config: RawSourceConfig,
  ) {
    const zmq = loadZeromq();
    const opened: Socket[] = [];
    try {
      config.ranks.forEach((dpRank, i) => {
        const endpoint = config.endpoints[i];
        const sub = new zmq.Subscriber({ linger: 0, receiveHighWaterMark: config.receiveHwm });
        opened.push(sub);
        try {
          if (config.bind) sub.bindSync(endpoint);
          else sub.connect(endpoint);
        } catch (err) {
          throw new KvRouteError('ERR_INVALID_ARG', `cannot ${config.bind ? 'bind' : 'connect to'} ${endpoint}: ${(err as Error).message}`);
        }
        sub.subscribe(config.topic);
        const replayEndpoint = config.replayEndpoints?.[i];
        this.io.push({
          dpRank,
          sub,
          replayEndpoint,
          cursor: Cursor.create(
            { hasReplay: replayEndpoint !== undefined, replayTimeoutMs: config.replayTimeoutMs, maxHeld: config.maxHeld },
            config.resumeAfter?.[i],
            config.resumeDigests?.[i],
          ),
          status: {
            dpRank,
            endpoint,
            replayEndpoint: replayEndpoint ?? null,
            state: 'connecting',
            reason: 'waiting for the first batch',
            lastSeq: null,
            incarnation: 0,
            stream: emptyStreamCounters(),
            held: 0,
            malformedFrames: 0,
            lastBatchMs: null,
            lagMs: null,
          },
        });
      });
    } catch (err) {
      for (const s of opened) s.close();
      throw err;
    }
    for (let i = 0; i < this.io.length; i++) void this.receiveLive(i);
    this.ticker = setInterval(() => this.tick(), TICK_MS);
    this.ticker.unref();
  }

  private async receiveLive(i: number): Promise<void> {
    const r = this.io[i];
    while (!this.closed) {
      let frames: Uint8Array[];
      try {
        frames = await r.sub.receive();
      } catch {
        return; // closed
      }
      const steps: Step[] = [];
      const seq = frames.length === 3 ? seqOf(frames[1]) : undefined;
      if (seq === undefined) r.status.malformedFrames++;
      else r.cursor.onLive(seq, frames[2], Date.now(), steps);
      this.execute(i, steps);
    }
  }

  private async receiveReplay(i: number, dealer: InstanceType<Zeromq['Dealer']>): Promise<void> {
    const r = this.io[i];
    while (!this.closed && r.dealer === dealer) {
      let frames: Uint8Array[];
      try {
        frames = await dealer.receive();
      } catch {
        return; // closed or replaced
      }
      if (r.dealer !== dealer) return;
      const steps: Step[] = [];
      const reply = parseReply(frames);
      if (reply === null) r.status.malformedFrames++;
      else r.cursor.onReplay(reply, Date.now(), steps);
      this.execute(i, steps);
    }
  }

  private tick(): void {
    const now = Date.now();
    for (let i = 0; i < this.io.length; i++) {
      const steps: Step[] = [];
      this.io[i].cursor.onTick(now, steps);
      if (steps.length > 0) this.execute(i, steps);
    }
  }

  private execute(i: number, steps: Step[]): void {
    const r = this.io[i];
    const workerId = this.config.workerId;
    let lastTs: number | undefined;
    for (let k = 0; k < steps.length; k++) {
      const step = steps[k];
      if (step.kind === 'apply') {
        const outcome = this.ingest.applyBatch(workerId, r.dpRank, step.payload, Date.now(), step.seq);
        if (outcome.ts !== undefined) lastTs = outcome.ts;
        r.cursor.onOutcome(outcome.convert, steps);
      } else if (step.kind === 'reset') this.ingest.resetRank(workerId, r.dpRank, Date.now());
      else if (step.kind === 'request-replay') this.openReplay(i, step.start, steps);
      else this.closeReplay(r);
    }
    this.publish(r, lastTs);
  }

  private openReplay(i: number, start: bigint, steps: Step[]): void {
    const r = this.io[i];
    this.closeReplay(r);
    const zmq = loadZeromq();
    const dealer = new zmq.Dealer({ linger: 0, receiveHighWaterMark: 0 });
    try {
      dealer.connect(r.replayEndpoint as string);
    } catch (err) {
      dealer.close();
      r.cursor.replayUnavailable((err as Error).message, steps);
      return;
    }
    r.dealer = dealer;
    const request = new Uint8Array(8);
    new DataView(request.buffer).setBigUint64(0, start, false);
    dealer.send([new Uint8Array(0), request]).catch(() => {});
    void this.receiveReplay(i, dealer);
  }

  private closeReplay(r: RankIo): void {
    const d = r.dealer;
    r.dealer = undefined;
    d?.close();
  }

  private publish(r: RankIo, lastTs: number | undefined): void {
    const changes = r.cursor.takeTransitions();
    const now = Date.now();
    const s = r.status;
    s.state = r.cursor.state;
    s.lastSeq = r.cursor.lastSeq ?? null;
    s.incarnation = r.cursor.incarnation;
    s.stream = { ...r.cursor.counters };
    s.held = r.cursor.heldCount;
    if (changes.length > 0) s.reason = changes[changes.length - 1][1];
    if (lastTs !== undefined) {
      s.lastBatchMs = now;
      s.lagMs = now - lastTs * 1000;
    }
    if (changes.length > 0) {
      if (this.changes.length > 10_000) this.changes.splice(0, 5_000);
      for (const [state, reason] of changes) this.changes.push({ dpRank: r.dpRank, state, reason, atMs: now });
    }
  }

  status(): RawRankStatus[] {
    return this.io.map((r) => ({ ...r.status, lastDigest: r.cursor.appliedDigest ?? null, stream: { ...r.status.stream } }));
  }

  takeChanges(): RawStateChange[] {
    return this.changes.splice(0);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.ticker);
    for (const r of this.io) {
      this.closeReplay(r);
      r.sub.close();
    }
  }
}

/** `["", seq, payload]` or `["", topic, seq, payload]`; `undefined` = end marker; `null` = malformed. */
function parseReply(frames: Uint8Array[]): [bigint, Uint8Array] | undefined | null {
  const f = frames.length > 0 && frames[0].length === 0 ? frames.slice(1) : frames;
  let seqFrame: Uint8Array;
  let payload: Uint8Array;
  if (f.length === 2) [seqFrame, payload] = f;
  else if (f.length === 3) [, seqFrame, payload] = f;
  else return null;
  const seq = seqOf(seqFrame);
  if (seq === undefined) return null;
  if (seq === END || payload.length === 0) return undefined;
  return [seq, payload];
}
