/**
 * The gateway's whole worker list set at once: `Gateway.setWorkers`, `PUT /admin/workers` and
 * `kvroute serve`'s config reload. Declarative, as a load balancer's reload is: the list given
 * is the fleet afterwards, whichever API added a worker before, except the index-only workers
 * registered through the indexer API (`/register`) and those DNS discovery found, which those
 * own (discovery sets its own workers with the same rules: discovery.ts).
 *
 * Each worker is kept as it is when nothing it is reached by changed: its index entries, load,
 * session bindings and breaker state stay. A new weight or `maxNumBatchedTokens` is applied in
 * place. A new URL, KV-event or replay endpoint, or rank count means another engine (a pod
 * rescheduled, say), so the worker is replaced: what the index held for it is dropped, and the
 * new engine's replay socket refills it. A removed or replaced worker's requests in flight
 * finish on its old connection pool.
 *
 * The list is checked whole before anything changes: a bad entry, a repeated id or an id another
 * owner holds is an error and leaves the fleet as it was.
 * @internal
 * @module
 */

import { KvRouteError } from '../errors.js';
import type { Fleet } from './fleet.js';
import type { FleetWorker } from './fleet-worker.js';
import { type ResolvedWorker, resolveWorker } from './options.js';

/**
 * What `Gateway.setWorkers` (and `PUT /admin/workers`, and a config reload) changed, by worker id.
 * @group Gateway
 */
export interface WorkerSetChanges {
  /** Workers that were not in the fleet. */
  added: bigint[];
  /** Workers not in the list, taken out (their requests in flight finish). */
  removed: bigint[];
  /** Workers whose URL, KV-event or replay endpoints or `dpSize` changed: removed and added again. */
  replaced: bigint[];
  /** Workers whose `weight`, `maxNumBatchedTokens`, `role` or `bootstrapPort` changed, applied in place. */
  updated: bigint[];
  /** Workers listed as they already were. */
  unchanged: bigint[];
}

const invalid = (message: string) => new KvRouteError('ERR_INVALID_ARG', message);

const sameList = (a: readonly string[] | undefined, b: readonly string[] | undefined) =>
  a === b || (a !== undefined && b !== undefined && a.length === b.length && a.every((e, i) => e === b[i]));

/** Whether `next` reaches the same engine as the worker held now (so its index entries still hold). */
function sameEngine(held: ResolvedWorker, next: ResolvedWorker): boolean {
  return (
    held.url === next.url && held.dpSize === next.dpSize && sameList(held.kvEvents, next.kvEvents) && sameList(held.replay, next.replay)
  );
}

/** A worker as the plan sees it: its settings and who added it. */
export interface HeldWorker {
  readonly spec: ResolvedWorker;
  readonly origin: FleetWorker['origin'];
}

/** The workers wanted, in list order, and what setting them changes against `held`. */
export interface WorkerSetPlan {
  wanted: ResolvedWorker[];
  changes: WorkerSetChanges;
}

/** The workers a whole list sets: all but those the indexer API and DNS discovery own. */
export const SET_BY_LISTS = (m: HeldWorker): boolean => m.origin !== 'indexer' && m.origin !== 'discovery';

const OWNERS: Record<FleetWorker['origin'], string> = {
  config: 'the config',
  admin: 'the admin API',
  indexer: 'the indexer API; /unregister it first',
  discovery: 'DNS discovery',
};

/**
 * Checks a whole list against the workers held and says what setting it changes; throws before
 * anything changes.
 */
export function planWorkerSet(
  held: ReadonlyMap<bigint, HeldWorker>,
  workers: unknown,
  at = 'workers',
  owns: (m: HeldWorker) => boolean = SET_BY_LISTS,
): WorkerSetPlan {
  if (!Array.isArray(workers)) throw invalid(`${at} must be a list of workers`);
  const wanted = new Map<bigint, ResolvedWorker>();
  workers.forEach((value, i) => {
    const spec = resolveWorker(value, `${at}[${i}]`);
    if (wanted.has(spec.id)) throw invalid(`${at}[${i}].id: worker ${spec.id} is listed twice`);
    const other = held.get(spec.id);
    if (other !== undefined && !owns(other)) throw invalid(`${at}[${i}].id: worker ${spec.id} was added by ${OWNERS[other.origin]}`);
    wanted.set(spec.id, spec);
  });
  const changes: WorkerSetChanges = { added: [], removed: [], replaced: [], updated: [], unchanged: [] };
  for (const [id, m] of held) if (owns(m) && !wanted.has(id)) changes.removed.push(id);
  for (const [id, spec] of wanted) {
    const was = held.get(id)?.spec;
    if (was === undefined) changes.added.push(id);
    else if (!sameEngine(was, spec)) changes.replaced.push(id);
    else if (
      was.weight !== spec.weight ||
      was.maxNumBatchedTokens !== spec.maxNumBatchedTokens ||
      was.role !== spec.role ||
      was.bootstrapPort !== spec.bootstrapPort
    )
      changes.updated.push(id);
    else changes.unchanged.push(id);
  }
  return { wanted: [...wanted.values()], changes };
}

/** Removes a worker without waiting for its pool to drain (its requests in flight finish on it). */
function removeNow(fleet: Fleet, id: bigint): void {
  fleet.remove(id).catch(() => undefined);
}

/**
 * Makes the fleet's workers that `owns` (by default all but the indexer API's and discovery's) those of `workers`.
 * @throws {KvRouteError} `ERR_INVALID_ARG` naming the entry at fault (nothing changed); `ERR_CLOSED` after close.
 */
export function setFleetWorkers(
  fleet: Fleet,
  workers: unknown,
  origin: FleetWorker['origin'],
  at = 'workers',
  owns: (m: HeldWorker) => boolean = SET_BY_LISTS,
): WorkerSetChanges {
  if (fleet.isClosed) throw new KvRouteError('ERR_CLOSED', 'the gateway is closed');
  const held = new Map(fleet.list().map((m) => [m.spec.id, m] as const));
  const { wanted, changes } = planWorkerSet(held, workers, at, owns);
  const specs = new Map(wanted.map((w) => [w.id, w]));
  for (const id of changes.removed) removeNow(fleet, id);
  for (const id of changes.replaced) removeNow(fleet, id);
  for (const id of [...changes.replaced, ...changes.added]) fleet.add(specs.get(id) as ResolvedWorker, origin);
  for (const id of changes.updated) {
    const spec = specs.get(id) as ResolvedWorker;
    fleet.retune(id, spec);
  }
  return changes;
}
