import type { BackendName } from '../../ts/index.js';

/**
 * Every behavioural suite runs once per backend. The native entry is not skipped when the
 * binding is missing: a machine that should have it must fail loudly, not pass on JS alone.
 */
export const BACKENDS: readonly BackendName[] = ['native', 'js'];
