/** Mock workers for the mock worker's own suites (fast, small blocks), closed after each test with whatever else the test hands over. */

import { afterEach } from 'vitest';
import {
  type BackendName,
  type EngineSource,
  KvIndex,
  type MockWorker,
  type MockWorkerOptions,
  mockTokenize,
  startMockWorker,
} from '../../ts/index.js';
import { sleep } from './wait.js';

/** The suites' shared prompt. */
export const PROMPT = 'The quick brown fox jumps over the lazy dog, again and again.';

/** Full blocks of a text's mock tokens (block size 4, the suites' default). */
export const textBlocks = (text: string, bs = 4) => Math.floor(mockTokenize(text).length / bs);

export interface MockWorkerSuite {
  /** A mock worker on a free port (speedup 20, block size 4 unless given), closed after the test. */
  worker(opts?: MockWorkerOptions): Promise<MockWorker>;
  /** Closes something else after the test (in reverse order of handing over). */
  closeAfter(close: () => unknown): void;
  /** A worker publishing KV events and a kvroute index (of `backend`) subscribed to them. */
  subscribed(backend: BackendName, opts?: MockWorkerOptions): Promise<{ w: MockWorker; index: KvIndex; src: EngineSource }>;
}

export function mockWorkerSuite(): MockWorkerSuite {
  const cleanup: (() => unknown)[] = [];
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f();
  });
  const suite: MockWorkerSuite = {
    async worker(opts = {}) {
      const w = await startMockWorker({ port: 0, speedup: 20, blockSize: 4, ...opts });
      cleanup.push(() => w.close());
      return w;
    },
    closeAfter(close) {
      cleanup.push(close);
    },
    async subscribed(backend, opts = {}) {
      const w = await suite.worker({ kvEvents: 'tcp://127.0.0.1:0', replay: 'tcp://127.0.0.1:0', ...opts });
      const index = new KvIndex({ blockSize: 4, backend });
      cleanup.push(() => index.close());
      const src = index.subscribe({ workerId: 1, endpoint: w.kvEventsEndpoints, replayEndpoint: w.replayEndpoints, replayTimeoutMs: 2000 });
      await sleep(300); // the subscription reaches the publisher; a missed first batch is replayed anyway
      return { w, index, src };
    },
  };
  return suite;
}
