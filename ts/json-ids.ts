/**
 * `toJSON` for results that carry bigint worker ids. `JSON.stringify` throws on a bigint, so a
 * debug endpoint that returns a decision used to fail; these results now write every bigint as
 * a decimal string (exact, unlike a number above 2^53). The method is non-enumerable, so
 * spreading or comparing a result is unaffected.
 * @internal
 * @module
 */

/** A copy of `value` with every bigint replaced by its decimal string. */
export function bigintsToStrings(value: unknown): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (Array.isArray(value)) return value.map(bigintsToStrings);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = bigintsToStrings(v);
    return out;
  }
  return value;
}

/** Gives `obj` a non-enumerable `toJSON` that writes its bigints as decimal strings. */
export function withIdJson<T extends object>(obj: T): T & { toJSON(): unknown } {
  Object.defineProperty(obj, 'toJSON', {
    value(this: T) {
      return bigintsToStrings(this);
    },
    enumerable: false,
    configurable: true,
    writable: true,
  });
  return obj as T & { toJSON(): unknown };
}
