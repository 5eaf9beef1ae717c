/**
 * Reading an engine request's optional fields for routing only: a value the gateway cannot use
 * is left to the worker, which checks the request and answers for it.
 * @internal
 * @module
 */

/** `v` when it is a positive safe integer; undefined otherwise (the worker checks the field). */
export function positiveInteger(v: unknown): number | undefined {
  return Number.isSafeInteger(v) && (v as number) > 0 ? (v as number) : undefined;
}
