/**
 * The one error type kvroute throws. `code` is stable across releases and backends, so callers
 * can branch on it; `message` names the argument or field and what was wrong with it.
 */

/**
 * Every code a {@link KvRouteError} can carry.
 * @group Errors
 */
export type KvRouteErrorCode =
  /** An argument or option is outside its documented domain. */
  | 'ERR_INVALID_ARG'
  /** A KV event is malformed. Nothing of the call that carried it was applied. */
  | 'ERR_INVALID_EVENT'
  /** The native backend was requested but cannot be loaded on this machine. */
  | 'ERR_NATIVE_UNAVAILABLE'
  /** The object was closed. */
  | 'ERR_CLOSED'
  /** No worker (or no allowed worker) can take the request. */
  | 'ERR_NO_WORKERS'
  /** A request id is already in flight or waiting. */
  | 'ERR_DUPLICATE_REQUEST'
  /** A waiting request was aborted through its signal or cancelled with `free`. */
  | 'ERR_ABORTED'
  /** An optional dependency the call needs is not installed (the message says which, and how). */
  | 'ERR_DEPENDENCY_MISSING'
  /** A bug in kvroute (including a Rust panic caught at the boundary). Please report it. */
  | 'ERR_INTERNAL';

/**
 * Marks kvroute's errors across copies of the package: the ESM and CJS builds (or two installed
 * versions) each define the class, and `instanceof` compares by this brand instead of identity.
 */
const BRAND = Symbol.for('kvroute.KvRouteError');

/**
 * Error thrown by every kvroute API. `instanceof KvRouteError` holds for errors from any copy of
 * kvroute loaded in the process (ESM and CJS builds alike).
 * @group Errors
 */
export class KvRouteError extends Error {
  /** Stable machine-readable code. */
  readonly code: KvRouteErrorCode;

  constructor(code: KvRouteErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'KvRouteError';
    this.code = code;
    Object.defineProperty(this, BRAND, { value: true });
  }

  /** True for a KvRouteError from any copy of kvroute. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
  }
}

/**
 * True when `err` is a {@link KvRouteError} from any copy of kvroute (the same test `instanceof` makes).
 * @group Errors
 */
export function isKvRouteError(err: unknown): err is KvRouteError {
  return err instanceof KvRouteError;
}

const KNOWN_CODES: ReadonlySet<string> = new Set<KvRouteErrorCode>([
  'ERR_INVALID_ARG',
  'ERR_INVALID_EVENT',
  'ERR_NATIVE_UNAVAILABLE',
  'ERR_CLOSED',
  'ERR_INTERNAL',
  'ERR_NO_WORKERS',
  'ERR_DUPLICATE_REQUEST',
  'ERR_ABORTED',
  'ERR_DEPENDENCY_MISSING',
]);

/**
 * Converts anything the native binding throws into a KvRouteError. The binding sets kvroute's
 * codes itself; anything else (a napi type mismatch, say) means kvroute passed it bad values,
 * which is a bug on our side.
 * @internal
 */
export function fromNativeError(err: unknown): KvRouteError {
  if (err instanceof KvRouteError) return err;
  const code = (err as { code?: unknown } | null)?.code;
  const message = err instanceof Error ? err.message : String(err);
  if (typeof code === 'string' && KNOWN_CODES.has(code)) {
    return new KvRouteError(code as KvRouteErrorCode, message, { cause: err });
  }
  return new KvRouteError('ERR_INTERNAL', `native binding failed: ${message}`, { cause: err });
}

/**
 * The error an async native task resolved to as "CODE: message" (its promise cannot reject with
 * a code of its own).
 * @internal
 */
export function fromCodedText(text: string): KvRouteError {
  const sep = text.indexOf(': ');
  const code = text.slice(0, sep);
  if (sep > 0 && KNOWN_CODES.has(code)) return new KvRouteError(code as KvRouteErrorCode, text.slice(sep + 2));
  return new KvRouteError('ERR_INTERNAL', `native binding failed: ${text}`);
}

/**
 * Runs a native binding call, turning whatever it throws into a KvRouteError.
 * @internal
 */
export function callNative<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw fromNativeError(err);
  }
}

/** @internal */
export function invalidArg(message: string): KvRouteError {
  return new KvRouteError('ERR_INVALID_ARG', message);
}

/**
 * @internal `err` with the options it names (`opts.…`, as constructors call their argument)
 * renamed for where they came from: a config section (`router.…`), a nested option
 * (`routerConfig.…`). Anything but a KvRouteError is returned as it is.
 */
export function renameOptions(err: unknown, name: string): unknown {
  if (!(err instanceof KvRouteError)) return err;
  return new KvRouteError(err.code, err.message.replace(/^opts\b/, name), { cause: err });
}
