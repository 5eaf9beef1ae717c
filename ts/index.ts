/**
 * kvroute: KV-cache-aware request routing for LLM fleets.
 *
 * @packageDocumentation
 */

export type { BackendName } from './backend.js';
export { backend, nativeAvailable, nativeLoadError } from './backend.js';
export type { KvRouteErrorCode } from './errors.js';
export { KvRouteError } from './errors.js';
export type { BackendOption, BlockHashOptions } from './hashing.js';
export { blockHashes, sequenceHashes, xxh3_64 } from './hashing.js';
