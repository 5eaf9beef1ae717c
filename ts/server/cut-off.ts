/**
 * Cutting the requests in flight to a worker that its health probes found down. A hung engine
 * (its `/health` failing or silent) holds the requests it has until the upstream timeouts, a
 * minute by default; once the probes have taken it out of routing, a request it has not answered
 * is better sent to another worker at once, and a stream it was feeding ended at once, than left
 * waiting on it. A worker found down by one request's refused connection is not cut this way:
 * its connections are already gone.
 * @internal
 * @module
 */

/** The reason a request to a worker was cut: the worker went down. */
export class WorkerCutOff extends Error {
  readonly code = 'KVROUTE_WORKER_DOWN';

  constructor(worker: bigint, reason: string) {
    super(`worker ${worker} went down (${reason}): its requests in flight were cut`);
    this.name = 'WorkerCutOff';
  }
}

/** The requests in flight to one worker, as one signal each joins, cut together. */
export class InFlightCutOff {
  private controller = new AbortController();

  /** Joined to every request sent to the worker while it is up. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Cuts every request in flight to the worker; those sent later join a fresh signal. */
  cut(reason: WorkerCutOff): void {
    const cutting = this.controller;
    this.controller = new AbortController();
    cutting.abort(reason);
  }
}
