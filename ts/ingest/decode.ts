/**
 * `decodeEngineBatch`: a typed view of one engine KV-event payload, for debugging and tests.
 * @module
 */

import { resolveBackend } from '../backend.js';
import type { BackendName } from '../backend-types.js';
import { KvRouteError } from '../errors.js';
import { checkOptions, describe } from '../validate.js';
import { toDecodedBatch } from './stats.js';
import type { DecodedBatch } from './types.js';

/**
 * Decodes the msgpack payload of one engine KV-event message (vLLM, SGLang or TensorRT-LLM, any
 * layout) exactly as ingestion would, hashes folded to u64.
 *
 * @throws {KvRouteError} `ERR_INVALID_EVENT` when the payload does not decode (the message says
 * where); `ERR_INVALID_ARG` when it is not a Uint8Array.
 * @group Engine events
 */
export function decodeEngineBatch(payload: Uint8Array, opts?: { backend?: BackendName }): DecodedBatch {
  if (!(payload instanceof Uint8Array))
    throw new KvRouteError('ERR_INVALID_ARG', `payload must be a Uint8Array (or Buffer), got ${describe(payload)}`);
  const o = checkOptions(opts, 'opts', ['backend']);
  const raw = resolveBackend(o.backend, 'opts.backend').decodeEngineBatch(payload);
  if (raw.error != null) throw new KvRouteError('ERR_INVALID_EVENT', `engine batch does not decode: ${raw.error}`);
  return toDecodedBatch(raw);
}
