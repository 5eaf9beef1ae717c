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

function load<T>(name: string, purpose: string): T {
  try {
    return require(name) as T;
  } catch (err) {
    throw new KvRouteError(
      'ERR_DEPENDENCY_MISSING',
      `the pure-JS backend needs the optional package "${name}" for ${purpose}: npm install ${name} (or use the native backend)`,
      { cause: err },
    );
  }
}

export type Msgpackr = typeof import('msgpackr');
export type Zeromq = typeof import('zeromq');

let msgpackr: Msgpackr | undefined;
let zeromq: Zeromq | undefined;

export function loadMsgpackr(): Msgpackr {
  msgpackr ??= load<Msgpackr>('msgpackr', 'decoding engine KV events');
  return msgpackr;
}

export function loadZeromq(): Zeromq {
  zeromq ??= load<Zeromq>('zeromq', 'subscribing to engine KV events');
  return zeromq;
}
