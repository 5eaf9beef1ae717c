/**
 * While requests wait, a wall-clock timer runs the router's expiry sweep every second, so waiters
 * behind requests that are never freed are released even when no other call comes. It stops
 * itself when nothing waits, and is unref'd: it never keeps the process alive.
 * @internal
 * @module
 */

export class Sweeper {
  private timer: NodeJS.Timeout | undefined;

  /** `sweep` runs each second while `active()` holds. */
  constructor(
    private readonly active: () => boolean,
    private readonly sweep: () => void,
  ) {}

  arm(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      if (!this.active()) return this.disarm();
      this.sweep();
    }, 1000);
    this.timer.unref();
  }

  disarm(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
