/**
 * Cutting the requests in flight to a worker that went down. A hung engine (its `/health`
 * failing or silent) holds the requests it has until the upstream timeouts, a minute by default;
 * once the probes have taken it out of routing, a request it has not answered is better sent to
 * another worker at once, and a stream it was feeding ended at once, than left waiting on it.
 * An engine stuck behind a `/health` that still answers (vLLM's checks only that its engine core
 * is alive) is found by its requests' timeouts instead: when they take it down, the requests it
 * has not answered are cut, and the streams it answered keep going while they flow (their own
 * `bodyTimeoutMs` ends them if they stop), since a worker too slow for one request's deadline may
 * still be feeding another. A worker found down by a refused connection is not cut (its
 * connections are already gone), nor one found down by its 5xx answers (it answers).
 *
 * Each request gets a signal of its own, held in its worker's sets until its answer's body
 * closes, rather than `AbortSignal.any` over one long-lived signal per worker: in Node 20 every
 * signal `any` makes stays reachable from the long-lived one (about 1.2 kB a request, measured,
 * with the listener undici adds), and a long-lived signal with many listeners warns. That signal
 * is an event emitter, which undici takes as well as an `AbortSignal`: an `AbortController`'s
 * signal and undici's listener on it cost about 5 µs a request more in Node 20 (measured), about
 * 1% of the gateway's CPU time for a short request.
 * @internal
 * @module
 */

import { EventEmitter } from 'node:events';
import type { Dispatcher } from 'undici';

/** What took the worker down: its probes, or its requests' timeouts. */
export type CutVerdict = 'probe' | 'timeouts';

/** The reason a request to a worker was cut: the worker went down. */
export class WorkerCutOff extends Error {
  readonly code = 'KVROUTE_WORKER_DOWN';

  constructor(
    worker: bigint,
    reason: string,
    readonly verdict: CutVerdict,
  ) {
    super(`worker ${worker} went down (${reason}): its requests in flight${verdict === 'timeouts' ? ' it had not answered' : ''} were cut`);
    this.name = 'WorkerCutOff';
  }
}

/** One request's signal, in the shape undici reads from an event emitter (`aborted`, `reason`, `'abort'`). */
class RequestSignal extends EventEmitter {
  aborted = false;
  reason: unknown = undefined;

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.emit('abort');
  }
}

/** The requests in flight to one worker, cut together. */
export class InFlightCutOff {
  /** Requests whose answers' headers have not come. */
  private readonly unanswered = new Set<RequestSignal>();
  /** Requests answered, their bodies not yet closed. */
  private readonly answered = new Set<RequestSignal>();

  /**
   * `pool.request(options)`, cut with the worker's other requests in flight until its answer's
   * body closes (read, dumped or destroyed); `options.signal` still aborts it, with its reason.
   */
  async request(pool: Dispatcher, options: Dispatcher.RequestOptions): Promise<Dispatcher.ResponseData> {
    const signal = new RequestSignal();
    const own = options.signal as AbortSignal | undefined;
    const follow = () => signal.abort(own?.reason);
    if (own?.aborted) signal.abort(own.reason);
    else own?.addEventListener('abort', follow, { once: true });
    this.unanswered.add(signal);
    const leave = () => {
      this.unanswered.delete(signal);
      this.answered.delete(signal);
      own?.removeEventListener('abort', follow);
    };
    try {
      const res = await pool.request({ ...options, signal });
      // Cut meanwhile (both sets cleared): it stays out, its body aborted with the cut's reason.
      if (this.unanswered.delete(signal)) this.answered.add(signal);
      res.body.once('close', leave);
      return res;
    } catch (err) {
      leave();
      throw err;
    }
  }

  /**
   * Cuts the worker's requests in flight as `reason.verdict` says: every one on its probes'
   * verdict, the ones it has not answered on its requests' timeouts'. Returns how many.
   */
  cut(reason: WorkerCutOff): number {
    const unanswered = InFlightCutOff.abort(this.unanswered, reason);
    return reason.verdict === 'probe' ? unanswered + InFlightCutOff.abort(this.answered, reason) : unanswered;
  }

  private static abort(set: Set<RequestSignal>, reason: WorkerCutOff): number {
    const cutting = [...set];
    set.clear();
    for (const signal of cutting) signal.abort(reason);
    return cutting.length;
  }
}
