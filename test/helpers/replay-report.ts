/**
 * Replay reports as two backends, or two identical runs, must agree on them: without the fields
 * that measure the machine rather than the simulation (`WALL_CLOCK_FIELDS`).
 */
import type { ReplayReport } from '../../ts/index.js';
import { WALL_CLOCK_FIELDS } from '../../ts/replay/report.js';

const WALL_CLOCK: readonly string[] = WALL_CLOCK_FIELDS;

/** A JSON copy of `value` without the wall-clock fields, at any depth. */
export function withoutWallClock<T>(value: T): T {
  return JSON.parse(JSON.stringify(value, (key, v) => (WALL_CLOCK.includes(key) ? undefined : v)));
}

/** A report's policies without the wall-clock fields. */
export function simulatedPolicies(report: ReplayReport): ReplayReport['policies'] {
  return withoutWallClock(report.policies);
}
