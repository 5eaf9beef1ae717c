import { fork } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { KvIndex } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { ROOT } from './helpers/dist.js';
import { sleep, waitFor } from './helpers/wait.js';

const BATCHES = 3000;
const BLOCK_MS = 2000;

describe.each(BACKENDS)('ingestion while the event loop is blocked (%s)', (backend) => {
  test(`a publisher in another process sends ${BATCHES} batches during a ${BLOCK_MS} ms block; every one is applied`, async () => {
    const child = fork(join(ROOT, 'test', 'fixtures', 'burst-publisher.mjs'), [String(BATCHES)], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const messages: { kind: string; port?: number }[] = [];
    child.on('message', (m) => messages.push(m as { kind: string; port?: number }));
    const index = new KvIndex({ blockSize: 4, backend });
    try {
      await waitFor(() => messages.some((m) => m.kind === 'port'), 'the publisher port');
      const port = messages.find((m) => m.kind === 'port')?.port as number;
      const src = index.subscribe({ workerId: 1, endpoint: `tcp://127.0.0.1:${port}` });
      await waitFor(() => messages.some((m) => m.kind === 'accepted'), 'the connection');
      await sleep(300); // the subscription reaches the publisher
      child.send('go');
      const until = Date.now() + BLOCK_MS;
      while (Date.now() < until) {
        // Blocks the JavaScript thread: no timer, no socket callback, no promise runs here.
      }
      const seenDuringBlock = src.stats().ranks[0].batches;
      await waitFor(() => messages.some((m) => m.kind === 'done'), 'the publisher to finish', 20_000);
      if (backend === 'native') {
        // Everything was received, decoded, hashed and applied on the Rust thread meanwhile.
        expect(seenDuringBlock).toBe(BATCHES);
      } else {
        // The JS backend runs on this thread: nothing could happen until the block ended,
        // and libzmq's queue kept every batch for it.
        expect(seenDuringBlock).toBe(0);
        await waitFor(() => src.stats().ranks[0].batches === BATCHES, 'the JS backend to catch up');
      }
      await index.flush();
      expect(index.stats().blocks).toBe(BATCHES);
      expect(src.stats().ranks[0]).toMatchObject({ state: 'active', gaps: 0, lastSeq: BigInt(BATCHES - 1) });
    } finally {
      index.close();
      child.disconnect();
    }
  });
});
