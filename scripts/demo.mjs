// `npm start`: a small tour of what kvroute computes, on the built package.
// Two chat requests share a system prompt. Their block hashes agree exactly as far as the shared
// prefix goes; a KvIndex fed with the workers' KV events then tells which worker already holds
// the longest prefix of a new request.
import { backend, blockHashes, KvIndex, nativeLoadError, sequenceHashes } from '../dist/index.js';

const BLOCK_SIZE = 16;
const systemPrompt = Array.from({ length: 64 }, (_, i) => 1000 + i);
const requestA = [...systemPrompt, ...Array.from({ length: 40 }, (_, i) => 5000 + i)];
const requestB = [...systemPrompt, ...Array.from({ length: 40 }, (_, i) => 9000 + i)];

console.log(`kvroute demo (backend: ${backend}${nativeLoadError ? `, native unavailable: ${nativeLoadError}` : ''})\n`);
const a = blockHashes(requestA, BLOCK_SIZE);
const b = blockHashes(requestB, BLOCK_SIZE);
let shared = 0;
while (shared < Math.min(a.length, b.length) && a[shared] === b[shared]) shared++;
console.log(`request A: ${requestA.length} tokens -> ${a.length} full blocks of ${BLOCK_SIZE}`);
console.log(`request B: ${requestB.length} tokens -> ${b.length} full blocks of ${BLOCK_SIZE}`);
console.log(`shared prefix: ${shared} blocks (${shared * BLOCK_SIZE} tokens a worker holding A can reuse for B)\n`);

// Worker 1 served request A and published a Stored event for its blocks (named, as Dynamo
// engines do, by their sequence hashes); worker 2 served an unrelated request.
const seqA = sequenceHashes(a);
const other = blockHashes(
  Array.from({ length: 48 }, (_, i) => 7 + i),
  BLOCK_SIZE,
);
const seqOther = sequenceHashes(other);
const storedEvent = (workerId, locals, names) => ({
  worker_id: workerId,
  event: {
    event_id: 1,
    data: { stored: { parent_hash: null, blocks: [...locals].map((h, i) => ({ block_hash: names[i], tokens_hash: h })) } },
  },
});
const index = new KvIndex({ blockSize: BLOCK_SIZE });
index.applyEvents([storedEvent(1, a, seqA), storedEvent(2, other, seqOther)]);
await index.flush();

console.log('which worker holds the longest prefix of request B?');
for (const s of index.findMatchesForRequest(requestB).scores) {
  console.log(`  worker ${s.workerId} (dp rank ${s.dpRank}): ${s.blocks} of ${b.length} blocks cached, ${s.treeSize} blocks held in total`);
}
const stats = index.stats();
console.log(
  `\nindex: ${stats.workers} workers, ${stats.blocks} blocks held, ${stats.treeNodes} tree nodes, ~${Math.round(stats.bytesPerHeldBlock)} bytes per held block`,
);
index.close();
