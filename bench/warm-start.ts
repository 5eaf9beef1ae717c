/**
 * Warm start: how long a fresh router takes to read a peer's index from its `GET /dump`, and how
 * large that document is, with the peer's blocks all on the device and with half of each chain
 * offloaded to host memory (the lower tiers are dumped as runs, see The KV index, item 7, in
 * the README). The peer is a real gateway on 127.0.0.1; its index is fed Stored events directly:
 * 32 workers, 64 chains each of 512 blocks with random 64-bit hashes (1,048,576 blocks; `--quick`:
 * 4 workers, 2 chains each). Each backend reads each document three times (once with `--quick`),
 * alternating the two documents.
 */

import { type BackendName, createGateway, KvRouter, type RouterEvent, warmStart } from '../ts/index.js';
import { fmt, machine, printTable, QUICK, writeResult } from './common.js';

const BS = 16;
const WORKERS = QUICK ? 4 : 32;
const CHAINS_PER_WORKER = QUICK ? 2 : 64;
const CHAIN_BLOCKS = 512;
const READS = QUICK ? 1 : 3;
const BACKENDS: BackendName[] = ['native', 'js'];

/** A seeded xorshift64 of random u64 hashes, the same for every variant. */
function hashes(seed: bigint): () => bigint {
  let x = seed;
  const mask = (1n << 64n) - 1n;
  return () => {
    x ^= (x << 13n) & mask;
    x ^= x >> 7n;
    x ^= (x << 17n) & mask;
    return x;
  };
}

function storedEvent(workerId: number, tier: RouterEvent['storage_tier'], parent: bigint | null, blocks: [bigint, bigint][]): RouterEvent {
  return {
    worker_id: workerId,
    storage_tier: tier,
    event: {
      event_id: 0,
      dp_rank: 0,
      data: { stored: { parent_hash: parent, blocks: blocks.map(([block_hash, tokens_hash]) => ({ block_hash, tokens_hash })) } },
    },
  };
}

/** The peer's events: each chain on the device, or its first half there and the rest in host memory. */
function events(offloaded: boolean): RouterEvent[] {
  const next = hashes(0x9e3779b97f4a7c15n);
  const out: RouterEvent[] = [];
  for (let w = 0; w < WORKERS; w++) {
    for (let c = 0; c < CHAINS_PER_WORKER; c++) {
      const chain = Array.from({ length: CHAIN_BLOCKS }, (): [bigint, bigint] => [next(), next()]);
      const split = offloaded ? CHAIN_BLOCKS / 2 : CHAIN_BLOCKS;
      out.push(storedEvent(w, 'device', null, chain.slice(0, split)));
      if (offloaded) out.push(storedEvent(w, 'host_pinned', chain[split - 1][0], chain.slice(split)));
    }
  }
  return out;
}

interface Variant {
  name: string;
  offloaded: boolean;
}
const VARIANTS: Variant[] = [
  { name: 'all on the device', offloaded: false },
  { name: 'half in host memory', offloaded: true },
];

async function main(): Promise<void> {
  const blocks = WORKERS * CHAINS_PER_WORKER * CHAIN_BLOCKS;
  const rows: Array<Record<string, string | number>> = [];
  const result: Record<string, unknown> = { machine: machine(), blocks, reads: READS };
  for (const backend of BACKENDS) {
    const peers = [];
    for (const v of VARIANTS) {
      const gw = createGateway({ blockSize: BS, backend, logLevel: false });
      gw.router.applyEvents(events(v.offloaded));
      await gw.router.flush();
      const { url } = await gw.listen();
      const bytes = (await (await fetch(`${url}/dump`)).arrayBuffer()).byteLength;
      const memoryBytes = gw.router.index.stats().memoryBytes;
      peers.push({ v, gw, url, bytes, memoryBytes, seconds: [] as number[], lowerTierBlocks: 0 });
    }
    for (let read = 0; read < READS; read++) {
      for (const p of peers) {
        const fresh = new KvRouter({ blockSize: BS, backend });
        const t0 = performance.now();
        const r = await warmStart(fresh, { peer: p.url });
        p.seconds.push((performance.now() - t0) / 1000);
        if (r.blocks + r.lowerTierBlocks !== blocks)
          throw new Error(`${p.v.name}: read ${r.blocks} + ${r.lowerTierBlocks} blocks of ${blocks}`);
        p.lowerTierBlocks = r.lowerTierBlocks;
        await fresh.closeAsync();
      }
    }
    for (const p of peers) {
      await p.gw.close();
      const s = [...p.seconds].sort((a, b) => a - b);
      rows.push({
        backend,
        index: p.v.name,
        'lower-tier blocks': p.lowerTierBlocks,
        'peer index MB': fmt(p.memoryBytes / 1e6, 1),
        'document MB': fmt(p.bytes / 1e6, 1),
        'bytes per block': fmt(p.bytes / blocks, 1),
        'warm start s (min-max)': `${fmt(s[0], 2)}-${fmt(s[s.length - 1], 2)}`,
      });
      result[`${backend}: ${p.v.name}`] = {
        bytes: p.bytes,
        memoryBytes: p.memoryBytes,
        seconds: p.seconds,
        lowerTierBlocks: p.lowerTierBlocks,
      };
    }
  }
  printTable(`Warm start from a peer's /dump (${blocks.toLocaleString('en')} blocks, ${READS} reads each)`, rows);
  writeResult('warm-start', result);
}

await main();
