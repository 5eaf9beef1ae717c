/**
 * The pure-JS backend's optional dependencies for engine events: `msgpackr` (decoding) and
 * `zeromq` (sockets). Loaded on first use only, so users of the native backend, or of no
 * engine events at all, never need them installed.
 * @internal
 * @module
 */

import { createRequire } from 'node:module';
import { KvRouteError } from '../../errors.js';

const require = createRequire(import.meta.url);

/** Loads an optional package, or throws `ERR_DEPENDENCY_MISSING` naming what it is needed for. */
export function loadOptional<T>(name: string, purpose: string, alternative = 'or use the native backend'): T {
  try {
    return require(name) as T;
  } catch (err) {
    throw new KvRouteError(
      'ERR_DEPENDENCY_MISSING',
      `kvroute needs the optional package "${name}" for ${purpose}: npm install ${name} (${alternative})`,
      { cause: err },
    );
  }
}

export type Msgpackr = typeof import('msgpackr');
export type Zeromq = typeof import('zeromq');

let msgpackr: Msgpackr | undefined;
let zeromq: Zeromq | undefined;

export function loadMsgpackr(): Msgpackr {
  msgpackr ??= loadOptional<Msgpackr>('msgpackr', 'decoding engine KV events on the pure-JS backend');
  return msgpackr;
}

export function loadZeromq(): Zeromq {
  zeromq ??= loadOptional<Zeromq>('zeromq', 'subscribing to engine KV events on the pure-JS backend');
  return zeromq;
}
