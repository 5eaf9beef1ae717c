// `npm start`: a small tour of what kvroute computes, on the built package.
// Two chat requests share a system prompt; their block hashes agree exactly as far as the shared
// prefix goes, which is what lets a router send the second one to the worker that cached the first.
import { backend, blockHashes, nativeLoadError, sequenceHashes } from '../dist/index.js';

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
const seqA = sequenceHashes(a);
console.log('block  local hash (A)          sequence hash (A)');
for (let i = 0; i < a.length; i++) {
  console.log(`${String(i).padStart(5)}  ${a[i].toString().padEnd(22)}  ${seqA[i]}${i < shared ? '  shared with B' : ''}`);
}
