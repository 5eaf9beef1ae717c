/**
 * Workers put to rest through the gateway's control routes, out of routing until woken. An
 * engine asleep (vLLM's `/sleep`: weights offloaded, KV cache dropped), paused (SGLang's
 * `/pause_generation`) or with its memory released (SGLang's `/release_memory_occupation`)
 * still answers its health probe but serves no request, so a gateway that routed to it would
 * fail or stall the request. A worker that answered 200 to such a call rests until it answers 200
 * to the call that undoes it: `/wake_up`, `/continue_generation`, `/resume_memory_occupation`.
 * Both engines can wake in parts (vLLM's `?tags=weights`, then `?tags=kv_cache`; SGLang's
 * `{"tags": [...]}`): the worker rests until every part put to rest is back. A worker that
 * refused the call (a cache its running requests hold) keeps serving. vLLM's engines are also
 * asked after each health probe (`GET /is_sleeping`), whose answer overrides: calls made to an
 * engine directly are seen that way for sleep, not for SGLang's pause or release.
 * @internal
 * @module
 */

/**
 * Why a worker rests: asleep (vLLM's `/sleep`), paused (SGLang's `/pause_generation`), or its
 * memory released (SGLang's `/release_memory_occupation`).
 * @group Gateway
 */
export type RestReason = 'sleep' | 'pause' | 'release';

/** The parts each call puts to rest when it names none (the engines' own defaults). */
const EVERY_PART: Record<RestReason, readonly string[]> = {
  sleep: ['weights', 'kv_cache'],
  pause: ['generation'],
  release: ['weights', 'kv_cache', 'cuda_graph'],
};

/** What a control route does to a worker's rest when the worker answers 200. */
export interface RestChange {
  reason: RestReason;
  /** Parts put to rest, or woken. */
  parts: readonly string[];
  wake: boolean;
}

/** A worker found awake (vLLM's `/is_sleeping` says false): every part of its sleep is back. */
export const FOUND_AWAKE: RestChange = { reason: 'sleep', parts: EVERY_PART.sleep, wake: true };
/** A worker found asleep (vLLM's `/is_sleeping` says true) that the gateway did not put to sleep. */
export const FOUND_ASLEEP: RestChange = { reason: 'sleep', parts: EVERY_PART.sleep, wake: false };

/** The tags a call names: vLLM's in the query (`?tags=a&tags=b`), SGLang's in the body (`{"tags": [...]}`). */
function namedParts(reason: RestReason, query: URLSearchParams, body: unknown): readonly string[] {
  const fromBody = body !== null && typeof body === 'object' ? (body as { tags?: unknown }).tags : undefined;
  const tags = reason === 'sleep' ? query.getAll('tags') : Array.isArray(fromBody) ? fromBody.filter((t) => typeof t === 'string') : [];
  return tags.length > 0 ? tags : EVERY_PART[reason];
}

/** What the control route at `path` does to a worker's rest, or undefined for one that does not. */
export function restChange(path: string, query: URLSearchParams, body: unknown): RestChange | undefined {
  switch (path) {
    case '/sleep':
      return { reason: 'sleep', parts: EVERY_PART.sleep, wake: false };
    case '/wake_up':
      return { reason: 'sleep', parts: namedParts('sleep', query, body), wake: true };
    case '/pause_generation':
      return { reason: 'pause', parts: EVERY_PART.pause, wake: false };
    case '/continue_generation':
      return { reason: 'pause', parts: EVERY_PART.pause, wake: true };
    case '/release_memory_occupation':
      return { reason: 'release', parts: namedParts('release', query, body), wake: false };
    case '/resume_memory_occupation':
      return { reason: 'release', parts: namedParts('release', query, body), wake: true };
    default:
      return undefined;
  }
}

/** One worker's rest: the parts still at rest, per reason. */
export class WorkerRest {
  private readonly resting = new Map<RestReason, Set<string>>();

  /** Applies a call the worker answered 200 to; true when whether it rests changed. */
  apply(change: RestChange): boolean {
    const before = this.isResting;
    const parts = this.resting.get(change.reason) ?? new Set<string>();
    for (const part of change.parts) {
      if (change.wake) parts.delete(part);
      else parts.add(part);
    }
    if (parts.size > 0) this.resting.set(change.reason, parts);
    else this.resting.delete(change.reason);
    return before !== this.isResting;
  }

  get isResting(): boolean {
    return this.resting.size > 0;
  }

  /** Why it rests (empty when it does not). */
  get reasons(): RestReason[] {
    return [...this.resting.keys()];
  }
}
