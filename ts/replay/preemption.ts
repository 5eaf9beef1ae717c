/**
 * Which running request a simulated rank preempts when its KV blocks run out (Dynamo's mocker
 * `preemption_mode`). Preemption is vLLM's recompute preemption: the victim's blocks go back to
 * the pool (into the prefix cache, so it may find them again) and it waits at the front of the
 * queue. The twin of `kvroute_core::replay::preemption`.
 * @internal
 * @module
 */

import { KvRouteError } from '../errors.js';
import { describe } from '../validate.js';
import type { SimRequest } from './sim-request.js';

/**
 * `'lifo'` (vLLM's rule, Dynamo's default): the newest running request goes first.
 * `'fifo'` (Dynamo's alternative): the oldest goes first. "Newest" and "oldest" follow the
 * running order, as vLLM's `running` list does: a request restarted after a preemption is the
 * newest.
 * @group Replay
 */
export type PreemptionMode = 'lifo' | 'fifo';

/** The modes, in the order `--preemption-mode` lists them. */
export const PREEMPTION_MODES: readonly PreemptionMode[] = ['lifo', 'fifo'];

/**
 * The preemption mode an option names; `'lifo'` when absent.
 * @throws {KvRouteError} `ERR_INVALID_ARG` for anything else.
 */
export function preemptionMode(value: unknown, name = 'preemptionMode'): PreemptionMode {
  if (value === undefined) return 'lifo';
  if (PREEMPTION_MODES.includes(value as PreemptionMode)) return value as PreemptionMode;
  throw new KvRouteError('ERR_INVALID_ARG', `${name} must be 'lifo' or 'fifo', got ${describe(value)}`);
}

/**
 * The running request (of `running`'s lists) to preempt so that `current`, which needs blocks,
 * can go on; `current` is undefined when a step reserves room for all its decodes at once.
 * - `'lifo'`: the newest admitted after `current`, so the oldest request always makes progress;
 *   undefined when there is none (then `current` itself yields, the caller's move).
 * - `'fifo'`: the oldest, `current` included: when it is the oldest it yields its own blocks.
 */
export function preemptionVictim(
  mode: PreemptionMode,
  running: readonly (readonly SimRequest[])[],
  current?: SimRequest,
): SimRequest | undefined {
  let victim: SimRequest | undefined;
  for (const list of running) {
    for (const x of list) {
      if (mode === 'fifo') {
        if (!victim || x.admittedSeq < victim.admittedSeq) victim = x;
      } else if ((!current || x.admittedSeq > current.admittedSeq) && (!victim || x.admittedSeq > victim.admittedSeq)) {
        victim = x;
      }
    }
  }
  return victim;
}
