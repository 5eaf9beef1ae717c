/**
 * A bounded wait on a promise, its timer cleared as soon as either side settles (so a short-lived
 * wait keeps no timer, nor the process, alive). The mock worker's bootstrap rooms and the
 * gateway's judgement of a failed SGLang decode leg both wait so.
 * @internal
 * @module
 */

/** What {@link within} answers for a promise that did not settle in time. */
export const TIMED_OUT = Symbol('timed out');

/** Waits for `promise` at most `ms`; {@link TIMED_OUT} when it did not settle. */
export async function within<T>(promise: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(() => resolve(TIMED_OUT), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}
