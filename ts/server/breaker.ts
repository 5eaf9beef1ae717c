/**
 * The circuit breaker of one worker. `healthy` → `suspect` on a failure → `down` after
 * `failureThreshold` consecutive failures (a connect error: at once, since a closed port is not
 * a fluke); `down` → `healthy` after `recoveryThreshold` consecutive successful probes. Any
 * success while up clears the failures. Only `down` takes a worker out of routing.
 * @internal
 * @module
 */

/**
 * A worker's health as the gateway sees it.
 * @group Gateway
 */
export type WorkerHealthState = 'healthy' | 'suspect' | 'down';

/**
 * Why a call to a worker failed: its connection was refused or reset (`connect`), it answered
 * 5xx (`status`), it timed out (`timeout`), its probe failed or its probes' verdict cut it
 * (`probe`), or it was cut unanswered when its other requests' timeouts took the worker down (`cut`).
 */
export type FailureKind = 'connect' | 'status' | 'timeout' | 'probe' | 'cut';

export class Breaker {
  state: WorkerHealthState = 'healthy';
  failures = 0;
  private successes = 0;
  /** Why the last transition happened. */
  reason = 'registered';

  constructor(
    private readonly failureThreshold: number,
    private readonly recoveryThreshold: number,
  ) {}

  /** Records a failure; returns the new state when it changed. */
  failure(kind: FailureKind, detail: string): WorkerHealthState | undefined {
    this.successes = 0;
    if (this.state === 'down') return undefined;
    this.failures++;
    const next: WorkerHealthState = kind === 'connect' || this.failures >= this.failureThreshold ? 'down' : 'suspect';
    return this.move(next, `${kind}: ${detail}`);
  }

  /** Records a success (a probe, or a request while up); returns the new state when it changed. */
  success(fromProbe: boolean): WorkerHealthState | undefined {
    if (this.state === 'down') {
      if (!fromProbe) return undefined;
      this.successes++;
      if (this.successes < this.recoveryThreshold) return undefined;
    }
    this.failures = 0;
    this.successes = 0;
    return this.move('healthy', fromProbe ? 'probe succeeded' : 'request succeeded');
  }

  private move(next: WorkerHealthState, reason: string): WorkerHealthState | undefined {
    if (next === this.state) return undefined;
    this.state = next;
    this.reason = reason;
    return next;
  }
}
