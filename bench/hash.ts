/**
 * Hashing: `blockHashes` of 4,096-token requests at block sizes 16 and 64, native vs pure-JS,
 * in ns per block. Targets: native ≤ 30 ns/block at block size 16; JS within 10× of native.
 */

import { blockHashes } from '../ts/index.js';
import { compareMedians, fmt, printTable, QUICK, writeResult } from './common.js';

const TOKENS = 4096;
const tokens = new Uint32Array(TOKENS);
for (let i = 0; i < TOKENS; i++) tokens[i] = (Math.imul(i, 2654435761) >>> 0) % 152_064;

const ms = QUICK ? 50 : 400;
const rounds = QUICK ? 3 : 9;
const rows = [];
for (const blockSize of [16, 64]) {
  const blocks = TOKENS / blockSize;
  const median = compareMedians(
    {
      native: () => blockHashes(tokens, blockSize, { backend: 'native' }),
      js: () => blockHashes(tokens, blockSize, { backend: 'js' }),
    },
    ms,
    rounds,
  );
  const native = median.native / blocks;
  const js = median.js / blocks;
  rows.push({ blockSize, nativeNsPerBlock: Number(fmt(native)), jsNsPerBlock: Number(fmt(js)), jsOverNative: Number(fmt(js / native, 2)) });
}
printTable(`blockHashes, ${TOKENS}-token requests (ns per block, median of ${rounds} alternating rounds)`, rows);
writeResult('hash', { parameters: { tokens: TOKENS, blockSizes: [16, 64], rounds, msPerRound: ms }, results: rows });
