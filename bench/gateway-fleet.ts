/**
 * Child process of bench/gateway.ts: N mock workers in one process (so that the gateway being
 * measured has a process of its own), printed as one JSON line of their URLs and endpoints.
 */

import { startMockWorker } from '../ts/index.js';

const n = Number(process.argv[2] ?? 16);
const workers = await Promise.all(
  Array.from({ length: n }, () =>
    startMockWorker({
      port: 0,
      kvEvents: 'tcp://127.0.0.1:0',
      replay: 'tcp://127.0.0.1:0',
      blockSize: 16,
      speedup: 1000,
      // The Responses phase continues stored responses.
      responsesStore: true,
    }),
  ),
);
process.stdout.write(
  `${JSON.stringify(workers.map((w) => ({ url: w.url, kvEvents: w.kvEventsEndpoints[0], replay: w.replayEndpoints[0] })))}\n`,
);
process.on('SIGTERM', () => void Promise.all(workers.map((w) => w.close())).then(() => process.exit(0)));
