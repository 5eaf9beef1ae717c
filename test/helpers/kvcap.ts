/**
 * Reader of the `.kvcap` captures in `../shared/engine-events/` (frames as vLLM's and SGLang's own
 * publisher code sent them) and their truth files. Never copied into the repo: tests skip with a
 * message when `shared/` is absent.
 */

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './dist.js';

export const CAPTURE_DIR = join(ROOT, '..', 'shared', 'engine-events');

export interface CaptureRecord {
  dpRank: number;
  /** 0 live `[topic, seq, payload]`, 1 replay reply, 2 replay request. */
  channel: number;
  frames: Uint8Array[];
}

export interface Capture {
  name: string;
  header: Record<string, unknown>;
  records: CaptureRecord[];
  truth: Truth;
}

export interface TruthBlock {
  hash: string;
  parent: string | null;
  medium: string | null;
  group_idx: number | null;
  tokens: number[] | null;
  lora_name: string | null;
  lora_id: number | null;
  cache_salt: string | null;
  reachable: boolean;
  placeholder: boolean;
  depth: number | null;
}

export interface TruthBatch {
  seq: number;
  incarnation: number;
  live: boolean;
  dp_rank: number;
  events: Record<string, unknown>[];
  labels: string[];
}

export interface Truth {
  block_size: number;
  engine: string;
  engine_version: string;
  layout: string;
  replay_topic_frame: boolean;
  ranks: Record<string, { batches: TruthBatch[]; final: { blocks: TruthBlock[] }; gaps: unknown[]; incarnations: unknown[] }>;
}

export function capturesPresent(): boolean {
  return existsSync(CAPTURE_DIR) && readdirSync(CAPTURE_DIR).some((f) => f.endsWith('.kvcap'));
}

export function captureNames(): string[] {
  if (!capturesPresent()) return [];
  return readdirSync(CAPTURE_DIR)
    .filter((f) => f.endsWith('.kvcap'))
    .map((f) => f.slice(0, -'.kvcap'.length))
    .sort();
}

export function readCapture(name: string): Capture {
  const buf = readFileSync(join(CAPTURE_DIR, `${name}.kvcap`));
  if (buf.subarray(0, 8).toString('latin1') !== 'KVEVCAP1') throw new Error(`${name}: not a kvcap file`);
  const headerLen = buf.readUInt32BE(8);
  const header = JSON.parse(buf.subarray(12, 12 + headerLen).toString('utf8'));
  const records: CaptureRecord[] = [];
  let at = 12 + headerLen;
  while (at < buf.length) {
    const dpRank = buf.readUInt16BE(at);
    const channel = buf[at + 2];
    const count = buf[at + 3];
    at += 4;
    const frames: Uint8Array[] = [];
    for (let i = 0; i < count; i++) {
      const len = buf.readUInt32BE(at);
      frames.push(new Uint8Array(buf.subarray(at + 4, at + 4 + len)));
      at += 4 + len;
    }
    records.push({ dpRank, channel, frames });
  }
  const truth = JSON.parse(readFileSync(join(CAPTURE_DIR, `${name}.truth.json`), 'utf8')) as Truth;
  return { name, header, records, truth };
}

export function seqOf(frame: Uint8Array): bigint {
  return new DataView(frame.buffer, frame.byteOffset, 8).getBigUint64(0, false);
}

/** Every distinct batch of a capture, per rank, in seq order: live ones and replayed ones. */
export function batchesByRank(capture: Capture): Map<number, { seq: bigint; payload: Uint8Array; live: boolean }[]> {
  const out = new Map<number, Map<bigint, { seq: bigint; payload: Uint8Array; live: boolean }>>();
  for (const r of capture.records) {
    let seq: bigint;
    let payload: Uint8Array;
    if (r.channel === 0) {
      seq = seqOf(r.frames[1]);
      payload = r.frames[2];
    } else if (r.channel === 1) {
      const f = r.frames.slice(1);
      const [s, p] = f.length === 3 ? [f[1], f[2]] : [f[0], f[1]];
      if (p.length === 0) continue;
      seq = seqOf(s);
      payload = p;
    } else continue;
    const rank = out.get(r.dpRank) ?? new Map();
    out.set(r.dpRank, rank);
    if (!rank.has(seq)) rank.set(seq, { seq, payload, live: r.channel === 0 });
  }
  return new Map([...out].map(([rank, m]) => [rank, [...m.values()].sort((a, b) => (a.seq < b.seq ? -1 : 1))]));
}
