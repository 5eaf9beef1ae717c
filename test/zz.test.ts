import { test } from 'vitest';
import { generateTrace, replay } from '../ts/index.js';

test('replay', async () => {
  const t0 = performance.now();
  const rep = await replay({
    trace: generateTrace({ requests: 300, rate: 8, seed: 3 }),
    policies: ['kv', 'round-robin'],
    workers: 4,
    numGpuBlocks: 2048,
  });
  console.log(((performance.now() - t0) / 1000).toFixed(2), 's');
  for (const p of rep.policies)
    console.log(
      p.name,
      p.requests,
      p.simulatedSeconds.toFixed(1),
      'hit',
      p.hitRatio.toFixed(3),
      'ttft',
      p.ttftMs.mean.toFixed(1),
      p.ttftMs.p99.toFixed(1),
      'itl',
      p.itlMs.mean.toFixed(2),
      'pre',
      p.preemptions,
      p.workers.map((w) => w.requests).join(','),
    );
  console.log('upper', rep.trace.upperBoundHitRatio.toFixed(3));
}, 120000);
