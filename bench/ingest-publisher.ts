/**
 * The publishing side of `bench:ingest`, in its own process: one XPUB socket per worker on
 * consecutive 127.0.0.1 ports, waiting for a subscription on each, then, on "go", every batch of
 * the workload file as `[topic, seq, payload]` in order, as fast as libzmq takes them.
 */

import { readFileSync } from 'node:fs';
import { XPublisher } from 'zeromq';

const file = process.argv[2];
const buf = readFileSync(file);
const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
const count = view.getUint32(12, true);
let o = 20;
const batches: { worker: number; seq: number; payload: Uint8Array }[] = [];
for (let i = 0; i < count; i++) {
  const worker = view.getUint32(o, true);
  const seq = view.getUint32(o + 8, true);
  const len = view.getUint32(o + 16, true);
  batches.push({ worker, seq, payload: buf.subarray(o + 20, o + 20 + len) });
  o += 20 + len;
}
const workers = Math.max(...batches.map((b) => b.worker)) + 1;

async function bindAll(): Promise<{ sockets: XPublisher[]; port: number }> {
  for (;;) {
    const port = 20000 + Math.floor(Math.random() * 30000);
    const sockets: XPublisher[] = [];
    try {
      for (let w = 0; w < workers; w++) {
        const s = new XPublisher({ linger: 2000, sendHighWaterMark: 0 });
        sockets.push(s);
        await s.bind(`tcp://127.0.0.1:${port + w}`);
      }
      return { sockets, port };
    } catch {
      for (const s of sockets) s.close();
    }
  }
}

const { sockets, port } = await bindAll();
let subscribed = 0;
for (const s of sockets) {
  void (async () => {
    const [msg] = await s.receive();
    if (msg[0] === 1 && ++subscribed === sockets.length) process.send?.({ kind: 'ready' });
  })();
}
process.send?.({ kind: 'port', port, workers, batches: batches.length });
process.on('message', async (m) => {
  if (m !== 'go') return;
  // In workload order, one send at a time: on this 2-core machine concurrent send loops only
  // take more CPU away from the subscriber being measured.
  const seq = Buffer.alloc(8);
  for (const b of batches) {
    seq.writeBigUInt64BE(BigInt(b.seq));
    await sockets[b.worker].send(['', seq, b.payload]);
  }
  process.send?.({ kind: 'done' });
});
process.on('disconnect', () => {
  for (const s of sockets) s.close();
  process.exit(0);
});
