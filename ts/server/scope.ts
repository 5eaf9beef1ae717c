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
import type { BatchPrompt } from '../router/types.js';
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
  /**
   * An SGLang batch of several adapters: each other prompt's adapter as its blocks are hashed
   * (undefined: none), in the order of `ReadRequest.batchModels`.
   */
  batchAdapters?: (string | undefined)[];
}

/**
 * The namespace the index gives a chain whose first block carries `salt` among vLLM's extra keys:
 * the salt itself, or the rest of a `dynamo-cache-salt:` key (the ingestion's rule).
 */
export function namespaceOfSalt(salt: string): string {
  return salt.startsWith(CACHE_SALT_PREFIX) && salt.length > CACHE_SALT_PREFIX.length ? salt.slice(CACHE_SALT_PREFIX.length) : salt;
}

/**
 * A request's scope under `model`; with `batchModels` (an SGLang batch of several adapters), only
 * the workers serving every model named may take it, and each other prompt's blocks are hashed
 * under its own adapter.
 */
export function routingScope(
  model: string | undefined,
  cacheSalt: string | undefined,
  fleet: Fleet,
  batchModels?: readonly (string | undefined)[],
): RoutingScope {
  const scope: RoutingScope = { hash: {} };
  const serving = model === undefined ? undefined : fleet.servingWorkers(model);
  if (serving) {
    if (serving.adapter) scope.hash.loraName = model;
    scope.workers = new Set(serving.workers);
  }
  if (batchModels) {
    // Each model once: a batch of thousands of prompts names a few adapters.
    const adapterOf = new Map<string | undefined, string | undefined>();
    for (const m of new Set(batchModels)) {
      const also = m === undefined ? undefined : fleet.servingWorkers(m);
      if (also) scope.workers = new Set([...(scope.workers ?? also.workers)].filter((w) => also.workers.includes(w)));
      adapterOf.set(m, also?.adapter ? m : undefined);
    }
    scope.batchAdapters = batchModels.map((m) => adapterOf.get(m));
  }
  if (cacheSalt !== undefined) scope.hash.cacheNamespace = namespaceOfSalt(cacheSalt);
  return scope;
}

/**
 * A batch's other prompts as the router takes them (`RouteRequest.batchPrompts`): under the
 * request's adapter, or, in a batch of several adapters, each under its own.
 */
export function batchPromptsOf(tokens: readonly number[][], scope: RoutingScope): BatchPrompt[] | number[][] {
  const adapters = scope.batchAdapters;
  if (!adapters) return tokens as number[][];
  return tokens.map((t, i) => ({ tokens: t, loraName: adapters[i] ?? null }));
}

/** Whether a worker may take a request of this scope. */
export function inScope(scope: RoutingScope, worker: bigint): boolean {
  return scope.workers?.has(worker) ?? true;
}
