/**
 * A worker's part in serving requests: whole requests, or one leg of a disaggregated request
 * (see `disaggregation.ts`). Its own file so that both the worker list and DNS discovery check it.
 * @internal
 * @module
 */

import { describe } from '../validate.js';
import { invalid } from './option-checks.js';

/**
 * A worker's part in serving requests. With routable `'prefill'` and `'decode'` workers, a
 * completion or chat is served in two legs, as vLLM's disaggregated proxy serves it (NixlConnector
 * and the like): its prefill on a prefill worker chosen by KV overlap and load (`max_tokens` 1,
 * `kv_transfer_params.do_remote_decode`), then the request itself on a decode worker, with the
 * KV-transfer parameters the prefill answered. Other requests go whole to aggregated and decode
 * workers; a prefill worker takes prefill legs only.
 * @group Gateway
 */
export type WorkerRole = 'aggregated' | 'prefill' | 'decode';

/** The roles a worker may have. */
export const WORKER_ROLES: readonly WorkerRole[] = ['aggregated', 'prefill', 'decode'];

/** A worker's `role`, `'aggregated'` when absent. */
export function workerRole(value: unknown, at: string): WorkerRole {
  if (value === undefined) return 'aggregated';
  if (!WORKER_ROLES.includes(value as WorkerRole))
    throw invalid(`${at} must be one of ${WORKER_ROLES.map((r) => `'${r}'`).join(', ')}, got ${describe(value)}`);
  return value as WorkerRole;
}
