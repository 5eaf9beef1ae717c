/**
 * The per-(worker, dp rank) sequence state machine of a live event stream: the twin of
 * kvroute-core's `ingest::cursor`, rule for rule (its module docs list the rules). Pure logic:
 * it consumes frames and returns steps for the socket runner.
 * @internal
 * @module
 */

import type { RawStreamCounters } from '../../backend-types.js';
import { jsHashing } from '../hashing.js';

export type RankStateName = 'connecting' | 'active' | 'recovering' | 'resyncing' | 'failed';

export type Step =
  | { kind: 'apply'; seq: bigint; payload: Uint8Array }
  | { kind: 'reset' }
  | { kind: 'request-replay'; start: bigint }
  | { kind: 'cancel-replay' };

export interface CursorConfig {
  hasReplay: boolean;
  replayTimeoutMs: number;
  maxHeld: number;
}

/** Counters of the stream machine (the layout both backends report). */
export type StreamCounters = RawStreamCounters;

/** All stream counters at zero. */
export function emptyStreamCounters(): StreamCounters {
  return {
    frames: 0,
    gaps: 0,
    replayRequests: 0,
    replayed: 0,
    replayFailures: 0,
    replayTimeouts: 0,
    restarts: 0,
    resyncs: 0,
    duplicates: 0,
    ignored: 0,
    staleReplies: 0,
  };
}

interface Replay {
  start: bigint;
  next: bigint;
  /**
   * The batch the reply should open with: the last one applied, asked for again to check that
   * the engine did not restart during the gap (rule 4 of kvroute-core's cursor).
   */
  check?: [bigint, Applied];
  deadline: number;
}

/** The batch applied last: its payload, or only its digest (a cursor resumed from a snapshot). */
type Applied = Uint8Array | bigint;

/**
 * The digest snapshots carry for rule 4's check: xxh3-64 with seed 0 of the payload, as
 * kvroute-core's `ingest::cursor::digest` computes it.
 */
export function payloadDigest(payload: Uint8Array): bigint {
  return jsHashing.xxh3(payload, 0, 0);
}

/** Rule 4's check: a replayed batch is byte-identical to the live one. */
function samePayload(payload: Uint8Array, applied: Applied): boolean {
  if (typeof applied === 'bigint') return payloadDigest(payload) === applied;
  return payload.length === applied.length && Buffer.compare(payload, applied) === 0;
}

/** What applying a batch revealed (see `ConvertOutcome`). */
export interface AppliedOutcome {
  blockSizeMismatch?: [number, number] | number[] | null;
  freshRootStore: boolean;
  cleared: boolean;
}

export class Cursor {
  private lastLive: bigint | undefined;
  private applied: bigint | undefined;
  /** The payload applied at `applied`, or its digest (a cursor resumed from a snapshot that kept one). */
  private appliedPayload: Applied | undefined;
  /** `appliedPayload`'s digest, computed when first asked for. */
  private digestOfApplied: bigint | undefined;
  /**
   * The batches a replay applied past `lastLive`, oldest first: a live frame with one of these
   * seqs must repeat its payload, or the engine restarted (rule 1).
   */
  private ahead: [bigint, Uint8Array][] = [];
  private current: RankStateName = 'connecting';
  private partial = false;
  private replay: Replay | undefined;
  private held: [bigint, Uint8Array][] = [];
  incarnation = 0;
  readonly counters: StreamCounters = emptyStreamCounters();
  private transitions: [RankStateName, string][] = [];

  constructor(private readonly config: CursorConfig) {}

  /**
   * A cursor, or (with `resumeAfter` ≥ 0) one continuing a stream already applied up to that seq:
   * an index warm-started from a peer's dump or a snapshot (see kvroute-core's
   * `Cursor::resuming_after`).
   */
  static create(config: CursorConfig, resumeAfter: bigint | undefined, resumeDigest?: bigint): Cursor {
    const c = new Cursor(config);
    if (resumeAfter !== undefined && resumeAfter >= 0n) {
      c.lastLive = resumeAfter;
      c.applied = resumeAfter;
      if (resumeDigest !== undefined && resumeDigest >= 0n) c.appliedPayload = resumeDigest;
    }
    return c;
  }

  /** The digest of the batch applied at {@link Cursor.lastSeq}, for a snapshot to carry. */
  get appliedDigest(): bigint | undefined {
    const applied = this.appliedPayload;
    if (applied === undefined || typeof applied === 'bigint') return applied;
    this.digestOfApplied ??= payloadDigest(applied);
    return this.digestOfApplied;
  }

  get state(): RankStateName {
    return this.current;
  }

  get lastSeq(): bigint | undefined {
    return this.applied;
  }

  get heldCount(): number {
    return this.held.length;
  }

  takeTransitions(): [RankStateName, string][] {
    const t = this.transitions;
    this.transitions = [];
    return t;
  }

  private setState(state: RankStateName, reason: string): void {
    if (this.current !== state) {
      this.current = state;
      this.transitions.push([state, reason]);
    }
  }

  fail(reason: string, out: Step[]): void {
    if (this.replay) {
      this.replay = undefined;
      out.push({ kind: 'cancel-replay' });
    }
    this.held = [];
    this.setState('failed', reason);
  }

  private apply(seq: bigint, payload: Uint8Array, out: Step[]): void {
    if (this.lastLive === undefined || seq > this.lastLive) this.ahead.push([seq, payload]);
    out.push({ kind: 'apply', seq, payload });
    this.applied = seq;
    this.appliedPayload = payload;
    this.digestOfApplied = undefined;
  }

  private healthyState(): RankStateName {
    return this.partial ? 'resyncing' : 'active';
  }

  onLive(seq: bigint, payload: Uint8Array, nowMs: number, out: Step[]): void {
    this.counters.frames++;
    if (this.current === 'failed') {
      this.counters.ignored++;
      return;
    }
    const replayed = this.ahead.find(([s]) => s === seq);
    const replayedDiffers = replayed !== undefined && !samePayload(payload, replayed[1]);
    if ((this.lastLive !== undefined && seq <= this.lastLive) || replayedDiffers) {
      this.counters.restarts++;
      const previous = this.lastLive;
      if (this.replay) {
        this.replay = undefined;
        out.push({ kind: 'cancel-replay' });
      }
      this.held = [];
      out.push({ kind: 'reset' });
      this.lastLive = undefined;
      this.applied = undefined;
      this.appliedPayload = undefined;
      this.ahead = [];
      this.partial = false;
      this.incarnation++;
      const why = replayedDiffers ? `seq ${seq} is not the batch replayed` : `seq ${seq} after ${previous}`;
      this.transitions.push([this.current, `engine restarted: ${why}; rank cleared`]);
    }
    this.lastLive = seq;
    while (this.ahead.length > 0 && this.ahead[0][0] <= seq) this.ahead.shift();
    if (this.replay) {
      this.held.push([seq, payload]);
      if (this.held.length > this.config.maxHeld) {
        this.giveUp(`more than ${this.config.maxHeld} live frames arrived during the replay`, out);
      }
      return;
    }
    this.advance(seq, payload, nowMs, out);
  }

  private advance(seq: bigint, payload: Uint8Array, nowMs: number, out: Step[]): void {
    const a = this.applied;
    if (a === undefined) {
      if (seq === 0n) {
        this.apply(seq, payload, out);
        this.setState(this.healthyState(), 'stream started at seq 0');
      } else if (this.config.hasReplay) this.startReplay(0n, undefined, seq, payload, nowMs, out);
      else {
        this.partial = true;
        this.counters.resyncs++;
        this.apply(seq, payload, out);
        this.setState('resyncing', `joined at seq ${seq} with no replay socket: earlier state unknown`);
      }
    } else if (seq <= a) this.counters.duplicates++;
    else if (seq === a + 1n) {
      this.apply(seq, payload, out);
      if (this.current === 'connecting') this.setState(this.healthyState(), 'stream resumed');
    } else {
      this.counters.gaps++;
      if (this.config.hasReplay) {
        const check: [bigint, Applied] | undefined = this.appliedPayload === undefined ? undefined : [a, this.appliedPayload];
        this.startReplay(a + 1n, check, seq, payload, nowMs, out);
      } else {
        out.push({ kind: 'reset' });
        this.partial = true;
        this.counters.resyncs++;
        this.apply(seq, payload, out);
        this.setState('resyncing', `lost seq ${a + 1n}..${seq - 1n} and no replay socket: rank cleared`);
      }
    }
  }

  /** Asks for `start…` (from `check`'s seq when given), holding the live frame `seq`. */
  private startReplay(
    start: bigint,
    check: [bigint, Applied] | undefined,
    seq: bigint,
    payload: Uint8Array,
    nowMs: number,
    out: Step[],
  ): void {
    this.held.unshift([seq, payload]);
    this.openReplay(start, check, nowMs, out);
    this.setState('recovering', `replaying from seq ${start} (live stream at ${seq})`);
  }

  private openReplay(start: bigint, check: [bigint, Applied] | undefined, nowMs: number, out: Step[]): void {
    this.counters.replayRequests++;
    this.replay = { start, next: start, check, deadline: nowMs + this.config.replayTimeoutMs };
    out.push({ kind: 'request-replay', start: check ? check[0] : start });
  }

  /**
   * The replay's first batch is not the one applied at its seq: the engine restarted during the
   * gap. Clears the rank and replays the new incarnation from 0 (the held live frames are its own).
   */
  private restartedDuringGap(seq: bigint, nowMs: number, out: Step[]): void {
    this.counters.restarts++;
    this.incarnation++;
    out.push({ kind: 'reset' });
    this.applied = undefined;
    this.appliedPayload = undefined;
    this.ahead = [];
    this.partial = false;
    this.transitions.push([this.current, `engine restarted during the gap: its seq ${seq} is not the batch applied; rank cleared`]);
    this.openReplay(0n, undefined, nowMs, out);
  }

  /** One replay reply, or `undefined` for the end marker. */
  onReplay(reply: [bigint, Uint8Array] | undefined, nowMs: number, out: Step[]): void {
    const replay = this.replay;
    if (!replay) {
      this.counters.staleReplies++;
      return;
    }
    if (reply === undefined) {
      this.finishReplay(nowMs, out);
      return;
    }
    const [seq, payload] = reply;
    if (replay.check) {
      const [checked, applied] = replay.check;
      if (seq === checked) {
        replay.check = undefined;
        this.counters.replayed++;
        if (!samePayload(payload, applied)) this.restartedDuringGap(seq, nowMs, out);
        return;
      }
      if (seq > checked) {
        // The ring no longer holds the batch to check: a restarted engine's ring may start right
        // after it too, so the gap cannot be trusted.
        this.giveUp(`replay started at seq ${seq}, expected ${checked} (the batch applied last)`, out);
        return;
      }
    }
    if (seq < replay.next) {
      this.counters.duplicates++;
      return;
    }
    if (seq > replay.next) {
      const what = replay.next === replay.start ? 'started' : 'has a hole';
      this.giveUp(`replay ${what} at seq ${seq}, expected ${replay.next}`, out);
      return;
    }
    replay.next = seq + 1n;
    this.counters.replayed++;
    if (this.applied === undefined || seq > this.applied) this.apply(seq, payload, out);
  }

  private finishReplay(nowMs: number, out: Step[]): void {
    const replay = this.replay as Replay;
    this.replay = undefined;
    out.push({ kind: 'cancel-replay' });
    const front = this.held[0];
    const covered = front === undefined || (this.applied !== undefined ? this.applied + 1n >= front[0] : front[0] === 0n);
    if (!covered) {
      const firstLive = front[0];
      const reason =
        replay.next > replay.start
          ? `replay ended at seq ${replay.next - 1n}, before the live stream's seq ${firstLive}`
          : `replay socket holds nothing from seq ${replay.start}`;
      this.giveUp(reason, out);
      return;
    }
    this.setState(this.healthyState(), `replayed seq ${replay.start}..${replay.next > 0n ? replay.next - 1n : 0n}`);
    while (!this.replay) {
      const next = this.held.shift();
      if (!next) break;
      this.advance(next[0], next[1], nowMs, out);
    }
  }

  private giveUp(reason: string, out: Step[]): void {
    if (this.replay) {
      this.replay = undefined;
      out.push({ kind: 'cancel-replay' });
    }
    this.counters.replayFailures++;
    this.counters.resyncs++;
    out.push({ kind: 'reset' });
    this.ahead = [];
    this.partial = true;
    this.setState('resyncing', `${reason}: rank cleared`);
    const held = this.held;
    this.held = [];
    for (const [seq, payload] of held) this.apply(seq, payload, out);
  }

  /** The replay request could not even be sent: the gap is unrecoverable at once. */
  replayUnavailable(reason: string, out: Step[]): void {
    if (this.replay) this.giveUp(`replay request failed: ${reason}`, out);
  }

  onTick(nowMs: number, out: Step[]): void {
    if (this.replay && nowMs >= this.replay.deadline) {
      this.counters.replayTimeouts++;
      this.giveUp(`replay socket did not finish within ${this.config.replayTimeoutMs} ms`, out);
    }
  }

  onOutcome(outcome: AppliedOutcome, out: Step[]): void {
    const mismatch = outcome.blockSizeMismatch;
    if (mismatch) {
      out.push({ kind: 'reset' });
      this.fail(`block size mismatch: the engine uses ${mismatch[0]}, the router ${mismatch[1]}`, out);
      return;
    }
    if (this.partial && (outcome.freshRootStore || outcome.cleared) && !this.replay) {
      this.partial = false;
      this.setState('active', outcome.cleared ? 'engine cleared its cache' : 'fresh stores since the loss');
    }
  }
}
