/**
 * `kvroute mock-worker`: runs {@link startMockWorker} until SIGINT or SIGTERM (or a `crash`
 * fault, which exits with code 1).
 * @internal
 * @module
 */

import { parseArgs, UsageError } from '../cli-args.js';
import type { MockFault, MockWorkerOptions } from './options.js';
import { FAULT_KINDS } from './options.js';
import { onMockCrash, startMockWorker } from './worker.js';

/** `kind@ms` or `kind:arg@ms`, comma-separated: `drop-events:3@1000,restart@5000`. */
function parseFaults(spec: string): NonNullable<MockWorkerOptions['faults']> {
  return spec.split(',').map((part) => {
    const m = /^([a-z-]+)(?::([\d.]+))?@(\d+)$/.exec(part.trim());
    if (!m || !FAULT_KINDS.includes(m[1] as never)) {
      throw new UsageError(`--faults: "${part}" is not kind[:arg]@ms with kind one of ${FAULT_KINDS.join(', ')}`);
    }
    const arg = m[2] === undefined ? undefined : Number(m[2]);
    const fault = (
      m[1] === 'slow' ? { kind: 'slow', factor: arg } : m[1] === 'drop-events' ? { kind: 'drop-events', count: arg } : { kind: m[1] }
    ) as MockFault;
    return { fault, afterMs: Number(m[3]) };
  });
}

export async function runMockWorker(argv: string[]): Promise<number> {
  const { positional, values: v } = parseArgs(argv, {
    port: 'number',
    host: 'string',
    'kv-events': 'string',
    replay: 'string',
    'dp-size': 'number',
    'block-size': 'number',
    'num-gpu-blocks': 'number',
    'max-num-seqs': 'number',
    'max-num-batched-tokens': 'number',
    speedup: 'number',
    model: 'string',
    wire: 'string',
    seed: 'number',
    topic: 'string',
    faults: 'string',
  });
  if (positional.length > 0) throw new UsageError('mock-worker takes no positional arguments');
  const n = (k: string) => v[k] as number | undefined;
  const s = (k: string) => v[k] as string | undefined;
  const worker = await startMockWorker({
    port: n('port'),
    host: s('host'),
    kvEvents: s('kv-events'),
    replay: s('replay'),
    dpSize: n('dp-size'),
    blockSize: n('block-size'),
    numGpuBlocks: n('num-gpu-blocks'),
    maxNumSeqs: n('max-num-seqs'),
    maxNumBatchedTokens: n('max-num-batched-tokens'),
    speedup: n('speedup'),
    model: s('model'),
    wire: s('wire') as MockWorkerOptions['wire'],
    seed: n('seed'),
    topic: s('topic'),
    faults: v.faults === undefined ? undefined : parseFaults(String(v.faults)),
  });
  const events = worker.kvEventsEndpoints.length > 0 ? `, KV events ${worker.kvEventsEndpoints.join(' ')}` : ', no KV events';
  const replay = worker.replayEndpoints.length > 0 ? `, replay ${worker.replayEndpoints.join(' ')}` : '';
  process.stdout.write(`mock worker ${worker.options.model}: ${worker.url}${events}${replay}\n`);
  return await new Promise<number>((resolve) => {
    const stop = () => void worker.close().then(() => resolve(0));
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    onMockCrash(worker, () => resolve(1));
  });
}
