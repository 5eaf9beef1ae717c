/**
 * Which worker holds a Responses API response. vLLM keeps a response (and the conversation a
 * follow-up with `previous_response_id` continues) in the memory of the worker that answered
 * it, so a follow-up, `GET /v1/responses/{id}` and `…/cancel` must go there: to another worker
 * the id is unknown (404). The gateway names each response it forwards (vLLM's `request_id`,
 * which becomes the response's id) and remembers its worker, the most recent
 * `responses.maxRemembered` of them. An id it does not know (an older one, one answered through
 * another gateway replica or before a restart) is looked for on the workers that may hold it,
 * all at once (`GET /v1/responses/{id}`): the one that answers 200 holds it.
 * @internal
 * @module
 */

import type { ProxyContext, Refusal } from './proxy.js';

/** The most recent responses' workers, by response id (least recently used out first). */
export class ResponseOwners {
  private readonly owners = new Map<string, bigint>();

  constructor(private readonly max: number) {}

  remember(id: string, worker: bigint): void {
    if (this.max === 0) return;
    this.owners.delete(id);
    this.owners.set(id, worker);
    if (this.owners.size > this.max) this.owners.delete(this.owners.keys().next().value as string);
  }

  forget(id: string): void {
    this.owners.delete(id);
  }

  /** The worker that answered `id`, when remembered (it becomes the most recently used). */
  owner(id: string): bigint | undefined {
    const worker = this.owners.get(id);
    if (worker !== undefined) this.remember(id, worker);
    return worker;
  }

  get size(): number {
    return this.owners.size;
  }
}

/** What finding a response's worker needs from the gateway. */
export type OwnerLookup = Pick<ProxyContext, 'owners' | 'fleet' | 'metrics' | 'opts'>;

/**
 * The worker holding response `id`, or why the request cannot go anywhere: 404 when no worker
 * has it (vLLM's answer for an unknown id), 503 when its worker is down or a worker that might
 * hold it did not answer the search.
 * @param model the request's `model`, when it names one: only workers serving it are searched.
 */
export async function findOwner(l: OwnerLookup, id: string, model: unknown, signal: AbortSignal): Promise<bigint | Refusal> {
  let known = l.owners.owner(id);
  // A worker removed from the fleet took its responses with it: the others are asked, and say 404.
  if (known !== undefined && l.fleet.get(known) === undefined) {
    l.owners.forget(id);
    known = undefined;
  }
  if (known !== undefined) {
    if (l.fleet.routable().includes(known)) {
      l.metrics.responseLookups.inc({ result: 'remembered' });
      return known;
    }
    l.metrics.responseLookups.inc({ result: 'unavailable' });
    return { refused: 503, reason: 'owner_unavailable', message: `response ${id} is held by worker ${known}, which is not available now` };
  }
  const candidates = l.fleet.routableFor(model);
  const timeout = AbortSignal.timeout(l.opts.responses.lookupTimeoutMs);
  const either = AbortSignal.any([signal, timeout]);
  let unanswered = 0;
  const found = await Promise.all(
    candidates.map(async (worker) => {
      const pool = l.fleet.get(worker)?.pool;
      if (!pool) return undefined;
      try {
        const res = await pool.request({
          method: 'GET',
          path: `/v1/responses/${encodeURIComponent(id)}`,
          headers: l.fleet.upstreamHeaders,
          signal: either,
        });
        await res.body.dump().catch(() => undefined);
        if (res.statusCode === 200) return worker;
        if (res.statusCode >= 500) unanswered++;
      } catch {
        unanswered++;
      }
      return undefined;
    }),
  );
  if (signal.aborted) return { refused: 'client_closed', message: 'the client went away' };
  const owner = found.find((w) => w !== undefined);
  if (owner !== undefined) {
    l.owners.remember(id, owner);
    l.metrics.responseLookups.inc({ result: 'found' });
    return owner;
  }
  if (unanswered > 0) {
    l.metrics.responseLookups.inc({ result: 'unavailable' });
    return {
      refused: 503,
      reason: 'owner_unavailable',
      message: `response ${id} was not found, and ${unanswered} of ${candidates.length} workers did not answer the search`,
    };
  }
  l.metrics.responseLookups.inc({ result: 'not_found' });
  return { refused: 404, message: `Response with id '${id}' not found.` };
}
