import { afterEach } from 'vitest';
import { type BackendName, KvRouter, type KvRouterOptions } from '../../ts/index.js';

/**
 * KvRouters for one backend's suite, on a clock the test moves (`clock.now += 1000`), each
 * closed after its test. Call inside a `describe` (it registers an `afterEach`).
 */
export function routerSuite(backend: BackendName, blockSize: number) {
  const clock = { now: 1_000_000 };
  const open: KvRouter[] = [];
  afterEach(() => {
    for (const r of open.splice(0)) r.close();
  });
  /** A router at block size `blockSize` on the suite's clock, which restarts at 1,000,000 ms. */
  const make = (opts: Partial<KvRouterOptions> = {}) => {
    clock.now = 1_000_000;
    const r = new KvRouter({ blockSize, backend, now: () => clock.now, ...opts });
    open.push(r);
    return r;
  };
  return { clock, make };
}
