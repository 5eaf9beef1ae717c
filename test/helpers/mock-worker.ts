/** Mock workers for the mock worker's own suites (fast, small blocks), closed after each test with whatever else the test hands over. */

import { afterEach } from 'vitest';
import { type MockWorker, type MockWorkerOptions, startMockWorker } from '../../ts/index.js';

export interface MockWorkerSuite {
  /** A mock worker on a free port (speedup 20, block size 4 unless given), closed after the test. */
  worker(opts?: MockWorkerOptions): Promise<MockWorker>;
  /** Closes something else after the test (in reverse order of handing over). */
  closeAfter(close: () => unknown): void;
}

export function mockWorkerSuite(): MockWorkerSuite {
  const cleanup: (() => unknown)[] = [];
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f();
  });
  return {
    async worker(opts = {}) {
      const w = await startMockWorker({ port: 0, speedup: 20, blockSize: 4, ...opts });
      cleanup.push(() => w.close());
      return w;
    },
    closeAfter(close) {
      cleanup.push(close);
    },
  };
}
