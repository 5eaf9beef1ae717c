/**
 * What scopes a request's routing besides its tokens: the workers serving its `model` (in a
 * fleet of several models, or for a LoRA adapter), and what scopes its KV blocks: the adapter,
 * and vLLM's `cache_salt`. The engines name such blocks apart from the base model's and from
 * other tenants' (vLLM hashes the adapter into every block and the salt into the first), and
 * publish the adapter's name and the salt with them; the index hashes them in the same way, so
 * the request must be routed under the same scope to find them.
 * @internal
 * @module
 */

import { CACHE_SALT_PREFIX } from '../js/ingest/convert.js';
import type { Fleet } from './fleet.js';

export interface RoutingScope {
  /** The route request's hashing fields (only those set, to spread into it). */
  hash: {
    /** The adapter, when some worker lists the request's `model` as one. */
    loraName?: string;
    /** The index's namespace for the request's `cache_salt`. */
    cacheNamespace?: string;
  };
  /** The workers serving the model or adapter, when not all do: only they can take the request. */
  workers?: ReadonlySet<bigint>;
}

/**
 * The namespace the index gives a chain whose first block carries `salt` among vLLM's extra keys:
 * the salt itself, or the rest of a `dynamo-cache-salt:` key (the ingestion's rule).
 */
export function namespaceOfSalt(salt: string): string {
  return salt.startsWith(CACHE_SALT_PREFIX) && salt.length > CACHE_SALT_PREFIX.length ? salt.slice(CACHE_SALT_PREFIX.length) : salt;
}

export function routingScope(model: string | undefined, cacheSalt: string | undefined, fleet: Fleet): RoutingScope {
  const scope: RoutingScope = { hash: {} };
  const serving = model === undefined ? undefined : fleet.servingWorkers(model);
  if (serving) {
    if (serving.adapter) scope.hash.loraName = model;
    scope.workers = new Set(serving.workers);
  }
  if (cacheSalt !== undefined) scope.hash.cacheNamespace = namespaceOfSalt(cacheSalt);
  return scope;
}

/** Whether a worker may take a request of this scope. */
export function inScope(scope: RoutingScope, worker: bigint): boolean {
  return scope.workers?.has(worker) ?? true;
}
