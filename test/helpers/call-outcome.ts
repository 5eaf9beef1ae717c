import { isKvRouteError } from '../../ts/index.js';

/** JSON with bigints as decimal strings, for comparing results of the two backends. */
export const json = (v: unknown): string => JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? x.toString() : x));

/**
 * What a call did: its result as JSON, or the code and message of the KvRouteError it threw
 * (anything else fails the test).
 */
export function callOutcome(f: () => unknown): { ok: boolean; text: string } {
  try {
    return { ok: true, text: json(f()) };
  } catch (err) {
    if (!isKvRouteError(err)) throw err;
    return { ok: false, text: `${err.code}: ${err.message}` };
  }
}
