/**
 * Cutting the requests in flight to a worker that its health probes found down. A hung engine
 * (its `/health` failing or silent) holds the requests it has until the upstream timeouts, a
 * minute by default; once the probes have taken it out of routing, a request it has not answered
 * is better sent to another worker at once, and a stream it was feeding ended at once, than left
 * waiting on it. A worker found down by one request's refused connection is not cut this way:
 * its connections are already gone.
 *
 * Each request gets an abort controller of its own, held in its worker's set until its answer's
 * body closes, rather than `AbortSignal.any` over one long-lived signal per worker: in Node 20
 * every signal `any` makes stays reachable from the long-lived one (about 1.2 kB a request,
 * measured, with the listener undici adds), and a long-lived signal with many listeners warns.
 * @internal
 * @module
 */

import type { Dispatcher } from 'undici';

/** The reason a request to a worker was cut: the worker went down. */
export class WorkerCutOff extends Error {
  readonly code = 'KVROUTE_WORKER_DOWN';

  constructor(worker: bigint, reason: string) {
    super(`worker ${worker} went down (${reason}): its requests in flight were cut`);
    this.name = 'WorkerCutOff';
  }
}

/** The requests in flight to one worker, cut together. */
export class InFlightCutOff {
  private readonly live = new Set<AbortController>();

  /**
   * `pool.request(options)`, cut with the worker's other requests in flight until its answer's
   * body closes (read, dumped or destroyed); `options.signal` still aborts it, with its reason.
   */
  async request(pool: Dispatcher, options: Dispatcher.RequestOptions): Promise<Dispatcher.ResponseData> {
    const controller = new AbortController();
    const own = options.signal as AbortSignal | undefined;
    const follow = () => controller.abort(own?.reason);
    if (own?.aborted) controller.abort(own.reason);
    else own?.addEventListener('abort', follow, { once: true });
    this.live.add(controller);
    const leave = () => {
      this.live.delete(controller);
      own?.removeEventListener('abort', follow);
    };
    try {
      const res = await pool.request({ ...options, signal: controller.signal });
      res.body.once('close', leave);
      return res;
    } catch (err) {
      leave();
      throw err;
    }
  }

  /** How many requests to the worker are in flight (their answers' bodies not yet closed). */
  get size(): number {
    return this.live.size;
  }

  /** Cuts every request in flight to the worker. */
  cut(reason: WorkerCutOff): void {
    const cutting = [...this.live];
    this.live.clear();
    for (const controller of cutting) controller.abort(reason);
  }
}
