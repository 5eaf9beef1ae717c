/**
 * Child process of bench/gateway.ts and bench/gateway-chat.ts: N mock workers in one process (so that the gateway being
 * measured has a process of its own), printed as one JSON line of their URLs and endpoints. With `sglang` as the third
 * argument, the first half run in SGLang's prefill mode (their bootstrap ports printed too) and the rest in its decode mode.
 */

import { startMockWorker } from '../ts/index.js';

const n = Number(process.argv[2] ?? 16);
// Divides every modelled engine duration: 1000 by default; the chat bench takes more, so that engine time does not hide the gateway's.
const speedup = Number(process.argv[3] ?? 1000);
const sglang = process.argv[4] === 'sglang';
const workers = await Promise.all(
  Array.from({ length: n }, (_, i) =>
    startMockWorker({
      ...(sglang ? { disaggregationMode: i < n / 2 ? 'prefill' : 'decode', bootstrapPort: 0 } : {}),
      port: 0,
      kvEvents: 'tcp://127.0.0.1:0',
      replay: 'tcp://127.0.0.1:0',
      blockSize: 16,
      speedup,
      // The Responses phase continues stored responses.
      responsesStore: true,
    }),
  ),
);
process.stdout.write(
  `${JSON.stringify(workers.map((w) => ({ url: w.url, kvEvents: w.kvEventsEndpoints[0], replay: w.replayEndpoints[0], bootstrapPort: w.bootstrapPort })))}\n`,
);
process.on('SIGTERM', () => void Promise.all(workers.map((w) => w.close())).then(() => process.exit(0)));
